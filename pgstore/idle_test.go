package pgstore_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/holdfast/holdfast/pgstore"
	"github.com/holdfast/holdfast/store"
)

// A touch that moves a session's idle deadline later leaves idle_after,
// the column the sweep's index holds, where it was, so that the update
// changes no indexed column. The sweep moves an idle_after it finds early
// up to the deadline; a deadline moved earlier, or gone, takes idle_after
// with it at once.
func TestIdleAfterLagsBehindALaterDeadline(t *testing.T) {
	t.Parallel()
	pool := testPool(t)
	schema := newSchema(t, pool)
	t0 := time.Date(2026, 12, 2, 18, 0, 0, 0, time.UTC)
	s := open(t, pool, schema, nil)
	ctx := t.Context()

	sess := store.Session{ID: "s-83", LastSeen: t0, IdleTimeout: time.Minute}
	touch := func(lastSeen time.Time, timeout time.Duration) {
		t.Helper()
		sess.LastSeen, sess.IdleTimeout = lastSeen, timeout
		if err := s.Update(ctx, func(tx store.Tx) error { return tx.(store.Toucher).TouchSession(sess) }); err != nil {
			t.Fatal(err)
		}
	}
	want := func(step string, after, deadline *time.Time) {
		t.Helper()
		var gotAfter, gotDeadline *time.Time
		if err := pool.QueryRow(ctx, `SELECT idle_after, idle_deadline FROM `+schema+`.sessions WHERE id = $1`, sess.ID).Scan(&gotAfter, &gotDeadline); err != nil {
			t.Fatal(err)
		}
		same := func(a, b *time.Time) bool { return (a == nil) == (b == nil) && (a == nil || a.Equal(*b)) }
		if !same(gotAfter, after) || !same(gotDeadline, deadline) {
			t.Fatalf("%s: idle_after %v, idle_deadline %v; want %v, %v", step, gotAfter, gotDeadline, after, deadline)
		}
	}
	sweep := func(now time.Time) []string { return sweepIdle(t, ctx, s, now) }
	at := func(d time.Duration) *time.Time { x := t0.Add(d); return &x }

	touch(t0, time.Minute)
	want("a new session", at(time.Minute), at(time.Minute))
	touch(t0.Add(30*time.Second), time.Minute)
	want("a deadline moved later", at(time.Minute), at(90*time.Second))

	if got := sweep(t0.Add(time.Minute)); len(got) != 0 {
		t.Errorf("idle at the old deadline: %v, want none", got)
	}
	want("after the sweep passed it", at(90*time.Second), at(90*time.Second))
	if got := sweep(t0.Add(90 * time.Second)); len(got) != 1 || got[0] != sess.ID {
		t.Errorf("idle at the deadline: %v, want [%s]", got, sess.ID)
	}

	touch(t0.Add(40*time.Second), 10*time.Second)
	want("a deadline moved earlier", at(50*time.Second), at(50*time.Second))
	touch(t0.Add(45*time.Second), 0)
	want("no idle timeout", nil, nil)
	touch(t0.Add(46*time.Second), time.Minute)
	want("an idle timeout again", at(106*time.Second), at(106*time.Second))
}

// Upgrading to schema version 3 gives the live sessions with an idle
// timeout their idle_after, so that the sweep still finds them idle.
func TestMigration3KeepsIdleSessionsFound(t *testing.T) {
	t.Parallel()
	pool := testPool(t)
	schema := newSchemaAt(t, pool, 2)
	ctx := t.Context()
	t0 := time.Date(2026, 12, 2, 18, 0, 0, 0, time.UTC)
	if _, err := pool.Exec(ctx, `INSERT INTO `+schema+`.sessions (id, last_seen, idle_timeout_ns, idle_deadline, ended_at) VALUES
		('s-idle', $1::timestamptz, 60e9, $1::timestamptz + interval '1 minute', NULL),
		('s-forever', $1::timestamptz, 0, NULL, NULL),
		('s-ended', $1::timestamptz, 60e9, NULL, $1::timestamptz)`, t0); err != nil {
		t.Fatal(err)
	}
	if err := pgstore.Migrate(ctx, pool, schema); err != nil {
		t.Fatal(err)
	}
	s := open(t, pool, schema, nil)
	if ids := sweepIdle(t, ctx, s, t0.Add(time.Hour)); len(ids) != 1 || ids[0] != "s-idle" {
		t.Fatalf("idle sessions after the upgrade: %v, want [s-idle]", ids)
	}
}

// Sessions whose idle_after lags behind their deadlines are passed over,
// however many come before an idle one, in reads and in writes; a write
// holds the session locks of the idle ones only, and after its commit a
// bounded number of lagging idle_afters move up, skipping rows others hold.
func TestIdleSessionsPassLaggingOnes(t *testing.T) {
	t.Parallel()
	pool := testPool(t)
	schema := newSchema(t, pool)
	ctx := t.Context()
	t0 := time.Date(2026, 12, 2, 18, 0, 0, 0, time.UTC)
	const lagging = 20000 // more session locks than PostgreSQL's default lock table holds
	if _, err := pool.Exec(ctx, `INSERT INTO `+schema+`.sessions (id, last_seen, idle_timeout_ns, idle_deadline, idle_after)
		SELECT format('s-%s', lpad(i::text, 5, '0')), $1::timestamptz, 60e9, $1::timestamptz + interval '1 hour', $1::timestamptz + interval '1 minute'
		FROM generate_series(1, $2::int) i
		UNION ALL SELECT 's-z-idle', $1::timestamptz, 60e9, $1::timestamptz + interval '1 minute', $1::timestamptz + interval '1 minute'`, t0, lagging); err != nil {
		t.Fatal(err)
	}
	now := t0.Add(2 * time.Minute)
	stillLagging := func() (n int) {
		t.Helper()
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+schema+`.sessions WHERE idle_after <= $1 AND idle_deadline > $1`, now).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	s := open(t, pool, schema, nil)
	var read []store.Session
	if err := s.View(ctx, func(tx store.ReadTx) (err error) {
		read, err = tx.IdleSessions(now, 100)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if got := sessionIDs(read); len(got) != 1 || got[0] != "s-z-idle" {
		t.Fatalf("idle sessions read: %v, want [s-z-idle]", got)
	}
	if n := stillLagging(); n != lagging {
		t.Fatalf("%d lagging after a read, want %d", n, lagging)
	}

	// Another transaction holds the first lagging row: the commit passes
	// it by rather than waiting for it.
	held, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Rollback(ctx)
	if _, err := held.Exec(ctx, `SELECT FROM `+schema+`.sessions WHERE id = 's-00001' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if got := sweepIdle(t, wctx, s, now); len(got) != 1 || got[0] != "s-z-idle" {
		t.Fatalf("idle sessions in a write: %v, want [s-z-idle]", got)
	}
	if n := stillLagging(); n != lagging-pgstore.CatchUpBatch {
		t.Fatalf("%d lagging after a write, want %d moved up of %d", n, pgstore.CatchUpBatch, lagging)
	}
	var first time.Time
	if err := pool.QueryRow(ctx, `SELECT idle_after FROM `+schema+`.sessions WHERE id = 's-00001'`).Scan(&first); err != nil {
		t.Fatal(err)
	}
	if !first.Equal(t0.Add(time.Minute)) {
		t.Fatalf("the row held elsewhere has idle_after %v, want it left at %v", first, t0.Add(time.Minute))
	}
}

// A heartbeat updates its session's row in place only while no index of
// the table holds a column it changes, and while the row's page has room
// for the new version: the table's pages are left part empty.
func TestSessionIndexesLeaveTouchesInPlace(t *testing.T) {
	t.Parallel()
	pool := testPool(t)
	schema := newSchema(t, pool)
	var options []string
	if err := pool.QueryRow(t.Context(), `SELECT coalesce(reloptions, '{}') FROM pg_class WHERE oid = ($1 || '.sessions')::regclass`, schema).Scan(&options); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(options, "fillfactor=75") {
		t.Errorf("sessions has options %v, want fillfactor=75", options)
	}
	rows, err := pool.Query(t.Context(), `SELECT pg_get_indexdef(indexrelid) FROM pg_index WHERE indrelid = ($1 || '.sessions')::regclass`, schema)
	if err != nil {
		t.Fatal(err)
	}
	defs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(defs) == 0 {
		t.Fatal("no indexes on sessions")
	}
	for _, def := range defs {
		for _, col := range []string{"last_seen", "idle_deadline", "idle_timeout_ns"} {
			if strings.Contains(def, col) {
				t.Errorf("%s holds %s, which a heartbeat changes", def, col)
			}
		}
	}
}

// sweepIdle returns the ids of the sessions IdleSessions finds idle at now
// in a write transaction, as the sweep's.
func sweepIdle(t *testing.T, ctx context.Context, s *pgstore.Store, now time.Time) []string {
	t.Helper()
	var idle []store.Session
	if err := s.Update(ctx, func(tx store.Tx) (err error) {
		idle, err = tx.IdleSessions(now, 100)
		return err
	}); err != nil {
		t.Fatalf("IdleSessions(%v) in a write: %v", now, err)
	}
	return sessionIDs(idle)
}

func sessionIDs(sessions []store.Session) []string {
	ids := make([]string, len(sessions))
	for i, s := range sessions {
		ids[i] = s.ID
	}
	return ids
}

// Moving lagging idle_afters up only spares later sweeps some reading: when
// it fails, the sweep's own writes stand.
func TestFailedCatchUpKeepsTheSweep(t *testing.T) {
	t.Parallel()
	pool := testPool(t)
	schema := newSchema(t, pool)
	ctx := t.Context()
	t0 := time.Date(2026, 12, 2, 18, 0, 0, 0, time.UTC)
	if _, err := pool.Exec(ctx, `INSERT INTO `+schema+`.sessions (id, last_seen, idle_timeout_ns, idle_deadline, idle_after) VALUES
		('s-lagging', $1::timestamptz, 60e9, $1::timestamptz + interval '1 hour', $1::timestamptz + interval '1 minute'),
		('s-idle', $1::timestamptz, 60e9, $1::timestamptz + interval '1 minute', $1::timestamptz + interval '1 minute')`, t0); err != nil {
		t.Fatal(err)
	}
	// Refuse every update that moves idle_after alone, as only the
	// catch-up does.
	if _, err := pool.Exec(ctx, `CREATE FUNCTION `+schema+`.refuse() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'no catching up here'; END $$;
		CREATE TRIGGER refuse BEFORE UPDATE ON `+schema+`.sessions FOR EACH ROW
		WHEN (OLD.last_seen = NEW.last_seen AND OLD.ended_at IS NULL AND NEW.ended_at IS NULL AND OLD.idle_after IS DISTINCT FROM NEW.idle_after)
		EXECUTE FUNCTION `+schema+`.refuse()`); err != nil {
		t.Fatal(err)
	}
	s := open(t, pool, schema, nil)
	now := t0.Add(2 * time.Minute)
	if err := s.Update(ctx, func(tx store.Tx) error {
		idle, err := tx.IdleSessions(now, 100)
		if err != nil {
			return err
		}
		if ids := sessionIDs(idle); len(ids) != 1 || ids[0] != "s-idle" {
			t.Errorf("idle sessions: %v, want [s-idle]", ids)
		}
		for _, s := range idle {
			s.EndedAt, s.EndReason = now, "idle"
			if err := tx.PutSession(s); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatalf("a sweep whose catch-up fails: %v", err)
	}
	var ended *time.Time
	if err := pool.QueryRow(ctx, `SELECT ended_at FROM `+schema+`.sessions WHERE id = 's-idle'`).Scan(&ended); err != nil {
		t.Fatal(err)
	}
	if ended == nil {
		t.Fatal("the idle session was not ended: the failed catch-up undid the sweep")
	}
}
