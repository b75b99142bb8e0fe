package bench

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The durable trivial handler answers as the ceiling does, but only once
// the acquire, release or batch is in its log; heartbeats it does not
// write, as holdfast syncs none.
func TestDurableTrivialHandlerLogsBeforeAnswering(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	h, closer, err := DurableTrivialHandler(dir)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(h)
	defer hs.Close()
	c, err := newHTTPClient(hs.URL, 8, 0)
	if err != nil {
		t.Fatal(err)
	}
	tg := &httpTarget{c}
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			session, key := fmt.Sprintf("durable-%d", i), fmt.Sprintf("cycle/durable-%d", i)
			if ok, err := tg.acquire(ctx, session, []string{key}); !ok || err != nil {
				t.Errorf("acquire %s = %v, %v; want granted", key, ok, err)
			}
			if err := tg.release(ctx, session, []string{key}); err != nil {
				t.Errorf("release %s: %v", key, err)
			}
		})
	}
	wg.Wait()
	if err := tg.heartbeat(ctx, "heartbeat-single", time.Minute); err != nil {
		t.Fatalf("heartbeat: %v", err)
	}
	if err := tg.heartbeatBatch(ctx, []string{"heartbeat-batched"}, time.Minute); err != nil {
		t.Fatalf("batched heartbeat: %v", err)
	}

	logged, err := os.ReadFile(filepath.Join(dir, "trivial.log"))
	if err != nil {
		t.Fatal(err)
	}
	if len(logged) != groupLogSize {
		t.Errorf("the log is %d bytes, want its region of %d written once", len(logged), groupLogSize)
	}
	for i := range 32 {
		// An acquire's body names the key and the session; a release's
		// the key after the session.
		acquire := fmt.Sprintf(`"keys":["cycle/durable-%d"],"owner":{"session":"durable-%d"`, i, i)
		release := fmt.Sprintf(`"session":"durable-%d","keys":["cycle/durable-%d"]`, i, i)
		for _, want := range []string{acquire, release} {
			if !bytes.Contains(logged, []byte(want)) {
				t.Errorf("the log lacks %s", want)
			}
		}
	}
	for _, s := range []string{"heartbeat-single", "heartbeat-batched"} {
		if bytes.Contains(logged, []byte(s)) {
			t.Errorf("the log has a heartbeat of %s; holdfast syncs none", s)
		}
	}

	// Once its log is closed, it answers unavailable rather than grant
	// what it did not write.
	closer.Close()
	resp, err := http.Post(hs.URL+"/v1/locks/acquire", "application/json",
		strings.NewReader(`{"keys":["cycle/late"],"owner":{"session":"late","user":"late"}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("an acquire after the log closed answered %d, want 503", resp.StatusCode)
	}
}

// The log writes round its region: past its end, the next group starts
// at its beginning, and the file never grows.
func TestGroupLogWritesRoundItsRegion(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "log")
	l, err := openGroupLog(path, 100)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, body := range []string{strings.Repeat("a", 60), strings.Repeat("b", 30), strings.Repeat("c", 20)} {
		if err := l.append([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// a×60 b×30 fill 90 bytes; c×20 would pass 100, so it starts again at 0.
	want := strings.Repeat("c", 20) + strings.Repeat("a", 40) + strings.Repeat("b", 30) + strings.Repeat("\x00", 10)
	if string(got) != want {
		t.Errorf("the log holds %q, want %q", got, want)
	}
}

// The waiting trivial handler answers an acquire only after its group's
// wait, and writes nothing anywhere.
func TestWaitingTrivialHandlerWaitsForEachGroup(t *testing.T) {
	t.Parallel()
	const wait = 20 * time.Millisecond
	h, closer := WaitingTrivialHandler(wait)
	defer closer.Close()
	hs := httptest.NewServer(h)
	defer hs.Close()
	c, err := newHTTPClient(hs.URL, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	tg := &httpTarget{c}
	start := time.Now()
	if ok, err := tg.acquire(context.Background(), "waiting", []string{"cycle/waiting"}); !ok || err != nil {
		t.Fatalf("acquire = %v, %v; want granted", ok, err)
	}
	// time.Sleep waits at least as long as it is asked: a lower bound,
	// which the machine's load cannot break.
	if took := time.Since(start); took < wait {
		t.Errorf("the acquire was answered after %v, before its group's wait of %v", took, wait)
	}
}
