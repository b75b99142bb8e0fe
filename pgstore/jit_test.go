package pgstore_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/internal/pgtest"
)

// PostgreSQL compiles a statement whose estimated cost passes
// jit_above_cost on every execution, which takes milliseconds; the store's
// statements read a few rows each, so its transactions turn JIT off. Here
// every statement would be compiled (jit_above_cost 0), and auto_explain
// sends each plan as it ran, with its JIT section if it was compiled.
// Without the store's setting, all 52 here were.
func TestStatementsAreNotCompiled(t *testing.T) {
	t.Parallel()
	base := testPool(t)
	var available bool
	if err := base.QueryRow(t.Context(), `SELECT pg_jit_available()`).Scan(&available); err != nil {
		t.Fatal(err)
	}
	if !available {
		t.Skip("this PostgreSQL server cannot compile statements (pg_jit_available() is false), so there is nothing to turn off")
	}
	schema := newSchema(t, base)
	cfg, err := pgxpool.ParseConfig(pgtest.SharedDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		plans []string
	)
	cfg.ConnConfig.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		if strings.Contains(n.Message, "plan:") {
			mu.Lock()
			plans = append(plans, n.Message)
			mu.Unlock()
		}
	}
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		for _, sql := range []string{`LOAD 'auto_explain'`, `SET auto_explain.log_min_duration = 0`,
			`SET auto_explain.log_analyze = on`, `SET auto_explain.log_level = notice`, `SET jit_above_cost = 0`} {
			if _, err := c.Exec(ctx, sql); err != nil {
				return err
			}
		}
		return nil
	}
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	m, err := holdfast.New(open(t, pool, schema, nil), holdfast.Config{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	mu.Lock()
	plans = nil // opening checked the schema's version, outside any transaction
	mu.Unlock()

	ctx := t.Context()
	bob := holdfast.Owner{Session: "s-bob", User: "bob"}
	for _, op := range []func() error{
		func() error {
			_, err := m.Acquire(ctx, holdfast.AcquireRequest{Keys: []string{"order/1"}, Owner: bob})
			return err
		},
		func() error { // several keys: the read-ahead
			_, err := m.Acquire(ctx, holdfast.AcquireRequest{Keys: []string{"order/2", "order/3"}, Owner: bob})
			return err
		},
		func() error {
			_, err := m.Heartbeat(ctx, holdfast.HeartbeatRequest{Session: bob.Session})
			return err
		},
		func() error {
			_, err := m.Locks(ctx, holdfast.LockQuery{Key: "order"})
			return err
		},
		func() error {
			_, err := m.Sessions(ctx, holdfast.SessionQuery{})
			return err
		},
		func() error {
			_, err := m.Release(ctx, holdfast.ReleaseRequest{Keys: []string{"order/1", "order/2", "order/3"}, Session: bob.Session})
			return err
		},
		func() error { return m.Sweep(ctx) },
	} {
		if err := op(); err != nil {
			t.Fatal(err)
		}
	}

	mu.Lock()
	defer mu.Unlock()
	if len(plans) == 0 {
		t.Fatal("auto_explain sent no plan")
	}
	compiled, witnesses := 0, 0
	for _, p := range plans {
		if !strings.Contains(p, "JIT:") {
			continue
		}
		// The statement that turns JIT off is planned before it does, so
		// it is compiled here: the witness that this server compiles at
		// all, without which the test could not fail.
		if strings.Contains(p, "set_config('jit', 'off', true)") {
			witnesses++
			continue
		}
		compiled++
		if compiled <= 3 {
			t.Errorf("a statement was compiled:\n%s", p)
		}
	}
	if witnesses == 0 {
		t.Errorf("not even the statement that turns JIT off was compiled, of %d plans: is auto_explain reporting JIT?", len(plans))
	}
	if compiled > 0 {
		t.Errorf("%d of %d statements were compiled", compiled, len(plans))
	}
}
