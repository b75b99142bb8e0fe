package histcheck_test

import (
	"context"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/internal/histcheck"
	"github.com/holdfast/holdfast/internal/pgtest"
	"github.com/holdfast/holdfast/pgstore"
)

// TestNodesSharingPostgres runs three server nodes, each with its own
// Manager, store and connection pool, on one PostgreSQL schema, and
// clients of each node working on the same keys at once: mutual
// exclusion, tokens and visibility must hold across nodes exactly as on
// one, so the combined history must be linearizable.
func TestNodesSharingPostgres(t *testing.T) {
	t.Parallel()
	dsn := pgtest.SharedDSN(t)
	schema := newSchema(t, dsn)
	const nodes = 3
	services := make([]holdfast.Service, nodes)
	for i := range services {
		pool, err := pgxpool.New(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		st, err := pgstore.New(context.Background(), pool, pgstore.Config{Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		services[i] = serve(t, st)
	}

	rec := histcheck.NewRecorder(longTTL)
	var wg sync.WaitGroup
	for i, svc := range services {
		w := histcheck.Workload{Prefix: "nodes", Families: 4, Clients: 4, FirstClient: 4 * i, Ops: 60, Seed: uint64(i)}
		wg.Go(func() { w.Run(context.Background(), svc, rec) })
	}
	wg.Wait()
	w := histcheck.Workload{Prefix: "nodes", Families: 4}
	for i, svc := range services {
		// Every node sees the same final state.
		if err := w.ReadAll(context.Background(), svc, rec, 4*nodes+i); err != nil {
			t.Fatal(err)
		}
	}
	h := rec.History()
	counts := map[histcheck.Outcome]int{}
	for _, op := range h {
		counts[op.Output.Outcome]++
	}
	t.Logf("%d nodes, %d operations: %v", nodes, len(h), counts)
	if counts[histcheck.Locked] == 0 {
		t.Fatalf("no contention across nodes: %v", counts)
	}
	if err := histcheck.Check(h, histcheck.CheckConfig{VisualizeDir: histcheck.VisualizeDir()}); err != nil {
		t.Fatal(err)
	}
}
