package memdb

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/holdfast/holdfast/store"
)

// millionLocks returns an engine holding 1,000,000 locks, 1000 per
// session, shaped like the scale workload of holdfast bench.
func millionLocks(b *testing.B) *Engine {
	b.Helper()
	e := New(time.Now, Options{})
	ld := e.Load()
	now := time.Now().UTC()
	for i := range 1_000_000 {
		s := i / 1000
		ld.Lock(&store.Lock{Key: fmt.Sprintf("scale/%d/%d", s, i), Session: fmt.Sprintf("scale-%d", s), User: "scale",
			Token: uint64(i + 1), AcquiredAt: now, ExpiresAt: now.Add(time.Hour)})
	}
	ld.Close()
	return e
}

// BenchmarkLocksPrefixPage lists one page of 100 locks under a prefix, as
// GET /v1/locks?prefix= does, among a million.
func BenchmarkLocksPrefixPage(b *testing.B) {
	e := millionLocks(b)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		q := store.LockQuery{Prefix: fmt.Sprintf("scale/%d", rand.IntN(1000)), Limit: 101}
		var page []store.Lock
		if err := e.View(func(tx store.ReadTx) (err error) { page, err = tx.Locks(q); return err }, nil); err != nil || len(page) != 101 {
			b.Fatalf("%d locks, %v", len(page), err)
		}
	}
}

// BenchmarkLocksUserPage lists a page of one user's locks, as GET
// /v1/locks?user= does, among a million held by another: a user with
// none, and one with 200 whose keys sort after all the others.
func BenchmarkLocksUserPage(b *testing.B) {
	e := millionLocks(b)
	now := time.Now().UTC()
	err := e.Update(func(tx store.Tx) error {
		for i := range 200 {
			if err := tx.PutLock(store.Lock{Key: fmt.Sprintf("zz/%d", i), Session: "late-1", User: "late",
				Token: uint64(2_000_000 + i), AcquiredAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
				return err
			}
		}
		return nil
	}, nil)
	if err != nil {
		b.Fatal(err)
	}
	benchUserPages(b, e, []userPage{{"nobody", 0}, {"late", 101}}, func(tx store.ReadTx, user string) ([]store.Lock, error) {
		return tx.Locks(store.LockQuery{User: user, Limit: 101})
	})
}

// userPage is a user whose page of records a benchmark lists, and how many
// it holds.
type userPage struct {
	user string
	want int
}

// benchUserPages runs a sub-benchmark for each of pages, in which list
// reads a page of that user's records.
func benchUserPages[T any](b *testing.B, e *Engine, pages []userPage, list func(tx store.ReadTx, user string) ([]T, error)) {
	for _, p := range pages {
		b.Run(p.user, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var page []T
				err := e.View(func(tx store.ReadTx) (err error) { page, err = list(tx, p.user); return err }, nil)
				if err != nil || len(page) != p.want {
					b.Fatalf("%d found, %v; want %d", len(page), err, p.want)
				}
			}
		})
	}
}

// BenchmarkSessionsUserPage lists a page of one user's live sessions, as
// GET /v1/sessions?user= does, among 100,000 of 1,000 users: one with
// none, and one with 100.
func BenchmarkSessionsUserPage(b *testing.B) {
	e := New(time.Now, Options{})
	now := time.Now().UTC()
	err := e.Update(func(tx store.Tx) error {
		for i := range 100_000 {
			s := store.Session{ID: fmt.Sprintf("s-%d", i), User: fmt.Sprintf("u-%d", i%1000), LastSeen: now, IdleTimeout: 30 * time.Minute}
			if err := tx.PutSession(s); err != nil {
				return err
			}
		}
		return nil
	}, nil)
	if err != nil {
		b.Fatal(err)
	}
	benchUserPages(b, e, []userPage{{"nobody", 0}, {"u-999", 100}}, func(tx store.ReadTx, user string) ([]store.Session, error) {
		return tx.Sessions(store.SessionQuery{User: user, Limit: 101})
	})
}

// BenchmarkAcquireReleaseAmongMillion writes what an acquire and a release
// write, among a million locks.
func BenchmarkAcquireReleaseAmongMillion(b *testing.B) {
	e := millionLocks(b)
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		i++
		key, session := fmt.Sprintf("order/%d", i%5000), fmt.Sprintf("s-%d", i%64)
		err := e.Update(func(tx store.Tx) error {
			blocked := false
			tx.Related(key, func(l store.Lock) bool { blocked = true; return false })
			if blocked {
				return fmt.Errorf("%s is held", key)
			}
			tok, _ := tx.NextToken()
			now := tx.Now()
			l := store.Lock{Key: key, Session: session, User: "u-1", Token: tok, AcquiredAt: now, ExpiresAt: now.Add(time.Hour)}
			tx.PutLock(l)
			_, err := tx.AppendAudit(store.AuditEntry{At: now, Event: "acquired", Lock: l})
			return err
		}, func([]Change) {})
		if err != nil {
			b.Fatal(err)
		}
		err = e.Update(func(tx store.Tx) error {
			l, ok, _ := tx.Lock(key, session)
			if !ok {
				return fmt.Errorf("%s is not held", key)
			}
			tx.DeleteLock(key, session)
			_, err := tx.AppendAudit(store.AuditEntry{At: tx.Now(), Event: "released", Lock: l})
			return err
		}, func([]Change) {})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTouchAmongSessions writes what a heartbeat writes, its
// session's activity, among the 10,000 sessions of holdfast bench's
// heartbeat workload.
func BenchmarkTouchAmongSessions(b *testing.B) {
	const sessions = 10_000
	e := New(time.Now, Options{})
	now := time.Now().UTC()
	for i := range sessions {
		s := store.Session{ID: fmt.Sprintf("bench-hb-%d", i), User: "u", LastSeen: now, IdleTimeout: 30 * time.Minute}
		if err := e.Update(func(tx store.Tx) error { return tx.PutSession(s) }, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		s := store.Session{ID: fmt.Sprintf("bench-hb-%d", i%sessions), User: "u", LastSeen: now.Add(time.Duration(i) * time.Millisecond), IdleTimeout: 30 * time.Minute}
		if err := e.Update(func(tx store.Tx) error { return tx.(store.Toucher).TouchSession(s) }, func([]Change) {}); err != nil {
			b.Fatal(err)
		}
	}
}
