package holdfast

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdfast/holdfast/memstore"
	"github.com/holdfast/holdfast/store"
)

// sweepEnv is a Manager without a background sweep on a store whose clock
// the test moves.
type sweepEnv struct {
	t   *testing.T
	m   *Manager
	now atomic.Int64 // the store's clock, in Unix nanoseconds
}

func newSweepEnv(t *testing.T) *sweepEnv {
	e := &sweepEnv{t: t}
	e.now.Store(time.Date(2026, 11, 30, 10, 47, 0, 0, time.UTC).UnixNano())
	st := memstore.New(memstore.Config{Now: func() time.Time { return time.Unix(0, e.now.Load()) }})
	m, err := New(st, Config{SweepInterval: -1, Default: TypePolicy{MaxTTL: 48 * time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	e.m = m
	return e
}

func (e *sweepEnv) advance(d time.Duration) { e.now.Add(int64(d)) }

func (e *sweepEnv) known(id string) bool {
	var ok bool
	err := e.m.store.View(e.t.Context(), func(tx store.ReadTx) (err error) {
		_, ok, err = tx.Session(id)
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return ok
}

func (e *sweepEnv) heartbeat(id string, idle time.Duration) {
	if _, err := e.m.Heartbeat(e.t.Context(), HeartbeatRequest{Session: id, IdleTimeout: Duration(idle)}); err != nil {
		e.t.Fatal(err)
	}
}

// A session without an idle timeout that holds no lock is forgotten once
// it has not been seen for the lost-lock retention; nothing else would
// ever remove it. One that holds a lock, has an idle timeout, or was seen
// more recently is kept, and one that comes back is started anew.
func TestSweepForgetsSessionsWithoutIdleTimeout(t *testing.T) {
	t.Parallel()
	e := newSweepEnv(t)
	ctx := t.Context()
	if _, err := e.m.Acquire(ctx, AcquireRequest{Keys: []string{"order/1"}, Owner: Owner{Session: "s-visitor"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Release(ctx, ReleaseRequest{Session: "s-visitor", Keys: []string{"order/1"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Acquire(ctx, AcquireRequest{Keys: []string{"order/2"}, Owner: Owner{Session: "s-holder"}, TTL: Duration(48 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	e.heartbeat("s-idle-timeout", 48*time.Hour)
	e.advance(2 * time.Hour)
	e.heartbeat("s-recent", 0)
	e.advance(23 * time.Hour) // the visitor was last seen 25 hours ago, s-recent 23

	if err := e.m.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if e.known("s-visitor") {
		t.Error("s-visitor, unseen for 25 hours without an idle timeout or a lock, is still kept")
	}
	for _, id := range []string{"s-holder", "s-idle-timeout", "s-recent"} {
		if !e.known(id) {
			t.Errorf("%s was forgotten", id)
		}
	}
	hb, err := e.m.Heartbeat(ctx, HeartbeatRequest{Session: "s-visitor"})
	if err != nil || hb.Session.Locks != 0 || len(hb.Lost) != 0 {
		t.Fatalf("heartbeat of the forgotten session: %+v, %v; want it started anew", hb, err)
	}
}

// The background sweep looks at one batch of sessions at a time and goes
// on from there, back to the start after the last, so that no sweep is
// long however many sessions there are.
func TestBackgroundSweepForgetsBatchByBatch(t *testing.T) {
	t.Parallel()
	e := newSweepEnv(t)
	const n = 2*forgetBatch + forgetBatch/2
	for i := range n {
		e.heartbeat(fmt.Sprintf("s-%05d", i), 0)
	}
	e.advance(25 * time.Hour)
	e.heartbeat("s-00000", 0) // came back: kept
	var after string
	for pass, want := range []struct {
		forgotten int
		after     string
	}{
		{forgetBatch - 1, fmt.Sprintf("s-%05d", forgetBatch-1)},
		{2*forgetBatch - 1, fmt.Sprintf("s-%05d", 2*forgetBatch-1)},
		{n - 1, ""},
	} {
		if err := e.m.sweep(context.Background(), &after, false); err != nil {
			t.Fatal(err)
		}
		forgotten := 0
		for i := range n {
			if !e.known(fmt.Sprintf("s-%05d", i)) {
				forgotten++
			}
		}
		if forgotten != want.forgotten || after != want.after {
			t.Fatalf("after sweep %d: %d forgotten, going on after %q; want %d after %q", pass+1, forgotten, after, want.forgotten, want.after)
		}
	}
}

// A sweep removes every expired lock, batch after batch, however many
// batches they fill.
func TestSweepRemovesExpiredLocksBatchByBatch(t *testing.T) {
	t.Parallel()
	e := newSweepEnv(t)
	const n = 3*expiredBatch + 1
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("policy/%d", i)
	}
	if _, err := e.m.Acquire(t.Context(), AcquireRequest{Keys: keys, Owner: Owner{Session: "s-1"}, TTL: Duration(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	e.advance(2 * time.Minute)
	if err := e.m.Sweep(t.Context()); err != nil {
		t.Fatal(err)
	}
	err := e.m.store.View(t.Context(), func(tx store.ReadTx) error {
		left, err := tx.ExpiredLocks(time.Unix(0, e.now.Load()), n)
		if err == nil && len(left) != 0 {
			t.Errorf("%d of %d expired locks left after a sweep", len(left), n)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The other steps go batch after batch too: ended sessions, many batches
// of them, are all forgotten once past the lost-lock retention.
func TestSweepRemovesEndedSessionsBatchByBatch(t *testing.T) {
	t.Parallel()
	e := newSweepEnv(t)
	const n = 2*sweepBatch + 1
	for i := range n {
		id := fmt.Sprintf("s-%04d", i)
		e.heartbeat(id, 0)
		if _, err := e.m.EndSession(t.Context(), EndSessionRequest{Session: id}); err != nil {
			t.Fatal(err)
		}
	}
	e.advance(e.m.cfg.LostRetention + time.Hour)
	if err := e.m.Sweep(t.Context()); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if id := fmt.Sprintf("s-%04d", i); e.known(id) {
			t.Fatalf("%s is still kept after a sweep", id)
		}
	}
}
