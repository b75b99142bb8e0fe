package pgstore_test

import (
	"context"
	"os"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast/holdfast"
)

// roundTrips counts what a pool sends: each batch and each lone query is
// one round trip.
type roundTrips struct{ n atomic.Int64 }

func (r *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	r.n.Add(1)
	return ctx
}
func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (r *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	r.n.Add(1)
	return ctx
}
func (r *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (r *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// The lock paths stay a few round trips each: a change that adds one
// shows up here.
func TestRoundTrips(t *testing.T) {
	t.Parallel()
	schema := newSchema(t, testPool(t))
	cfg, err := pgxpool.ParseConfig(os.Getenv("HOLDFAST_TEST_POSTGRES"))
	if err != nil {
		t.Fatal(err)
	}
	counter := &roundTrips{}
	cfg.ConnConfig.Tracer = counter
	cfg.MaxConns = 1
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

	ctx := t.Context()
	o := holdfast.Owner{Session: "s-bob", User: "u-bob", Name: "Bob"}
	acquire := func() error {
		_, err := m.Acquire(ctx, holdfast.AcquireRequest{Keys: []string{"policy/1"}, Owner: o})
		return err
	}
	release := func() error {
		_, err := m.Release(ctx, holdfast.ReleaseRequest{Session: o.Session, Keys: []string{"policy/1"}})
		return err
	}
	heartbeat := func() error {
		_, err := m.Heartbeat(ctx, holdfast.HeartbeatRequest{Session: o.Session})
		return err
	}
	// One round first, so every statement is prepared on the connection.
	for _, op := range []func() error{acquire, heartbeat, release} {
		if err := op(); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name string
		op   func() error
		max  int64
	}{
		{"acquire", acquire, 4},
		{"heartbeat", heartbeat, 6},
		{"release", release, 4},
	} {
		before := counter.n.Load()
		if err := c.op(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		n := counter.n.Load() - before
		t.Logf("%s: %d round trips", c.name, n)
		if n > c.max {
			t.Errorf("%s took %d round trips, want at most %d", c.name, n, c.max)
		}
	}
}
