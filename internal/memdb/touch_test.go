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
