package pgstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/store"
	"github.com/holdfast/holdfast/store/storetest"
)

// Run side by side, on the same database, with the same 64 clients:
//
//	HOLDFAST_TEST_POSTGRES=postgres://… go test -run '^$' -bench 'Manager|HandRolled' -benchtime 3s ./pgstore/
//
// BenchmarkStore measures the lock manager over this store;
// BenchmarkHandRolledLockTable measures the lock table a team would write
// by hand, which is what the PostgreSQL store has to beat. Each op is one
// acquire+release cycle. Where the database runs on this machine, they
// also report the CPU time per cycle of its backends (server-cpu) and of
// this process (client-cpu): the machine is shared, so times are noisy,
// while CPU shows what each design costs.

func BenchmarkStore(b *testing.B) {
	storetest.Bench(b, harness())
}

// BenchmarkManager is 64 goroutines each acquiring and releasing its own
// key through one Manager, as 64 clients of one server do.
func BenchmarkManager(b *testing.B) {
	m := benchManager(b, nil)
	var ids atomic.Int64
	b.SetParallelism(max(1, benchClients/runtime.GOMAXPROCS(0)))
	b.ReportAllocs()
	b.ResetTimer()
	defer measureCPU(b)()
	b.RunParallel(func(pb *testing.PB) {
		id := ids.Add(1)
		o := holdfast.Owner{Session: fmt.Sprintf("bench-%d", id), User: "u-bench"}
		keys := []string{fmt.Sprintf("order/%d", id)}
		for pb.Next() {
			if _, err := m.Acquire(b.Context(), holdfast.AcquireRequest{Keys: keys, Owner: o}); err != nil {
				b.Error(err)
				return
			}
			if _, err := m.Release(b.Context(), holdfast.ReleaseRequest{Session: o.Session, Keys: keys}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkManagerBatch runs the 64 clients' acquires in one Manager.Batch
// and then their releases in another, one transaction each, prepared with
// the keys and sessions they name (Prepare) or not (NoPrepare): what a
// group commit of 64 operations costs on PostgreSQL. Prepare8 is Prepare
// with batches of 8, about the size of those the coalescing client sends
// under holdfast bench's cycle workload.
func BenchmarkManagerBatch(b *testing.B) {
	b.Run("Prepare", func(b *testing.B) { benchManagerBatch(b, benchClients, false) })
	b.Run("Prepare8", func(b *testing.B) { benchManagerBatch(b, 8, false) })
	b.Run("NoPrepare", func(b *testing.B) { benchManagerBatch(b, benchClients, true) })
}

func benchManagerBatch(b *testing.B, size int, plain bool) {
	m := benchManager(b, func(s store.Store) store.Store { return hinted{s, plain} })
	keys, sessions := make([]string, size), make([]string, size)
	for i := range keys {
		keys[i], sessions[i] = fmt.Sprintf("order/%d", i), fmt.Sprintf("bench-%d", i)
	}
	ctx := withHint(b.Context(), keys, sessions)
	batch := func(op func(ctx context.Context, i int) error) {
		var failed error
		err := m.Batch(ctx, func(ctx context.Context) {
			failed = nil
			for i := range keys {
				if err := op(ctx, i); err != nil {
					failed = err
				}
			}
		})
		if err = errors.Join(err, failed); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	defer measureCPU(b)()
	for done := 0; done < b.N; done += size {
		batch(func(ctx context.Context, i int) error {
			_, err := m.Acquire(ctx, holdfast.AcquireRequest{Keys: keys[i : i+1], Owner: holdfast.Owner{Session: sessions[i], User: "u-bench"}})
			return err
		})
		batch(func(ctx context.Context, i int) error {
			_, err := m.Release(ctx, holdfast.ReleaseRequest{Session: sessions[i], Keys: keys[i : i+1]})
			return err
		})
	}
}

const benchClients = 64

// benchManager opens a Manager on a fresh schema, over its store wrapped
// by wrap if given.
func benchManager(b *testing.B, wrap func(store.Store) store.Store) *holdfast.Manager {
	pool := testPool(b)
	var s store.Store = open(b, pool, newSchema(b, pool), nil)
	if wrap != nil {
		s = wrap(s)
	}
	m, err := holdfast.New(s, holdfast.Config{SweepInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Close() })
	return m
}

// BenchmarkHandRolledLockTable is the usual hand-written lock table: one
// row per locked record, taken by INSERT … ON CONFLICT DO NOTHING and
// given back by DELETE … WHERE owner, each statement its own transaction,
// committed with synchronous_commit on. It knows no sessions, expiry
// decisions, hierarchy, tokens or audit.
func BenchmarkHandRolledLockTable(b *testing.B) {
	pool := testPool(b)
	schema := newSchema(b, pool)
	if _, err := pool.Exec(b.Context(), `CREATE TABLE `+schema+`.record_locks (
		record text PRIMARY KEY, owner text NOT NULL, expires_at timestamptz NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	acquire := `INSERT INTO ` + schema + `.record_locks (record, owner, expires_at) VALUES ($1, $2, now() + interval '2 hours') ON CONFLICT DO NOTHING`
	release := `DELETE FROM ` + schema + `.record_locks WHERE record = $1 AND owner = $2`

	var ids atomic.Int64
	b.SetParallelism(max(1, benchClients/runtime.GOMAXPROCS(0)))
	b.ReportAllocs()
	b.ResetTimer()
	defer measureCPU(b)()
	b.RunParallel(func(pb *testing.PB) {
		id := ids.Add(1)
		record, owner := fmt.Sprintf("order/%d", id), fmt.Sprintf("bench-%d", id)
		for pb.Next() {
			ct, err := pool.Exec(b.Context(), acquire, record, owner)
			if err != nil || ct.RowsAffected() != 1 {
				b.Errorf("acquire %s: %v (%d rows)", record, err, ct.RowsAffected())
				return
			}
			if ct, err = pool.Exec(b.Context(), release, record, owner); err != nil || ct.RowsAffected() != 1 {
				b.Errorf("release %s: %v (%d rows)", record, err, ct.RowsAffected())
				return
			}
		}
	})
}

// measureCPU starts measuring the CPU time of the shared pool's database
// backends and of this process; the function it returns reports both per
// op. The backends' time is read from /proc, so it is left out where the
// database runs elsewhere.
func measureCPU(b *testing.B) (report func()) {
	server, serverOK := backendsCPU(b)
	client := processCPU()
	return func() {
		b.ReportMetric(float64((processCPU()-client).Microseconds())/float64(b.N), "client-cpu-µs/op")
		if now, ok := backendsCPU(b); ok && serverOK {
			b.ReportMetric(float64((now-server).Microseconds())/float64(b.N), "server-cpu-µs/op")
		}
	}
}

// backendsCPU sums the CPU time of the backends of the shared pool's idle
// connections, or reports false if it cannot read them.
func backendsCPU(b *testing.B) (time.Duration, bool) {
	conns := testPool(b).AcquireAllIdle(b.Context())
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	var total time.Duration
	for _, c := range conns {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c.Conn().PgConn().PID()))
		if err != nil {
			return 0, false
		}
		// Fields after the command name: state is the first, utime and
		// stime the 12th and 13th, in clock ticks of 10 ms.
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(fields) < 13 {
			return 0, false
		}
		utime, err1 := strconv.ParseInt(fields[11], 10, 64)
		stime, err2 := strconv.ParseInt(fields[12], 10, 64)
		if err1 != nil || err2 != nil {
			return 0, false
		}
		total += time.Duration(utime+stime) * 10 * time.Millisecond
	}
	return total, true
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
