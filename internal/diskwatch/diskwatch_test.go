package diskwatch

import (
	"context"
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
	if err := w.Wait(context.Background(), never); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Wait during a stall = %v, want store.ErrUnavailable", err)
	}
	durable := make(chan struct{})
	close(durable)
	if err := w.Wait(context.Background(), durable); err != nil {
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

	// A waiter blocked before the next stall is woken by it.
	got := make(chan error, 1)
	go func() { got <- w.Wait(context.Background(), never) }()
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

func TestWaitEndsWithItsCaller(t *testing.T) {
	w := New("teststore", time.Hour, 1, quiet)
	defer w.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := w.Wait(ctx, make(chan struct{})); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait with a cancelled context = %v, want context.Canceled", err)
	}
}

func TestNoLimitWatchesNothing(t *testing.T) {
	w := New("teststore", -1, 1, quiet)
	defer w.Close()
	w.now = func() time.Time { return time.Now().Add(-time.Hour) }
	w.Begin(0)
	w.now = time.Now
	w.check()
	if err := w.Err(); err != nil {
		t.Fatalf("a watch without a limit declared a stall: %v", err)
	}
}
