package diskwatch

import (
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/holdfast/holdfast/store"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// waitFor polls cond for up to ten seconds: the watch checks on a ticker,
// and a loaded machine may be slow to run it.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("still not %s after 10s", what)
		}
	}
}

func TestStallIsDeclaredAndEnds(t *testing.T) {
	w := New("teststore", 20*time.Millisecond, 2, quiet)
	defer w.Close()
	never := make(chan struct{})

	w.Begin(1)
	waitFor(t, "stalled", func() bool { return w.Err() != nil })
	err := w.Err()
	if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), "teststore: ") ||
		!strings.Contains(err.Error(), "has not completed a write") {
		t.Fatalf("Err = %v, want the store's name, store.ErrUnavailable and what happened", err)
	}
	// A caller waiting for a write that is not durable fails at once,
	// one whose write is durable does not.
	if err := w.Wait(never); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Wait during a stall = %v, want store.ErrUnavailable", err)
	}
	durable := make(chan struct{})
	close(durable)
	if err := w.Wait(durable); err != nil {
		t.Fatalf("Wait for a durable write during a stall = %v, want nil", err)
	}

	// Another slot's write, begun and ended meanwhile, does not end it.
	w.Begin(0)
	w.End(0)
	if w.Err() == nil {
		t.Fatal("the stall ended while the stalled write was still under way")
	}
	w.End(1)
	if err := w.Err(); err != nil {
		t.Fatalf("Err after the stalled write returned = %v, want nil", err)
	}

	// A waiter is woken by a stall declared while it waits (or fails at
	// once, should the stall come first).
	got := make(chan error, 1)
	go func() { got <- w.Wait(never) }()
	w.Begin(0)
	select {
	case err := <-got:
		if !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("Wait woken by the second stall = %v, want store.ErrUnavailable", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a waiter was not woken by the second stall within 10s")
	}
	w.End(0)
}

func TestNoLimitWatchesNothing(t *testing.T) {
	w := New("teststore", -1, 1, quiet)
	defer w.Close()
	w.Begin(0)
	w.base = w.base.Add(-time.Hour) // the write began an hour ago
	w.check()
	if err := w.Err(); err != nil {
		t.Fatalf("a watch without a limit declared a stall: %v", err)
	}
	w.End(0)
}

func TestZeroLimitIsTheDefault(t *testing.T) {
	w := New("teststore", 0, 1, quiet)
	defer w.Close()
	if w.Limit() != defaultLimit {
		t.Fatalf("Limit of a watch made with 0 = %v, want the default %v", w.Limit(), defaultLimit)
	}
}
