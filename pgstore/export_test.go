package pgstore

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// MigrateTo applies the embedded migrations up to version, as a build of
// that schema version would have.
func MigrateTo(ctx context.Context, pool *pgxpool.Pool, schema string, version int) error {
	for _, m := range migrations[:version] {
		if err := apply(ctx, pool, schema, m); err != nil {
			return err
		}
	}
	return nil
}

// LockKeyID is the advisory lock id pgstore's writers take for a key, for
// tests that compare it with the SQL lock_id.
func LockKeyID(schema, key string) int64 { return lockID(schema, classKey, key) }

// CatchUpBatch bounds the idle_afters one transaction moves up.
const CatchUpBatch = catchUpBatch

// ReadMark starts the statements of read transactions.
const ReadMark = readMark

// PlannerSettings are the set_config calls of a write transaction.
const PlannerSettings = plannerSettings

// SetListenProbe sets how long Listen waits for a notification before it
// pings the database; call it before Listen.
func SetListenProbe(s *Store, d time.Duration) { s.probeEvery = d }
