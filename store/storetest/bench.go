package storetest

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/store"
)

// benchGoroutines is how many goroutines each benchmark runs in parallel.
const benchGoroutines = 64

// Bench measures the Manager's hot paths over the store h opens: an
// acquire+release cycle (by many callers, and by one alone), and a
// heartbeat (the bulk of a lock service's traffic), and the store alone
// running acquire- and release-shaped transactions. Each goroutine uses its own session and key, so the figures
// show the store's cost, not contention on one lock.
func Bench(b *testing.B, h Harness) {
	b.Run("StoreUpdate", func(b *testing.B) {
		s := h.Open(b, time.Now)
		parallel(b, func(id int64) (func() error, error) {
			key, session := fmt.Sprintf("order/%d", id), fmt.Sprintf("bench-%d", id)
			return func() error {
				if err := s.Update(b.Context(), func(tx store.Tx) error { return rawAcquire(tx, key, session) }); err != nil {
					return err
				}
				return s.Update(b.Context(), func(tx store.Tx) error { return rawRelease(tx, key, session) })
			}, nil
		})
	})
	b.Run("AcquireRelease", func(b *testing.B) {
		s := h.Open(b, time.Now)
		m := newManager(b, s)
		defer reportSyncs(b, h, s)()
		parallel(b, func(id int64) (func() error, error) { return acquireRelease(b, m, id), nil })
	})
	// One caller alone: what an operation costs when there is nobody to
	// share a commit with (it must not wait for company).
	b.Run("AcquireReleaseAlone", func(b *testing.B) {
		step := acquireRelease(b, benchManager(b, h), 1)
		b.ReportAllocs()
		for b.Loop() {
			if err := step(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Heartbeat", func(b *testing.B) {
		m := benchManager(b, h)
		parallel(b, func(id int64) (func() error, error) {
			o := holdfast.Owner{Session: fmt.Sprintf("bench-%d", id), User: "u-bench"}
			req := holdfast.AcquireRequest{Keys: []string{fmt.Sprintf("order/%d", id)}, Owner: o, IdleTimeout: holdfast.Duration(time.Minute)}
			if _, err := m.Acquire(b.Context(), req); err != nil {
				return nil, err
			}
			return func() error {
				_, err := m.Heartbeat(b.Context(), holdfast.HeartbeatRequest{Session: o.Session})
				return err
			}, nil
		})
	})
	b.Run("BatchHeartbeat", func(b *testing.B) { benchBatchHeartbeat(b, h) })
	// The aggregate workload of holdfast bench: a hundred keys at once,
	// all or nothing, then released, so that a key's cost in the Manager
	// and the store shows apart from the operation's.
	b.Run("Aggregate", func(b *testing.B) {
		m := benchManager(b, h)
		parallel(b, func(id int64) (func() error, error) {
			o := holdfast.Owner{Session: fmt.Sprintf("bench-%d", id), User: "u-bench"}
			keys := make([]string, benchAggregateKeys)
			for i := range keys {
				keys[i] = fmt.Sprintf("order/%d-%d", id, i)
			}
			return func() error {
				if _, err := m.Acquire(b.Context(), holdfast.AcquireRequest{Keys: keys, Owner: o}); err != nil {
					return err
				}
				_, err := m.Release(b.Context(), holdfast.ReleaseRequest{Session: o.Session, Keys: keys})
				return err
			}, nil
		})
	})
}

// benchAggregateKeys is how many keys each Aggregate cycle locks at once.
const benchAggregateKeys = 100

// acquireRelease returns a step that locks and unlocks a key of its own.
func acquireRelease(b *testing.B, m *holdfast.Manager, id int64) func() error {
	o := holdfast.Owner{Session: fmt.Sprintf("bench-%d", id), User: "u-bench"}
	key := fmt.Sprintf("order/%d", id)
	return func() error {
		if _, err := m.Acquire(b.Context(), holdfast.AcquireRequest{Keys: []string{key}, Owner: o}); err != nil {
			return err
		}
		_, err := m.Release(b.Context(), holdfast.ReleaseRequest{Session: o.Session, Keys: []string{key}})
		return err
	}
}

// benchBatch heartbeats this many sessions in one Manager.Batch, as the
// server does for one POST /v1/batch.
const benchBatch = 1000

// benchBatchHeartbeat measures batched heartbeats: one transaction, and
// no fsync, for a thousand sessions.
func benchBatchHeartbeat(b *testing.B, h Harness) {
	m := benchManager(b, h)
	sessions := make([]string, benchBatch)
	for i := range sessions {
		sessions[i] = fmt.Sprintf("bench-%d", i)
		req := holdfast.AcquireRequest{Keys: []string{"order/" + sessions[i]}, Owner: holdfast.Owner{Session: sessions[i]},
			IdleTimeout: holdfast.Duration(time.Minute)}
		if _, err := m.Acquire(b.Context(), req); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		var failed error
		err := m.Batch(b.Context(), func(ctx context.Context) {
			failed = nil // fn may run more than once; the last run's answers count
			for _, s := range sessions {
				if _, err := m.Heartbeat(ctx, holdfast.HeartbeatRequest{Session: s}); err != nil {
					failed = err
				}
			}
		})
		if err == nil {
			err = failed
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*benchBatch)/b.Elapsed().Seconds(), "sessions/s")
}

// parallel runs one step per iteration on benchGoroutines goroutines; setup
// gives each goroutine (numbered from 1) its own step.
func parallel(b *testing.B, setup func(id int64) (step func() error, err error)) {
	var ids atomic.Int64
	b.SetParallelism(max(1, benchGoroutines/runtime.GOMAXPROCS(0)))
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		step, err := setup(ids.Add(1))
		if err != nil {
			b.Error(err)
			return
		}
		for pb.Next() {
			if err := step(); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// benchManager opens a store on the real clock: benchmarks measure, they
// do not reach expiries.
func benchManager(b *testing.B, h Harness) *holdfast.Manager {
	b.Helper()
	return newManager(b, h.Open(b, time.Now))
}

// reportSyncs reads s's fsyncs now and, when the returned func is called
// at the end of the benchmark, reports how many acquire+release cycles
// shared one (syncs are where a durable store's callers wait) and the
// share of the run spent in them; nothing when the harness cannot tell.
func reportSyncs(b *testing.B, h Harness, s store.Store) func() {
	if h.Syncs == nil {
		return func() {}
	}
	n0, took0 := h.Syncs(s)
	return func() {
		n, took := h.Syncs(s)
		if n == n0 {
			return
		}
		b.ReportMetric(float64(b.N)/float64(n-n0), "cycles/sync")
		b.ReportMetric(float64(took-took0)/float64(b.Elapsed()), "sync-busy")
	}
}

// rawAcquire writes what an acquire writes, without the Manager.
func rawAcquire(tx store.Tx, key, session string) error {
	blocked := false
	if err := tx.Related(key, func(l store.Lock) bool { blocked = l.Session != session; return !blocked }); err != nil || blocked {
		return fmt.Errorf("blocked: %v", err)
	}
	tok, err := tx.NextToken()
	if err != nil {
		return err
	}
	now := tx.Now()
	l := store.Lock{Key: key, Session: session, User: "u-1", Name: "Bob Smith", Token: tok, AcquiredAt: now, ExpiresAt: now.Add(time.Hour)}
	if err := tx.PutLock(l); err != nil {
		return err
	}
	_, err = tx.AppendAudit(store.AuditEntry{At: now, Event: "acquired", Lock: l})
	return err
}

// rawRelease writes what a release writes, without the Manager.
func rawRelease(tx store.Tx, key, session string) error {
	l, ok, err := tx.Lock(key, session)
	if err != nil || !ok {
		return fmt.Errorf("not held: %v", err)
	}
	if err := tx.DeleteLock(key, session); err != nil {
		return err
	}
	_, err = tx.AppendAudit(store.AuditEntry{At: tx.Now(), Event: "released", Lock: l})
	return err
}
