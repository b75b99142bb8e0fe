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
