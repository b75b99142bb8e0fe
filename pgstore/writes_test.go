package pgstore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/holdfast/holdfast/memstore"
	"github.com/holdfast/holdfast/store"
)

// A transaction's writes go out as a few multi-row statements, not in the
// order they were made: the outcome must still be that of the writes made
// one by one. The same writes, in one transaction, on PostgreSQL and in
// memory, must leave the same records.
func TestQueuedWritesLeaveWhatTheyWouldOneByOne(t *testing.T) {
	t.Parallel()
	pool := testPool(t)
	at := time.Date(2026, 11, 30, 10, 47, 0, 0, time.UTC)
	now := func() time.Time { return at }
	lock := func(key, session string, token uint64, note string) store.Lock {
		return store.Lock{Key: key, Session: session, User: "u", Token: token, AcquiredAt: at, ExpiresAt: at.Add(time.Hour), Note: note}
	}
	lost := func(key string, token uint64, reported bool) store.Lost {
		return store.Lost{Lock: lock(key, "s-1", token, ""), Reason: "released", At: at, Reported: reported}
	}
	writes := func(tx store.Tx, flush bool) error {
		steps := []func() error{
			func() error { return tx.PutLock(lock("a", "s-1", 1, "")) },
			func() error { return tx.DeleteLock("a", "s-1") },
			func() error { return tx.PutLock(lock("b", "s-1", 2, "first")) },
			func() error { return tx.PutLock(lock("b", "s-1", 2, "second")) },
			func() error { return tx.DeleteLock("c", "s-2") },
			func() error { return tx.PutLock(lock("c", "s-2", 3, "")) },
			func() error { return tx.PutLock(lock("c", "s-3", 4, "")) },

			func() error { return tx.PutSession(store.Session{ID: "s-1", LastSeen: at, IdleTimeout: time.Minute}) },
			func() error { return tx.DeleteSession("s-1") },
			func() error { return tx.PutSession(store.Session{ID: "s-2", LastSeen: at}) },
			func() error {
				return tx.PutSession(store.Session{ID: "s-2", LastSeen: at, EndedAt: at, EndReason: "session_ended"})
			},
			func() error { return tx.DeleteSession("s-3") },
			func() error { return tx.PutSession(store.Session{ID: "s-3", Name: "again", LastSeen: at}) },

			// A reported record gives way to a newer one of its key...
			func() error { return tx.PutLost(lost("k1", 1, true)) },
			func() error { return tx.PutLost(lost("k1", 2, true)) },
			// ...an unreported one does not.
			func() error { return tx.PutLost(lost("k2", 1, false)) },
			func() error { return tx.PutLost(lost("k2", 2, true)) },
			func() error { return tx.DeleteLost("s-1", "k3", 1) },
			func() error { return tx.PutLost(lost("k3", 1, false)) },
			func() error { return tx.PutLost(lost("k4", 1, false)) },
			func() error { return tx.DeleteLost("s-1", "k4", 1) },
			func() error { return tx.PutLost(lost("k5", 1, false)) },
			func() error { return tx.PutLost(lost("k5", 1, true)) },
			func() error { return tx.PutLost(lost("k5", 2, true)) },
		}
		for i, step := range steps {
			if err := step(); err != nil {
				return err
			}
			if flush && i%5 == 4 {
				// A listing reads the database, so the writes so far
				// go out first.
				if _, err := tx.Locks(store.LockQuery{}); err != nil {
					return err
				}
			}
		}
		for _, ev := range []string{"acquired", "released", "renewed"} {
			if _, err := tx.AppendAudit(store.AuditEntry{At: at, Event: ev, Lock: lock("b", "s-1", 2, "")}); err != nil {
				return err
			}
		}
		return nil
	}
	records := func(s store.Store) string {
		var out string
		err := s.View(t.Context(), func(tx store.ReadTx) error {
			locks, err := tx.Locks(store.LockQuery{})
			if err != nil {
				return err
			}
			out += fmt.Sprintf("locks %+v\n", locks)
			for _, id := range []string{"s-1", "s-2", "s-3"} {
				s, ok, err := tx.Session(id)
				if err != nil {
					return err
				}
				out += fmt.Sprintf("session %s %v %+v\n", id, ok, s)
			}
			lost, err := tx.Lost("s-1")
			if err != nil {
				return err
			}
			out += fmt.Sprintf("lost %+v\n", lost)
			audit, err := tx.Audit(store.AuditQuery{})
			if err != nil {
				return err
			}
			for _, e := range audit {
				e.ID = 0 // numbered differently
				out += fmt.Sprintf("audit %+v\n", e)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	for _, flush := range []bool{false, true} {
		mem := memstore.New(memstore.Config{Now: now})
		pg := open(t, pool, newSchema(t, pool), now)
		for _, s := range []store.Store{mem, pg} {
			if err := s.Update(t.Context(), func(tx store.Tx) error { return writes(tx, flush) }); err != nil {
				t.Fatalf("%T, reads between writes %v: %v", s, flush, err)
			}
		}
		if got, want := records(pg), records(mem); got != want {
			t.Errorf("reads between writes %v: PostgreSQL kept\n%s\nin memory:\n%s", flush, got, want)
		}
	}
}
