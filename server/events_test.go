package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdfast/holdfast/store"
)

type sseEvent struct {
	id, event, data string
	comment         string
}

// eventStream is a live /v1/events connection.
type eventStream struct {
	t      testing.TB
	events chan sseEvent
	cancel context.CancelFunc
	done   chan struct{} // closed when the server ends the stream
}

// waitLimit only bounds a test that would otherwise hang; nothing asserts
// how fast events arrive.
const waitLimit = 10 * time.Second

func (h *harness) stream(query, lastEventID string) *eventStream {
	h.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", h.url+"/v1/events"+query, nil)
	req.Header.Set("Authorization", "Bearer "+readerToken)
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		h.t.Fatal(err)
	}
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream" {
		cancel()
		h.t.Fatalf("events: status %d, content type %q", res.StatusCode, res.Header.Get("Content-Type"))
	}
	s := &eventStream{t: h.t, events: make(chan sseEvent, 100), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		var e sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				select {
				case s.events <- e:
				case <-ctx.Done():
					return
				}
				e = sseEvent{}
			case strings.HasPrefix(line, ":"):
				e.comment = strings.TrimSpace(line[1:])
			case strings.HasPrefix(line, "id: "):
				e.id = line[4:]
			case strings.HasPrefix(line, "event: "):
				e.event = line[7:]
			case strings.HasPrefix(line, "data: "):
				e.data = line[6:]
			}
		}
	}()
	h.t.Cleanup(cancel)
	return s
}

// next returns the next event, skipping comments.
func (s *eventStream) next() sseEvent {
	s.t.Helper()
	for {
		select {
		case e := <-s.events:
			if e.comment != "" && e.id == "" {
				continue
			}
			return e
		case <-s.done:
			s.t.Fatal("the stream ended")
		case <-time.After(waitLimit):
			s.t.Fatal("no event")
		}
	}
}

type entry struct {
	ID    uint64 `json:"id"`
	At    string `json:"at"`
	Event string `json:"event"`
	Lock  struct {
		Key   string `json:"key"`
		Owner struct {
			Session string `json:"session"`
		} `json:"owner"`
	} `json:"lock"`
	Actor  string `json:"actor"`
	Reason string `json:"reason"`
}

// nextEvent returns the next event and the entry its data holds.
func (s *eventStream) nextEvent() (sseEvent, entry) {
	s.t.Helper()
	e := s.next()
	var en entry
	if err := json.Unmarshal([]byte(e.data), &en); err != nil {
		s.t.Fatalf("data %q: %v", e.data, err)
	}
	return e, en
}

func (s *eventStream) nextEntry() entry {
	s.t.Helper()
	e, en := s.nextEvent()
	if e.id != strconv.FormatUint(en.ID, 10) || e.event != en.Event {
		s.t.Fatalf("id %q and event %q disagree with data %s", e.id, e.event, e.data)
	}
	return en
}

// A commit whose answer was lost drops every stream, which catches up
// from the audit log; one that had sent nothing yet catches up from where
// it began, not from the start of the log.
func TestEventsAfterACommitOfUnknownOutcome(t *testing.T) {
	t.Parallel()
	lose := &atomic.Bool{}
	h := newHarness(t, options{loseAnswers: lose})
	for _, key := range []string{"old/1", "old/2", "old/3"} {
		h.post("/v1/locks/acquire", acquireBody("s1", key), 200)
	}
	s := h.stream("", "")
	lose.Store(true)
	wantError(t, h.call("POST", "/v1/locks/acquire", clientToken, acquireBody("s2", "new/1")), 503, "unavailable", "")
	lose.Store(false)
	if e := s.nextEntry(); e.Event != "acquired" || e.Lock.Key != "new/1" {
		t.Fatalf("after the drop the stream sent %+v, want the acquire of new/1 that committed", e)
	}
	h.post("/v1/locks/acquire", acquireBody("s2", "new/2"), 200)
	if e := s.nextEntry(); e.Lock.Key != "new/2" {
		t.Fatalf("then the stream sent %+v, want the acquire of new/2", e)
	}
}

func TestEventsLiveWithPrefix(t *testing.T) {
	t.Parallel()
	h := newHarness(t, options{})
	s := h.stream("?prefix=policy", "")
	h.post("/v1/locks/acquire", acquireBody("s1", "policy/1"), 200)
	h.post("/v1/locks/acquire", acquireBody("s1", "order/1"), 200)
	h.post("/v1/locks/acquire", acquireBody("s1", "policyholder/1"), 200)
	h.post("/v1/locks/release", map[string]any{"session": "s1", "keys": []string{"policy/1"}}, 200)
	h.want(h.call("POST", "/v1/admin/force-release", adminToken, map[string]any{"session": "s1", "reason": "cleanup", "actor": "ops"}), 200)

	acquired := s.nextEntry()
	if acquired.Event != "acquired" || acquired.Lock.Key != "policy/1" || acquired.Lock.Owner.Session != "s1" {
		t.Fatalf("first event = %+v", acquired)
	}
	// order/1 and policyholder/1 are not under the prefix policy.
	released := s.nextEntry()
	if released.Event != "released" || released.Lock.Key != "policy/1" || released.ID <= acquired.ID {
		t.Fatalf("second event = %+v", released)
	}
	select {
	case e := <-s.events:
		t.Fatalf("unexpected event %+v", e)
	default:
	}

	all := h.stream("", "")
	h.post("/v1/locks/acquire", acquireBody("s2", "order/2"), 200)
	if e := all.nextEntry(); e.Lock.Key != "order/2" {
		t.Fatalf("unfiltered stream got %+v", e)
	}
}

func TestEventsResumeFromLastEventID(t *testing.T) {
	t.Parallel()
	h := newHarness(t, options{})
	for _, k := range []string{"doc/1", "doc/2", "doc/3"} {
		h.post("/v1/locks/acquire", acquireBody("s1", k), 200)
	}
	first := list(t, h.get("/v1/admin/audit?limit=1", 200), "entries")
	firstID := uint64(at(t, first, 0, "id").(float64))

	// A trailing "/" names the same subtree as "doc".
	s := h.stream("?prefix=doc/", strconv.FormatUint(firstID, 10))
	h.post("/v1/locks/acquire", acquireBody("s1", "doc/4"), 200)
	var keys []string
	last := firstID
	for range 3 {
		e := s.nextEntry()
		if e.ID <= last {
			t.Fatalf("id %d after %d: replayed twice or out of order", e.ID, last)
		}
		last = e.ID
		keys = append(keys, e.Lock.Key)
	}
	if strings.Join(keys, " ") != "doc/2 doc/3 doc/4" {
		t.Fatalf("resumed keys = %v", keys)
	}

	// Resuming from the very start replays everything.
	again := h.stream("", "0")
	if e := again.nextEntry(); e.ID != firstID {
		t.Fatalf("replay from 0 starts at %d, want %d", e.ID, firstID)
	}
}

func TestEventsPingAndLongLife(t *testing.T) {
	t.Parallel()
	h := newHarness(t, options{eventPing: 5 * time.Millisecond, readTimeout: 50 * time.Millisecond, writeTimeout: 50 * time.Millisecond})
	s := h.stream("", "")
	// Enough pings that the stream has outlived the server's read and
	// write timeouts many times over.
	for pings := 0; pings < 40; {
		select {
		case e := <-s.events:
			if e.comment == "ping" {
				pings++
			}
		case <-s.done:
			t.Fatalf("stream ended after %d pings", pings)
		case <-time.After(waitLimit):
			t.Fatal("no ping")
		}
	}
	h.post("/v1/locks/acquire", acquireBody("s1", "late/1"), 200)
	if e := s.nextEntry(); e.Lock.Key != "late/1" {
		t.Fatalf("event = %+v", e)
	}
}

func TestEventsEndOnShutdown(t *testing.T) {
	t.Parallel()
	h := newHarness(t, options{})
	s := h.stream("", "")
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := h.httpSrv.Config.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown waited on the event stream: %v", err)
	}
	select {
	case <-s.done:
	case <-time.After(waitLimit):
		t.Fatal("stream still open after shutdown")
	}
}

func TestEventsRefuseBadInput(t *testing.T) {
	t.Parallel()
	h := newHarness(t, options{})
	req, _ := http.NewRequest("GET", h.url+"/v1/events", nil)
	req.Header.Set("Authorization", "Bearer "+readerToken)
	req.Header.Set("Last-Event-ID", "yesterday")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 400 {
		t.Errorf("bad Last-Event-ID: status %d, want 400", res.StatusCode)
	}
	wantError(t, h.call("GET", "/v1/events?prefix=/policy", readerToken, nil), 400, "invalid", "prefix")
	wantError(t, h.call("GET", "/v1/events?prefixx=policy", readerToken, nil), 400, "invalid", "prefixx")
}

func TestEventsCatchUpAfterFallingBehind(t *testing.T) {
	t.Parallel()
	h := newHarness(t, options{tinySocketBuffers: true})

	dialer := &net.Dialer{}
	var clientConn *net.TCPConn
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dialer.DialContext(ctx, network, addr)
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetReadBuffer(1024)
			clientConn = tc
		}
		return c, err
	}}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", h.url+"/v1/events?prefix=flood", nil)
	req.Header.Set("Authorization", "Bearer "+readerToken)
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()

	// Nobody reads the stream while far more entries than a subscriber
	// may buffer are committed.
	const batches, perBatch = 3, 1000
	for b := range batches {
		ops := make([]any, perBatch)
		for i := range ops {
			ops[i] = map[string]any{"op": "acquire", "body": acquireBody(fmt.Sprintf("s%d-%d", b, i), fmt.Sprintf("flood/%d/%d", b, i))}
		}
		h.post("/v1/batch", map[string]any{"ops": ops}, 200)
	}
	var want []uint64
	for after := ""; ; {
		page := h.get("/v1/admin/audit?key=flood&limit=1000"+after, 200)
		for _, e := range list(t, page, "entries") {
			want = append(want, uint64(at(t, e, "id").(float64)))
		}
		if page["next"] == nil {
			break
		}
		after = "&after=" + page["next"].(string)
	}
	if len(want) != batches*perBatch {
		t.Fatalf("audit has %d entries, want %d", len(want), batches*perBatch)
	}

	// Reading with tiny buffers is slow; the flood is over.
	h.tiny.widen()
	clientConn.SetReadBuffer(1 << 20)
	stop := time.AfterFunc(3*waitLimit, cancel) // a missing event must fail, not hang
	defer stop.Stop()
	sc := bufio.NewScanner(res.Body)
	var got []uint64
	for len(got) < len(want) && sc.Scan() {
		if id, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
			n, err := strconv.ParseUint(id, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, n)
		}
	}
	for i := range want {
		if i >= len(got) || got[i] != want[i] {
			t.Fatalf("event %d: got ids %v..., want %v...", i, got[max(0, i-2):min(len(got), i+3)], want[max(0, i-2):min(len(want), i+3)])
		}
	}
	if !strings.Contains(h.logs.String(), "catching up from the audit log") {
		t.Fatal("the stream never fell behind, so this test did not exercise catching up")
	}
}

// A stream gets every event of concurrent requests, in the order of
// their IDs, over the embedded log store, whose commits many requests
// share, and over memstore: the leaders woken together must publish in
// commit order, which is ID order there.
func TestEventsOfConcurrentRequestsAllArrive(t *testing.T) {
	t.Parallel()
	for name, opts := range map[string]options{"logstore": {logStore: true}, "memstore": {}} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			eventsOfConcurrentRequests(t, newHarness(t, opts))
		})
	}
}

func eventsOfConcurrentRequests(t *testing.T, h *harness) {
	s := h.stream("", "")
	const callers, each = 16, 20
	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() {
			for i := range each {
				body := fmt.Sprintf(`{"keys":["order/%d-%d"],"owner":{"session":"s-%d"}}`, c, i, c)
				req, _ := http.NewRequest("POST", h.url+"/v1/locks/acquire", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+clientToken)
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				res.Body.Close()
				if res.StatusCode != 200 {
					t.Errorf("acquire: status %d", res.StatusCode)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	var last uint64
	for n := range callers * each {
		e := s.nextEntry()
		if e.ID <= last {
			t.Fatalf("event %d has ID %d after %d", n, e.ID, last)
		}
		last = e.ID
	}
}

// Over PostgreSQL an entry can reach a stream after one with a higher ID
// (audit IDs are drawn before commit, and servers commit in an order of
// their own); here another server's entries arrive that way through
// Manager.Publish. The stream sends each once, the late one under the
// highest ID sent so far, so that Last-Event-ID never goes back.
func TestEventsSendAnEntryThatComesAfterAHigherID(t *testing.T) {
	t.Parallel()
	h := newHarness(t, options{})
	s := h.stream("", "")
	h.post("/v1/locks/acquire", acquireBody("s1", "doc/1"), 200)
	first := s.nextEntry()

	other := func(id uint64, key string) store.AuditEntry {
		now := time.Now()
		return store.AuditEntry{ID: id, At: now, Event: "acquired",
			Lock: store.Lock{Key: key, Session: "s-other", User: "u", Token: id, AcquiredAt: now, ExpiresAt: now.Add(time.Hour)}}
	}
	h.mgr.Publish(other(first.ID+10, "doc/high"))
	h.mgr.Publish(other(first.ID+5, "doc/late"))
	h.mgr.Publish(other(first.ID+5, "doc/late")) // a repeat is not sent again
	h.mgr.Publish(other(first.ID+11, "doc/next"))

	for _, want := range []struct {
		cursor, id uint64
		key        string
	}{{first.ID + 10, first.ID + 10, "doc/high"}, {first.ID + 10, first.ID + 5, "doc/late"}, {first.ID + 11, first.ID + 11, "doc/next"}} {
		e, en := s.nextEvent()
		if e.id != strconv.FormatUint(want.cursor, 10) || en.ID != want.id || en.Lock.Key != want.key {
			t.Fatalf("got id: %s, entry %d %s; want id: %d, entry %d %s", e.id, en.ID, en.Lock.Key, want.cursor, want.id, want.key)
		}
	}
}
