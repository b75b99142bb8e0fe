// Package embeddedtest holds the tests and benchmarks that every embedded
// store (one kept in a local directory: logstore, pebblestore) must pass.
// Each store's own tests call these functions under the same names, so
// that `go test -v` of the store lists every one of them.
package embeddedtest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/store"
	"github.com/holdfast/holdfast/store/storetest"
)

// Open opens the store kept in dir, with now as its clock (nil: the wall
// clock) and a logger that discards.
type Open func(dir string, now func() time.Time) (store.Store, error)

// MustOpen opens the store in dir, failing t if it cannot.
func (open Open) MustOpen(t testing.TB, dir string, now func() time.Time) store.Store {
	t.Helper()
	s, err := open(dir, now)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

// unswept opens the store in a new directory, and a Manager over it whose
// sweep does not run; both are closed at the end of t.
func (open Open) unswept(t *testing.T) (store.Store, *holdfast.Manager) {
	t.Helper()
	s := open.MustOpen(t, t.TempDir(), nil)
	t.Cleanup(func() { s.Close() })
	m, err := holdfast.New(s, holdfast.Config{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return s, m
}

// Harness runs the conformance suite with a fresh directory per store.
func Harness(open Open) storetest.Harness {
	var dirs sync.Map // store.Store → its directory
	return storetest.Harness{
		Open: func(t testing.TB, now func() time.Time) store.Store {
			dir := t.TempDir()
			s := open.MustOpen(t, dir, now)
			dirs.Store(s, dir)
			t.Cleanup(func() { s.Close() })
			return s
		},
		Reopen: func(t testing.TB, old store.Store, now func() time.Time) store.Store {
			dir, _ := dirs.Load(old)
			if err := old.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			s := open.MustOpen(t, dir.(string), now)
			dirs.Store(s, dir)
			t.Cleanup(func() { s.Close() })
			return s
		},
	}
}

// T0 is the time Fixed answers.
var T0 = time.Date(2026, 11, 30, 10, 47, 0, 123456789, time.UTC)

// Fixed is a clock that stays at T0.
func Fixed() time.Time { return T0 }

// Everything is all records of every kind, read back through the contract.
type Everything struct {
	Locks      []store.Lock
	Sessions   []store.Session
	Ended      []store.Session
	Aggregates []store.Aggregate
	Lost       []store.Lost
	Audit      []store.AuditEntry
}

// ReadAll reads every record of s.
func ReadAll(t *testing.T, s store.Store) Everything {
	t.Helper()
	var all Everything
	far := T0.Add(1000 * time.Hour)
	err := s.View(context.Background(), func(tx store.ReadTx) (err error) {
		all.Locks, _ = tx.Locks(store.LockQuery{})
		all.Sessions, _ = tx.Sessions(store.SessionQuery{})
		all.Ended, _ = tx.EndedSessions(far, 0)
		all.Aggregates, _ = tx.Aggregates("")
		all.Lost, _ = tx.LostBefore(far, 0)
		all.Audit, err = tx.Audit(store.AuditQuery{})
		return err
	})
	if err != nil {
		t.Fatalf("View: %v", err)
	}
	return all
}

// EveryRecordAndCounterSurvivesReopen writes one record of every kind,
// prunes the audit log, and checks that all of it, the token counter and
// the audit ID counter included, reads back the same after a reopen.
func EveryRecordAndCounterSurvivesReopen(t *testing.T, open Open) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	s := open.MustOpen(t, dir, Fixed)
	lock := store.Lock{Key: "policy/12345", Session: "s-81", User: "u-7", Name: "Bob Smith", Shared: true,
		AcquiredAt: T0, ExpiresAt: T0.Add(2 * time.Hour), Note: "underwriting review"}
	var lastToken uint64
	err := s.Update(ctx, func(tx store.Tx) error {
		for range 3 {
			lastToken, _ = tx.NextToken()
		}
		lock.Token = lastToken - 1
		tx.PutLock(lock)
		tx.PutLock(store.Lock{Key: "order/1", Session: "s\x00odd", Token: 1}) // zero times, odd session
		tx.PutSession(store.Session{ID: "s-81", User: "u-7", Name: "Bob Smith", LastSeen: T0, IdleTimeout: 5 * time.Minute})
		tx.PutSession(store.Session{ID: "s-9", LastSeen: T0, EndedAt: T0.Add(time.Minute), EndReason: "session_ended"})
		tx.PutAggregate(store.Aggregate{Member: "asset/9", Root: "lease/3"})
		tx.PutLost(store.Lost{Lock: lock, Reason: "force_released", Actor: "alice", ForceReason: "on leave", At: T0, Reported: true})
		tx.AppendAudit(store.AuditEntry{At: T0.Add(-time.Hour), Event: "expired"})
		for _, ev := range []string{"acquired", "released", "force_released"} {
			tx.AppendAudit(store.AuditEntry{At: T0, Event: ev, Lock: lock, Actor: "alice", Reason: "why"})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Update(ctx, func(tx store.Tx) error {
		n, err := tx.PruneAudit(T0, 0)
		if n != 1 {
			t.Errorf("pruned %d audit entries, want 1", n)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	before := ReadAll(t, s)
	if len(before.Locks) != 2 || len(before.Audit) != 3 || len(before.Lost) != 1 {
		t.Fatalf("unexpected state before reopen: %+v", before)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = open.MustOpen(t, dir, Fixed)
	defer s.Close()
	if after := ReadAll(t, s); !reflect.DeepEqual(before, after) {
		t.Fatalf("state after reopen:\n%+v\nbefore:\n%+v", after, before)
	}
	err = s.Update(ctx, func(tx store.Tx) error {
		if tok, _ := tx.NextToken(); tok != lastToken+1 {
			t.Errorf("token after reopen %d, want %d", tok, lastToken+1)
		}
		if id, _ := tx.AppendAudit(store.AuditEntry{At: T0}); id != 5 {
			t.Errorf("audit id after reopen %d, want 5", id)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// FailedUpdateIsNotWritten checks that an update whose function fails
// leaves nothing on disk, not even the token it took.
func FailedUpdateIsNotWritten(t *testing.T, open Open) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	s := open.MustOpen(t, dir, Fixed)
	refused := errors.New("refused")
	if err := s.Update(ctx, func(tx store.Tx) error {
		tx.NextToken()
		tx.PutLock(store.Lock{Key: "a", Session: "s"})
		return refused
	}); !errors.Is(err, refused) {
		t.Fatalf("Update = %v", err)
	}
	s.Close()
	s = open.MustOpen(t, dir, Fixed)
	defer s.Close()
	s.Update(ctx, func(tx store.Tx) error {
		if _, ok, _ := tx.Lock("a", "s"); ok {
			t.Error("a refused update's lock is on disk")
		}
		if tok, _ := tx.NextToken(); tok != 1 {
			t.Errorf("first token %d, want 1", tok)
		}
		return nil
	})
}

// DirectoryHeldByAnotherStoreIsRefused checks that a directory opens in
// one store at a time, and is free again once that store is closed.
func DirectoryHeldByAnotherStoreIsRefused(t *testing.T, open Open) {
	t.Parallel()
	dir := t.TempDir()
	s := open.MustOpen(t, dir, nil)
	if s2, err := open(dir, nil); err == nil {
		s2.Close()
		t.Fatal("a second Open of a directory in use succeeded")
	}
	s.Close()
	s = open.MustOpen(t, dir, nil) // free again once closed
	s.Close()
}

// ClosedStoreIsUnavailable checks that a closed store answers
// ErrUnavailable. memstore runs it too, ignoring the directory.
func ClosedStoreIsUnavailable(t *testing.T, open Open) {
	t.Parallel()
	s := open.MustOpen(t, t.TempDir(), nil)
	ctx := context.Background()
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping = %v", err)
	}
	s.Close()
	for name, err := range map[string]error{
		"Ping":   s.Ping(ctx),
		"Update": s.Update(ctx, func(store.Tx) error { return nil }),
		"View":   s.View(ctx, func(store.ReadTx) error { return nil }),
	} {
		if !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("%s after Close = %v, want ErrUnavailable", name, err)
		}
	}
}

// ConcurrentWritersAllDurable checks that every update of concurrent
// writers is there after a reopen.
func ConcurrentWritersAllDurable(t *testing.T, open Open) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	s := open.MustOpen(t, dir, Fixed)
	const writers, each = 16, 20
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				err := s.Update(ctx, func(tx store.Tx) error {
					tok, _ := tx.NextToken()
					return tx.PutLock(store.Lock{Key: fmt.Sprintf("k/%d/%d", w, i), Session: "s", Token: tok})
				})
				if err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	s.Close()
	s = open.MustOpen(t, dir, Fixed)
	defer s.Close()
	if got := len(ReadAll(t, s).Locks); got != writers*each {
		t.Fatalf("%d locks after reopen, want %d", got, writers*each)
	}
}
