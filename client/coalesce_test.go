package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/client"
)

// countingTransport counts the requests that reach the server, by path.
// With a gate, it holds every request until the gate opens, telling
// arrived of each.
type countingTransport struct {
	mu      sync.Mutex
	paths   map[string]int
	gate    chan struct{}
	arrived chan struct{}
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.paths[r.URL.Path]++
	c.mu.Unlock()
	if c.gate != nil {
		c.arrived <- struct{}{}
		<-c.gate
	}
	return http.DefaultTransport.RoundTrip(r)
}

func (c *countingTransport) count(path string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.paths[path]
}

func coalescingClient(t *testing.T, e *env, linger time.Duration, max int) (*client.Client, *countingTransport) {
	t.Helper()
	return coalescingClientVia(t, e, linger, max, &countingTransport{paths: map[string]int{}})
}

func coalescingClientVia(t *testing.T, e *env, linger time.Duration, max int, tr *countingTransport) (*client.Client, *countingTransport) {
	t.Helper()
	c, err := client.New(client.Config{BaseURL: e.url, Token: "client-token", Coalesce: linger, MaxBatch: max,
		HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	return c, tr
}

// While two batches are on their way, concurrent calls gather into the
// next one, and get what single calls get: one grant for a contended key,
// refusals naming that holder.
func TestCoalescedCallsShareOneBatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const callers = 10
	// The server answers nothing until three batches have come: the first
	// two callers leave alone, the other eight fill the third batch (a
	// linger far longer than the test: only a full batch can leave).
	tr := &countingTransport{paths: map[string]int{}, gate: make(chan struct{}), arrived: make(chan struct{}, callers)}
	c, _ := coalescingClientVia(t, e, time.Hour, callers-2, tr)
	go func() {
		for range 3 {
			<-tr.arrived
		}
		close(tr.gate)
	}()

	var (
		wg      sync.WaitGroup
		granted atomic.Int64
		refused = make(chan *holdfast.LockedError, callers)
	)
	for i := range callers {
		wg.Go(func() {
			o := holdfast.Owner{Session: fmt.Sprintf("s-%d", i), User: fmt.Sprintf("u-%d", i)}
			_, err := c.Acquire(context.Background(), holdfast.AcquireRequest{Keys: []string{"policy/1"}, Owner: o})
			var locked *holdfast.LockedError
			switch {
			case err == nil:
				granted.Add(1)
			case errors.As(err, &locked):
				refused <- locked
			default:
				t.Errorf("acquire for %s: %v", o.Session, err)
			}
		})
	}
	wg.Wait()
	close(refused)

	if n := tr.count("/v1/batch"); n != 3 {
		t.Errorf("%d batch requests, want 3 (one call, one call, eight calls)", n)
	}
	if n := tr.count("/v1/locks/acquire"); n != 0 {
		t.Errorf("%d single acquire requests, want 0", n)
	}
	if granted.Load() != 1 {
		t.Fatalf("%d grants of one key, want 1", granted.Load())
	}
	page, err := e.reader.Locks(context.Background(), holdfast.LockQuery{Key: "policy/1"})
	if err != nil || len(page.Locks) != 1 {
		t.Fatalf("locks on policy/1: %v, %v", page, err)
	}
	for locked := range refused {
		if h := locked.Conflicts[0].Holders; len(h) != 1 || h[0].Token != page.Locks[0].Token {
			t.Errorf("a refusal names %v, want the one holder %v", h, page.Locks[0])
		}
	}
}

// A lone call leaves when its linger is over, and its error is the one a
// single call gets.
func TestCoalescedErrorsMatchSingleCalls(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c, tr := coalescingClient(t, e, time.Millisecond, 0)
	ctx := context.Background()
	req := holdfast.VerifyRequest{Key: "policy/1", Session: bob.Session}

	_, batched := c.Verify(ctx, req)
	_, single := e.app.Verify(ctx, req)
	var a, b *holdfast.LockLostError
	if !errors.As(batched, &a) || !errors.As(single, &b) {
		t.Fatalf("verify of a lock never held: coalesced %v, single %v; want lock_lost from both", batched, single)
	}
	if a.Reason != b.Reason || a.Message != b.Message {
		t.Errorf("coalesced error %+v, single %+v", a, b)
	}

	locks, err := c.Acquire(ctx, holdfast.AcquireRequest{Keys: []string{"policy/1"}, Owner: bob})
	if err != nil {
		t.Fatal(err)
	}
	hb, err := c.Heartbeat(ctx, holdfast.HeartbeatRequest{Session: bob.Session})
	if err != nil || hb.Session.Locks != 1 {
		t.Fatalf("heartbeat: %+v, %v", hb, err)
	}
	rel, err := c.Release(ctx, holdfast.ReleaseRequest{Session: bob.Session, Keys: []string{"policy/1"}})
	if err != nil || len(rel.Released) != 1 || rel.Released[0].Token != locks.Locks[0].Token {
		t.Fatalf("release: %+v, %v", rel, err)
	}
	if n := tr.count("/v1/batch"); n != 4 {
		t.Errorf("%d batch requests for 4 calls one after another, want 4", n)
	}
}

// A caller whose context ends stops waiting; the others' batch goes on.
func TestCoalescedCallHonoursItsContext(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c, _ := coalescingClient(t, e, time.Hour, 0)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := c.Acquire(ctx, holdfast.AcquireRequest{Keys: []string{"policy/1"}, Owner: bob})
	if !errors.Is(err, holdfast.ErrUnavailable) || !errors.Is(err, context.Canceled) {
		t.Fatalf("acquire with a cancelled context = %v, want unavailable wrapping context.Canceled", err)
	}
}

// The linger sends batches ahead of one coming back only while fewer than
// four are on their way: a server slower than the linger is not handed
// ever more, ever smaller batches.
func TestCoalescedLingerKeepsFourInFlight(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const callers = 6
	tr := &countingTransport{paths: map[string]int{}, gate: make(chan struct{}), arrived: make(chan struct{}, callers)}
	const linger = time.Millisecond
	c, _ := coalescingClientVia(t, e, linger, 0, tr)
	var wg sync.WaitGroup
	acquire := func(i int) {
		wg.Go(func() {
			o := holdfast.Owner{Session: fmt.Sprintf("s-%d", i)}
			if _, err := c.Acquire(context.Background(), holdfast.AcquireRequest{Keys: []string{fmt.Sprintf("policy/%d", i)}, Owner: o}); err != nil {
				t.Errorf("acquire %d: %v", i, err)
			}
		})
	}
	// Two leave at once, two more after the linger; each caller starts
	// once the batch before has reached the server.
	for i := range 4 {
		acquire(i)
		<-tr.arrived
	}
	acquire(4)
	acquire(5)
	select {
	case <-tr.arrived:
		t.Error("a fifth batch left while four were on their way")
	case <-time.After(100 * linger):
	}
	close(tr.gate)
	wg.Wait()
}

// Batches that hang do not hold up the calls after them for longer than
// a second: the fifth batch leaves although four are on their way, and so
// on up to eight; a ninth waits for one to come back, so that a server
// that never answers is not sent a batch a second for ever.
func TestCoalescedCallsDoNotWaitForeverOnHungBatches(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tr := &countingTransport{paths: map[string]int{}, gate: make(chan struct{}), arrived: make(chan struct{}, 9)}
	c, _ := coalescingClientVia(t, e, time.Millisecond, 0, tr)
	var wg sync.WaitGroup
	for i := range 9 {
		wg.Go(func() {
			o := holdfast.Owner{Session: fmt.Sprintf("s-%d", i)}
			if _, err := c.Acquire(context.Background(), holdfast.AcquireRequest{Keys: []string{fmt.Sprintf("policy/%d", i)}, Owner: o}); err != nil {
				t.Errorf("acquire %d: %v", i, err)
			}
		})
		if i == 8 {
			break
		}
		select {
		case <-tr.arrived:
		case <-time.After(time.Minute):
			t.Fatalf("batch %d waited a minute for %d that hang", i+1, i)
		}
	}
	select {
	case <-tr.arrived:
		t.Error("a ninth batch left while eight were on their way")
	case <-time.After(2500 * time.Millisecond):
	}
	close(tr.gate)
	wg.Wait()
}

// A server may refuse a batch before it has read the body, while the
// transport is still sending it; the next batch must not be written into
// that buffer (the race detector tells).
func TestCoalescedBodyOfARefusedBatchIsNotReused(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		w.Write([]byte(`{"error":{"code":"unauthorized","message":"no"}}`))
	}))
	t.Cleanup(srv.Close)
	c, err := client.New(client.Config{BaseURL: srv.URL, Coalesce: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	note := strings.Repeat("n", 20<<10)
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			for j := range 5 {
				keys := []string{fmt.Sprintf("policy/%d-%d", i, j)}
				_, err := c.Acquire(context.Background(), holdfast.AcquireRequest{Keys: keys, Owner: bob, Note: note})
				if err == nil {
					t.Error("acquire against a server that refuses everything succeeded")
				}
				keys[0] = "reused" // the caller's slice is its own again
			}
		})
	}
	wg.Wait()
}
