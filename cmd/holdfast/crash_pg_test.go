package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	mathrand "math/rand/v2"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/holdfast/holdfast/internal/histcheck"
	"github.com/holdfast/holdfast/internal/pgtest"
)

// migratedSchema creates a fresh schema with "holdfast migrate", checks
// that the command reports the schema's version, and drops the schema when
// the test ends. Killed nodes' database sessions may still hold locks
// for a moment, so a drop that deadlocks with them is tried again.
func migratedSchema(t *testing.T, dsn string) string {
	t.Helper()
	b := make([]byte, 6)
	rand.Read(b)
	schema := "hf_crash_" + hex.EncodeToString(b)
	out, err := exec.Command(binary, "migrate", "--store", dsn, "--schema", schema).CombinedOutput()
	if err != nil {
		t.Fatalf("holdfast migrate: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "schema "+schema+" is at version") {
		t.Fatalf("holdfast migrate printed %q, want the schema's version", out)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var err error
		for attempt := 0; attempt < 10; attempt++ {
			var conn *pgx.Conn
			if conn, err = pgx.Connect(ctx, dsn); err == nil {
				_, err = conn.Exec(ctx, `DROP SCHEMA `+schema+` CASCADE`)
				conn.Close(ctx)
			}
			if err == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Errorf("dropping schema %s: %v", schema, err)
	})
	return schema
}

// TestKill9NodesHistory runs three holdfast serve processes on one
// PostgreSQL schema with clients on every node working on the same keys,
// kills one node with SIGKILL at a random moment, restarts it, and repeats
// (20 rounds, HOLDFAST_CRASH_ROUNDS for more). After each restart every key
// is read back through every node, and the whole history must be
// linearizable: a crashed node loses nothing acknowledged and lets no
// other node grant twice.
func TestKill9NodesHistory(t *testing.T) {
	t.Parallel()
	dsn := pgtest.SharedDSN(t)
	schema := migratedSchema(t, dsn)
	rounds := crashRounds(t)
	const nodes, clients = 3, 4
	procs := make([]*serveProcess, nodes)
	for i := range procs {
		procs[i] = startNode(t, dsn, schema)
	}
	rec := histcheck.NewRecorder(24 * time.Hour)
	rng := mathrand.New(mathrand.NewPCG(uint64(time.Now().UnixNano()), 1))
	family := histcheck.Workload{Prefix: "pgcrash", Families: 4}
	ctx := context.Background()

	for round := range rounds {
		loadCtx, stopLoad := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for i, p := range procs {
			w := family
			w.Clients, w.FirstClient, w.Seed = clients, clients*i, uint64(round*nodes+i)
			c := newClient(t, p.url)
			wg.Go(func() { w.Run(loadCtx, c, rec) })
		}
		time.Sleep(time.Duration(20+rng.IntN(300)) * time.Millisecond) // the moment of the crash
		victim := rng.IntN(nodes)
		procs[victim].kill()
		stopLoad()
		wg.Wait()
		rec.Cut()
		procs[victim] = startNode(t, dsn, schema)
		for i, p := range procs {
			if err := family.ReadAll(ctx, newClient(t, p.url), rec, clients*nodes+i); err != nil {
				t.Fatalf("round %d, node %d: %v", round, i, err)
			}
		}
	}

	h := rec.History()
	counts := map[histcheck.Outcome]int{}
	for _, op := range h {
		counts[op.Output.Outcome]++
	}
	t.Logf("%d rounds of kill -9 among %d nodes, %d operations: %v", rounds, nodes, len(h), counts)
	if counts[histcheck.Unknown] == 0 || counts[histcheck.Locked] == 0 {
		t.Fatalf("no operation met a crash, or no contention: %v", counts)
	}
	if err := histcheck.Check(h, histcheck.CheckConfig{Timeout: 2 * time.Minute, VisualizeDir: histcheck.VisualizeDir()}); err != nil {
		t.Fatal(err)
	}
}
