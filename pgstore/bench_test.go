package pgstore_test

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/holdfast/holdfast/store/storetest"
)

// Run side by side, on the same database, with the same 64 goroutines:
//
//	HOLDFAST_TEST_POSTGRES=postgres://… go test -run '^$' -bench . -benchtime 5s ./pgstore/
//
// BenchmarkStore measures the lock manager over this store;
// BenchmarkHandRolledLockTable measures the lock table a team would write
// by hand, which is what the PostgreSQL store has to beat.

func BenchmarkStore(b *testing.B) {
	storetest.Bench(b, harness())
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
	b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
	b.ReportAllocs()
	b.ResetTimer()
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
