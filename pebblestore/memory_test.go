package pebblestore_test

import (
	"context"
	"testing"
	"time"

	"github.com/holdfast/holdfast/internal/embeddedtest"
	"github.com/holdfast/holdfast/pebblestore"
	"github.com/holdfast/holdfast/store"
)

// Memory counts what the store keeps in the heap, reports Pebble's
// memtable (it holds the writes just made), and still answers after Close.
func TestMemoryCountsRecordsAndPebble(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir(), embeddedtest.Fixed)
	lock := store.Lock{Key: "policy/1", Session: "s-81", Token: 1, AcquiredAt: embeddedtest.T0, ExpiresAt: embeddedtest.T0.Add(time.Hour)}
	err := s.Update(context.Background(), func(tx store.Tx) error {
		tx.PutSession(store.Session{ID: "s-81", LastSeen: embeddedtest.T0})
		tx.PutSession(store.Session{ID: "s-82", LastSeen: embeddedtest.T0, EndedAt: embeddedtest.T0, EndReason: "session_ended"})
		tx.PutLock(lock)
		tx.PutLost(store.Lost{Lock: store.Lock{Key: "policy/2", Session: "s-81", Token: 2}, Reason: "released", At: embeddedtest.T0})
		return tx.PutLost(store.Lost{Lock: store.Lock{Key: "policy/3", Session: "s-82", Token: 3}, Reason: "session_ended", At: embeddedtest.T0})
	})
	if err != nil {
		t.Fatal(err)
	}
	m := s.Memory()
	want := pebblestore.Memory{Locks: 1, Sessions: 2, Lost: 2}
	if m.Locks != want.Locks || m.Sessions != want.Sessions || m.Lost != want.Lost {
		t.Errorf("records %+v, want %+v", m, want)
	}
	if m.MemTables == 0 {
		t.Errorf("no memtable bytes reported after a write: %+v", m)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if after := s.Memory(); after != want {
		t.Errorf("after Close %+v, want the counts only: %+v", after, want)
	}
}
