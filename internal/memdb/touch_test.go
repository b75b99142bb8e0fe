package memdb

import (
	"errors"
	"testing"
	"time"

	"github.com/holdfast/holdfast/store"
)

func TestTouchSessionIsLazyOnlyWhenNothingElseWroteTheSession(t *testing.T) {
	t.Parallel()
	e := New(fixedClock, Options{AuditInMemory: true})
	s := store.Session{ID: "s-81", LastSeen: t0}
	mustUpdate(t, e, func(tx store.Tx) error { return tx.PutSession(s) })

	lazyOf := func(changes []Change) map[Kind]bool {
		out := map[Kind]bool{}
		for _, c := range changes {
			out[c.Kind] = c.Lazy
		}
		return out
	}

	s.LastSeen = t0.Add(1)
	got := mustUpdate(t, e, func(tx store.Tx) error { return tx.(store.Toucher).TouchSession(s) })
	if len(got) != 1 || !got[0].Lazy || got[0].Session.LastSeen != s.LastSeen {
		t.Fatalf("touch alone: changes %+v, want one lazy session change with the new LastSeen", got)
	}

	s.LastSeen = t0.Add(2)
	got = mustUpdate(t, e, func(tx store.Tx) error {
		if err := tx.(store.Toucher).TouchSession(s); err != nil {
			return err
		}
		s.Name = "Bob Smith"
		return tx.PutSession(s)
	})
	if lazyOf(got)[KindSession] {
		t.Errorf("touch then put: the session change is lazy, want it strict: %+v", got)
	}

	s.LastSeen = t0.Add(3)
	got = mustUpdate(t, e, func(tx store.Tx) error {
		if err := tx.(store.Toucher).TouchSession(s); err != nil {
			return err
		}
		return tx.PutLock(lockOn("policy/1", "s-81", time.Hour))
	})
	if l := lazyOf(got); !l[KindSession] || l[KindLock] {
		t.Errorf("touch and a lock: lazy %v, want the session lazy and the lock strict", l)
	}

	// A touch is undone like any write.
	boom := errors.New("boom")
	if err := e.Update(func(tx store.Tx) error {
		s.LastSeen = t0.Add(4)
		tx.(store.Toucher).TouchSession(s)
		return boom
	}, nil); err != boom {
		t.Fatalf("failing update = %v, want %v", err, boom)
	}
	view(t, e, func(tx store.ReadTx) error {
		got, _, _ := tx.Session("s-81")
		if !got.LastSeen.Equal(t0.Add(3)) {
			t.Errorf("after a rolled-back touch LastSeen = %v, want %v", got.LastSeen, t0.Add(3))
		}
		return nil
	})
}

// A live session rewritten in place keeps exactly one idle entry, at its
// current deadline, whether its deadline moves, stays or its timeout is
// set or removed.
func TestRewrittenLiveSessionKeepsOneIdleEntry(t *testing.T) {
	t.Parallel()
	e := New(fixedClock, Options{AuditInMemory: true})
	idleIDs := func(now time.Time) []string {
		var ids []string
		view(t, e, func(tx store.ReadTx) error {
			got, err := tx.IdleSessions(now, 0)
			for _, s := range got {
				ids = append(ids, s.ID)
			}
			return err
		})
		return ids
	}
	s := store.Session{ID: "s-82", LastSeen: t0, IdleTimeout: time.Minute}
	steps := []struct {
		name     string
		lastSeen time.Time
		timeout  time.Duration
	}{
		{"deadline moves", t0.Add(time.Second), time.Minute},
		{"deadline stays", t0.Add(time.Second), time.Minute},
		{"timeout removed", t0.Add(2 * time.Second), 0},
		{"timeout set", t0.Add(3 * time.Second), time.Minute},
	}
	mustUpdate(t, e, func(tx store.Tx) error { return tx.PutSession(s) })
	for _, step := range steps {
		s.LastSeen, s.IdleTimeout = step.lastSeen, step.timeout
		mustUpdate(t, e, func(tx store.Tx) error { return tx.(store.Toucher).TouchSession(s) })
		far := t0.Add(time.Hour)
		if step.timeout == 0 {
			if got := idleIDs(far); len(got) != 0 {
				t.Errorf("%s: idle sessions %v, want none", step.name, got)
			}
			continue
		}
		deadline := step.lastSeen.Add(step.timeout)
		if got := idleIDs(deadline.Add(-1)); len(got) != 0 {
			t.Errorf("%s: idle before the deadline: %v, want none", step.name, got)
		}
		if got := idleIDs(far); len(got) != 1 || got[0] != s.ID {
			t.Errorf("%s: idle sessions %v, want [%s] once", step.name, got, s.ID)
		}
	}
}

// A touch that moves the idle deadline later leaves the idle entry where
// it is; the sweep's IdleSessions passes over it until the real deadline
// and moves it there, and a deadline moved earlier (a shorter timeout, or
// a rollback) moves the entry at once.
func TestIdleEntryLagsBehindALaterDeadline(t *testing.T) {
	t.Parallel()
	e := New(fixedClock, Options{AuditInMemory: true})
	s := store.Session{ID: "s-83", LastSeen: t0, IdleTimeout: time.Minute}
	mustUpdate(t, e, func(tx store.Tx) error { return tx.PutSession(s) })
	entry := func() time.Time {
		it, ok := e.idleAt[s.ID]
		if !ok || e.idleSessions.Len() != 1 {
			t.Fatalf("idle entries: %d, of %s: %v; want one", e.idleSessions.Len(), s.ID, ok)
		}
		return time.Unix(it.sec, int64(it.nsec)).UTC()
	}
	sweep := func(now time.Time) (ids []string) {
		mustUpdate(t, e, func(tx store.Tx) error {
			got, err := tx.IdleSessions(now, 0)
			for _, s := range got {
				ids = append(ids, s.ID)
			}
			return err
		})
		return ids
	}
	touch := func(lastSeen time.Time, timeout time.Duration) {
		s.LastSeen, s.IdleTimeout = lastSeen, timeout
		mustUpdate(t, e, func(tx store.Tx) error { return tx.(store.Toucher).TouchSession(s) })
	}

	touch(t0.Add(30*time.Second), time.Minute)
	if got := entry(); !got.Equal(t0.Add(time.Minute)) {
		t.Fatalf("after a later deadline the entry is at %v, want it left at %v", got, t0.Add(time.Minute))
	}
	if got := sweep(t0.Add(time.Minute)); len(got) != 0 {
		t.Errorf("idle at the old deadline: %v, want none", got)
	}
	if got := entry(); !got.Equal(t0.Add(90 * time.Second)) {
		t.Errorf("after the sweep passed it the entry is at %v, want the deadline %v", got, t0.Add(90*time.Second))
	}
	if got := sweep(t0.Add(90 * time.Second)); len(got) != 1 || got[0] != s.ID {
		t.Errorf("idle at the deadline: %v, want [%s]", got, s.ID)
	}

	touch(t0.Add(40*time.Second), 10*time.Second)
	if got := sweep(t0.Add(50 * time.Second)); len(got) != 1 || got[0] != s.ID {
		t.Errorf("idle at a deadline moved earlier: %v, want [%s]", got, s.ID)
	}

	// A rolled-back touch that moved the deadline earlier: the session is
	// back at its deadline, and so is its entry.
	boom := errors.New("boom")
	if err := e.Update(func(tx store.Tx) error {
		s.LastSeen, s.IdleTimeout = t0.Add(41*time.Second), time.Second
		tx.(store.Toucher).TouchSession(s)
		return boom
	}, nil); err != boom {
		t.Fatalf("failing update = %v, want %v", err, boom)
	}
	if got := sweep(t0.Add(49 * time.Second)); len(got) != 0 {
		t.Errorf("idle before the deadline after a rollback: %v, want none", got)
	}
	if got := entry(); !got.After(t0.Add(42 * time.Second)) {
		t.Errorf("after the rollback the entry is at %v, want at %v", got, t0.Add(50*time.Second))
	}
}

// Sessions whose entries lag come out in the order of their deadlines.
func TestIdleSessionsInDeadlineOrder(t *testing.T) {
	t.Parallel()
	e := New(fixedClock, Options{AuditInMemory: true})
	// a's entry lags at t0+1m behind its deadline t0+3m; b's is at its
	// deadline t0+2m.
	a := store.Session{ID: "a", LastSeen: t0, IdleTimeout: time.Minute}
	b := store.Session{ID: "b", LastSeen: t0.Add(time.Minute), IdleTimeout: time.Minute}
	mustUpdate(t, e, func(tx store.Tx) error { tx.PutSession(a); return tx.PutSession(b) })
	a.LastSeen = t0.Add(2 * time.Minute)
	mustUpdate(t, e, func(tx store.Tx) error { return tx.(store.Toucher).TouchSession(a) })
	view(t, e, func(tx store.ReadTx) error {
		got, err := tx.IdleSessions(t0.Add(time.Hour), 0)
		if len(got) != 2 || got[0].ID != "b" || got[1].ID != "a" {
			t.Errorf("idle sessions %+v, want b then a, by deadline", got)
		}
		return err
	})
}
