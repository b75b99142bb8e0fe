package memdb

import (
	"reflect"
	"testing"
	"time"

	"github.com/holdfast/holdfast/store"
)

type snapshotRecords struct {
	Sessions   []store.Session
	Aggregates []store.Aggregate
	Locks      []store.Lock
	Lost       []store.Lost
	Counters   [2]uint64
}

func snapshotOf(s *Snapshot) snapshotRecords {
	var r snapshotRecords
	s.Sessions(func(v *store.Session) bool { r.Sessions = append(r.Sessions, *v); return true })
	s.Aggregates(func(v *store.Aggregate) bool { r.Aggregates = append(r.Aggregates, *v); return true })
	s.Locks(func(v *store.Lock) bool { r.Locks = append(r.Locks, *v); return true })
	s.Lost(func(v *store.Lost) bool { r.Lost = append(r.Lost, *v); return true })
	r.Counters = [2]uint64{s.Token, s.AuditID}
	return r
}

// A snapshot keeps the state it was taken in while transactions change
// every kind of record, and holds every record but the audit log.
func TestSnapshotIsFrozen(t *testing.T) {
	t.Parallel()
	e := New(fixedClock, Options{})
	fill := func(tx store.Tx) error {
		tx.NextToken()
		tx.AppendAudit(store.AuditEntry{At: t0, Event: "acquired"})
		tx.PutSession(store.Session{ID: "s-1", User: "u", LastSeen: t0, IdleTimeout: time.Minute})
		tx.PutSession(store.Session{ID: "s-0", LastSeen: t0, EndedAt: t0, EndReason: "session_ended"})
		tx.PutAggregate(store.Aggregate{Member: "a/1", Root: "r"})
		tx.PutLock(lockOn("order/1", "s-1", time.Minute))
		tx.PutLock(lockOn("order/2", "s-1", time.Hour))
		return tx.PutLost(store.Lost{Lock: lockOn("gone/1", "s-1", time.Minute), Reason: "released", At: t0})
	}
	mustUpdate(t, e, fill)
	ran := false
	snap := e.Snapshot(func() { ran = true })
	if !ran {
		t.Fatal("Snapshot did not run its callback")
	}
	want := snapshotOf(snap)
	if len(want.Sessions) != 2 || len(want.Aggregates) != 1 || len(want.Locks) != 2 || len(want.Lost) != 1 || want.Counters != [2]uint64{1, 1} {
		t.Fatalf("snapshot holds %+v", want)
	}
	mustUpdate(t, e, func(tx store.Tx) error {
		tx.NextToken()
		tx.DeleteLock("order/1", "s-1")
		tx.PutLock(lockOn("order/3", "s-1", time.Minute))
		tx.PutSession(store.Session{ID: "s-1", User: "u", LastSeen: t0.Add(time.Minute), EndedAt: t0, EndReason: "expired"})
		tx.DeleteSession("s-0")
		tx.DeleteAggregate("a/1")
		return tx.DeleteLost("s-1", "gone/1", want.Lost[0].Lock.Token)
	})
	if got := snapshotOf(snap); !reflect.DeepEqual(got, want) {
		t.Fatalf("snapshot changed under writes:\n%+v\nwant\n%+v", got, want)
	}
}
