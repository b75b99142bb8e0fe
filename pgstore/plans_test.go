package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/internal/pgtest"
	"github.com/holdfast/holdfast/pgstore"
)

// The plans a connection keeps for the store's statements look rows up by
// index even when they were made on a new, empty schema: a generic plan
// made then and kept would otherwise scan the whole table, dead rows and
// all, on every later call. Nor are they parallel: PostgreSQL chooses a
// parallel plan once a table passes a few megabytes (dead rows count, and
// without autovacuum nothing removes them), and starting workers for a
// lookup of a few rows made each transaction wait milliseconds. The test
// makes the server put every plan it may run in parallel under a Gather.
func TestPlansUseIndexesOnANewSchema(t *testing.T) {
	t.Parallel()
	shared := testPool(t)
	schema := newSchema(t, shared)
	cfg, err := pgxpool.ParseConfig(pgtest.SharedDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1 // the statements' plans are the connection's
	var version int
	if err := shared.QueryRow(t.Context(), `SELECT current_setting('server_version_num')::int`).Scan(&version); err != nil {
		t.Fatal(err)
	}
	forceParallel := "debug_parallel_query"
	if version < 160000 {
		forceParallel = "force_parallel_mode" // its name until PostgreSQL 16
	}
	cfg.ConnConfig.RuntimeParams[forceParallel] = "on"
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	m, err := holdfast.New(hinted{Store: open(t, pool, schema, nil)}, holdfast.Config{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()

	ctx := t.Context()
	// More live sessions than the forget sweep lists at once (1000), so
	// that the sweeps send its listing of later pages (id > $after) too.
	if _, err := shared.Exec(ctx, `INSERT INTO `+schema+`.sessions (id, last_seen)
		SELECT 'bulk-' || lpad(i::text, 4, '0'), now() FROM generate_series(1, 1500) AS i`); err != nil {
		t.Fatal(err)
	}
	keys, o := []string{"order/1"}, holdfast.Owner{Session: "s-1", User: "u-1"}
	acquire := func(ctx context.Context) error {
		_, err := m.Acquire(ctx, holdfast.AcquireRequest{Keys: keys, Owner: o})
		return err
	}
	release := func(ctx context.Context) error {
		_, err := m.Release(ctx, holdfast.ReleaseRequest{Session: o.Session, Keys: keys})
		return err
	}
	heartbeat := func(ctx context.Context) error {
		_, err := m.Heartbeat(ctx, holdfast.HeartbeatRequest{Session: o.Session})
		return err
	}
	// Alone, and in batches that Prepare reads ahead for.
	batch := func(op func(context.Context) error) error {
		var failed error
		err := m.Batch(withHint(ctx, keys, []string{o.Session}), func(ctx context.Context) { failed = op(ctx) })
		return errors.Join(err, failed)
	}
	// Reads first: they plan with the server's settings, and must not make
	// the plans the writes keep (the connection keeps the plan of a
	// statement made first, whoever sends it).
	read := func() error {
		_, err := m.Locks(ctx, holdfast.LockQuery{Key: keys[0]})
		if err == nil {
			_, err = m.Sessions(ctx, holdfast.SessionQuery{Session: o.Session})
		}
		if err == nil { // the listing the sweep sends too
			_, err = m.Sessions(ctx, holdfast.SessionQuery{})
		}
		return err
	}
	work := func(t *testing.T) {
		for range 20 { // past the custom plans PostgreSQL tries first
			if err := read(); err != nil {
				t.Fatal(err)
			}
		}
		for range 20 {
			for _, err := range []error{acquire(ctx), release(ctx), batch(acquire), batch(heartbeat), batch(release), read(), m.Sweep(ctx)} {
				if err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	// Another test's DDL on the same database can invalidate the kept
	// plans (under load, the server resets every cached plan), and
	// explainKept then plans them anew as a write would, which hides a
	// plan that was wanting. So three rounds, each on statements planned
	// anew, and a plan found wanting in any of them fails the test.
	scans := map[string]bool{}
	checked := map[string]bool{}
	for round := range 3 {
		if round > 0 {
			if err := pool.AcquireFunc(ctx, func(c *pgxpool.Conn) error { return c.Conn().DeallocateAll(ctx) }); err != nil {
				t.Fatal(err)
			}
		}
		work(t)
		for _, s := range explainKept(t, pool, schema, checked) {
			if !scans[s] {
				scans[s] = true
				t.Error(s)
			}
		}
	}
	for _, what := range []string{"lost read", "lock deletion", "lost write", "holders read", "live sessions listing", "live sessions page"} {
		if !checked[what] {
			t.Errorf("no generic plan of the %s to check", what)
		}
	}
}

// explainKept explains, on pool's one connection, each of the store's
// statements in schema that has a generic plan, marks in checked the
// parts it saw, and returns a message for each plan that scans a table
// or runs in parallel.
func explainKept(t *testing.T, pool *pgxpool.Pool, schema string, checked map[string]bool) (scans []string) {
	t.Helper()
	ctx := t.Context()
	// On the same connection, in a transaction set as the writes set
	// theirs: explain each of the store's statements that has a generic
	// plan, as that plan stands (force_generic_plan reuses it rather than
	// planning anew). A plan that other tests' DDL invalidated meanwhile
	// (under load, so much that the server resets every cached plan) is
	// planned anew here as the next write would plan it.
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT `+pgstore.PlannerSettings); err != nil {
		t.Fatal(err)
	}
	rows, err := tx.Query(ctx, `SELECT name, statement, cardinality(parameter_types) FROM pg_prepared_statements
		WHERE generic_plans > 0 AND statement LIKE '%"' || $1 || '".%' AND statement NOT LIKE $2 || '%'`, schema, pgstore.ReadMark)
	if err != nil {
		t.Fatal(err)
	}
	type stmt struct {
		name, sql string
		params    int
	}
	var stmts []stmt
	for rows.Next() {
		var s stmt
		if err := rows.Scan(&s.name, &s.sql, &s.params); err != nil {
			t.Fatal(err)
		}
		stmts = append(stmts, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, s := range stmts {
		args := strings.TrimSuffix(strings.Repeat("NULL, ", s.params), ", ")
		explain := `EXPLAIN EXECUTE ` + s.name
		if s.params > 0 {
			explain += `(` + args + `)`
		}
		var plan strings.Builder
		rows, err := tx.Query(ctx, explain)
		if err != nil {
			t.Fatalf("%s: %v", s.sql, err)
		}
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintln(&plan, line)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		for _, scan := range []string{"Seq Scan on", "Bitmap Heap Scan on", "Gather"} {
			if strings.Contains(plan.String(), scan) {
				scans = append(scans, fmt.Sprintf("the generic plan of\n%s\nhas %q:\n%s", s.sql, scan, plan.String()))
			}
		}
		// The holders' records, read with the lock rows, are looked up
		// by id, not by a join that reads a whole index.
		if strings.Contains(s.sql, "LEFT JOIN LATERAL") {
			checked["holders read"] = true
			if scan := fullIndexScan(plan.String()); scan != "" {
				scans = append(scans, fmt.Sprintf("the generic plan of\n%s\nreads a whole index (%s):\n%s", s.sql, scan, plan.String()))
			}
		}
		// The sweep's listing of live sessions walks an index in id order
		// and stops at its limit, not reads every live session and sorts
		// them.
		if strings.Contains(s.sql, ".sessions WHERE ended_at IS NULL") {
			checked["live sessions listing"] = true
			if strings.Contains(s.sql, "id > $") {
				checked["live sessions page"] = true
			}
			if strings.Contains(plan.String(), "Sort") {
				scans = append(scans, fmt.Sprintf("the generic plan of\n%s\nsorts:\n%s", s.sql, plan.String()))
			}
		}
		for what, part := range map[string]string{
			"lost read": ".lost WHERE session = ANY", "lock deletion": "locks_deleted AS", "lost write": "lost_older AS",
		} {
			if strings.Contains(s.sql, part) {
				checked[what] = true
			}
		}
	}
	return scans
}

// fullIndexScan returns the first index scan of plan (EXPLAIN's text) that
// has no Index Cond, so reads every entry of its index, or "".
func fullIndexScan(plan string) string {
	lines := strings.Split(plan, "\n")
	for i, line := range lines {
		if !strings.Contains(line, "Index Scan using") && !strings.Contains(line, "Index Only Scan using") {
			continue
		}
		cond := false
		for _, detail := range lines[i+1:] {
			if strings.Contains(detail, "->") {
				break // the next node
			}
			cond = cond || strings.Contains(detail, "Index Cond:")
		}
		if !cond {
			return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "->"))
		}
	}
	return ""
}
