package pgstore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/store"
	"github.com/holdfast/holdfast/store/storetest"
)

// Two servers on one schema sweep at the same moment: every expired lock
// and every idle session is ended exactly once, by one of them.
func TestSweepOnTwoNodesAtOnce(t *testing.T) {
	t.Parallel()
	pool := testPool(t)
	schema := newSchema(t, pool)
	clock := storetest.NewClock(time.Date(2026, 11, 30, 10, 47, 0, 0, time.UTC))
	node := func() *holdfast.Manager {
		m, err := holdfast.New(open(t, pool, schema, clock.Now), holdfast.Config{SweepInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
	a, b := node(), node()

	const sessions, keysEach = 60, 3
	for i := range sessions {
		req := holdfast.AcquireRequest{Owner: holdfast.Owner{Session: fmt.Sprintf("s-%d", i), User: "u"}}
		if i%2 == 0 {
			req.IdleTimeout = holdfast.Duration(10 * time.Minute) // ends idle
		} else {
			req.TTL = holdfast.Duration(time.Minute) // locks expire
		}
		for k := range keysEach {
			req.Keys = append(req.Keys, fmt.Sprintf("order/%d/line/%d", i, k))
		}
		m := a
		if i%3 == 0 {
			m = b
		}
		if _, err := m.Acquire(t.Context(), req); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(30 * time.Minute)

	var wg sync.WaitGroup
	for _, m := range []*holdfast.Manager{a, b, a, b} {
		wg.Go(func() {
			if err := m.Sweep(t.Context()); err != nil {
				t.Errorf("Sweep: %v", err)
			}
		})
	}
	wg.Wait()

	ended := map[string]int{}
	var after string
	for {
		page, err := a.Audit(t.Context(), holdfast.AuditQuery{After: after, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page.Entries {
			if e.Event == holdfast.EventExpired || e.Event == holdfast.EventSessionExpired {
				ended[e.Lock.Key+" "+e.Lock.Owner.Session+" "+string(e.Event)]++
			}
		}
		if page.Next == nil {
			break
		}
		after = *page.Next
	}
	if len(ended) != sessions*keysEach {
		t.Errorf("%d locks were ended by the sweeps, want all %d", len(ended), sessions*keysEach)
	}
	for lock, n := range ended {
		if n != 1 {
			t.Errorf("%s recorded %d times, want once", lock, n)
		}
	}
	if left, err := b.Locks(t.Context(), holdfast.LockQuery{}); err != nil || len(left.Locks) != 0 {
		t.Fatalf("after the sweeps: %v locks listed (%v), want none", len(left.Locks), err)
	}
	if live, err := b.Sessions(t.Context(), holdfast.SessionQuery{Limit: 1000}); err != nil || len(live.Sessions) != sessions/2 {
		t.Fatalf("after the sweeps: %d live sessions (%v), want the %d without an idle timeout", len(live.Sessions), err, sessions/2)
	}
}

// A sweep that found a session idle must not end it if, before the sweep
// could lock it, another server's transaction brought it back: the store
// reads its candidates again under their locks.
func TestIdleSessionsRereadUnderLock(t *testing.T) {
	t.Parallel()
	pool := testPool(t)
	schema := newSchema(t, pool)
	t0 := time.Date(2026, 11, 30, 10, 47, 0, 0, time.UTC)
	clock := storetest.NewClock(t0)
	s := open(t, pool, schema, clock.Now)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	bob := store.Session{ID: "s-bob", LastSeen: t0, IdleTimeout: time.Minute}
	if err := s.Update(ctx, func(tx store.Tx) error { return tx.PutSession(bob) }); err != nil {
		t.Fatal(err)
	}
	now := clock.Advance(10 * time.Minute) // bob is idle

	// Another server's transaction brings bob back and holds his lock.
	inside, finish := make(chan struct{}), make(chan struct{})
	var once sync.Once
	back := make(chan error, 1)
	go func() {
		back <- s.Update(ctx, func(tx store.Tx) error {
			cur, _, err := tx.Session("s-bob")
			if err != nil {
				return err
			}
			cur.LastSeen = now
			if err := tx.PutSession(cur); err != nil {
				return err
			}
			if _, err := tx.Lost("s-bob"); err != nil { // a round trip: the session lock is held now
				return err
			}
			once.Do(func() { close(inside) })
			select {
			case <-finish:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	select {
	case <-inside:
	case err := <-back:
		t.Fatalf("bringing bob back: %v", err)
	}

	type found struct {
		idle []store.Session
		err  error
	}
	sweep, swept := make(chan found, 1), make(chan struct{})
	go func() {
		defer close(swept)
		var idle []store.Session
		err := s.Update(ctx, func(tx store.Tx) (err error) {
			idle, err = tx.IdleSessions(tx.Now(), 10)
			return err
		})
		sweep <- found{idle, err}
	}()
	waitForLockWait(t, ctx, schema, swept)
	close(finish)
	if err := <-back; err != nil {
		t.Fatalf("bringing bob back: %v", err)
	}
	res := <-sweep
	if res.err != nil {
		t.Fatalf("IdleSessions: %v", res.err)
	}
	if len(res.idle) != 0 {
		t.Fatalf("IdleSessions = %+v after bob came back, want none", res.idle)
	}
}
