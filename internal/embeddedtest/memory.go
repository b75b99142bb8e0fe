package embeddedtest

import (
	"context"
	"testing"
	"time"

	"github.com/holdfast/holdfast/store"
)

// PutForMemory writes one lock, two sessions (one ended), two lost locks
// and an audit entry: a store's memory count should then read 1 lock,
// 2 sessions and 2 lost locks, the audit log being on disk only.
func PutForMemory(t *testing.T, s store.Store) {
	t.Helper()
	lock := store.Lock{Key: "policy/1", Session: "s-81", Token: 1, AcquiredAt: T0, ExpiresAt: T0.Add(time.Hour)}
	err := s.Update(context.Background(), func(tx store.Tx) error {
		tx.PutSession(store.Session{ID: "s-81", LastSeen: T0})
		tx.PutSession(store.Session{ID: "s-82", LastSeen: T0, EndedAt: T0, EndReason: "session_ended"})
		tx.PutLock(lock)
		tx.AppendAudit(store.AuditEntry{At: T0, Event: "acquired", Lock: lock})
		tx.PutLost(store.Lost{Lock: store.Lock{Key: "policy/2", Session: "s-81", Token: 2}, Reason: "released", At: T0})
		return tx.PutLost(store.Lost{Lock: store.Lock{Key: "policy/3", Session: "s-82", Token: 3}, Reason: "session_ended", At: T0})
	})
	if err != nil {
		t.Fatal(err)
	}
}
