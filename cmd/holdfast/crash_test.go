package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/internal/histcheck"
)

// crashRounds is how many times TestKill9History kills the server: 20 by
// default (CI), HOLDFAST_CRASH_ROUNDS on request (50 for a release).
func crashRounds(t *testing.T) int {
	v := os.Getenv("HOLDFAST_CRASH_ROUNDS")
	if v == "" {
		return 20
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("HOLDFAST_CRASH_ROUNDS=%q: want a positive number", v)
	}
	return n
}

// TestKill9History runs concurrent clients against the real holdfast
// serve on the embedded store, kills it with SIGKILL at a random moment,
// restarts it on the same directory, and repeats. Every operation is
// recorded; after each restart every key is read back, and the whole
// history, across all crashes, must be linearizable under the lock model:
// every acknowledged grant still held with its token, every acknowledged
// release still released, no two conflicting holders, tokens only growing.
// Operations in flight at a kill may have happened or not, but not after
// the kill.
func TestKill9History(t *testing.T) {
	t.Parallel()
	rounds := crashRounds(t)
	dir := filepath.Join(t.TempDir(), "data")
	rec := histcheck.NewRecorder(24 * time.Hour)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0))
	ctx := context.Background()
	var maxSeen uint64

	for round := range rounds {
		w := histcheck.Workload{Prefix: "crash", Families: 6, Clients: 12, Seed: uint64(round)}
		p := startServe(t, dir)
		c := newClient(t, p.url)
		if err := w.ReadAll(ctx, c, rec, w.Clients); err != nil {
			t.Fatalf("round %d: %v\n%s", round, err, p.cmd.Stderr.(*lockedWriter).String())
		}
		// Tokens never go backwards across a crash, on any key.
		res, err := c.Acquire(ctx, holdfast.AcquireRequest{Keys: []string{fmt.Sprintf("probe/%d", round)}, Owner: holdfast.Owner{Session: "probe"}})
		if err != nil {
			t.Fatalf("round %d: probe: %v", round, err)
		}
		if tok := res.Locks[0].Token; tok <= maxSeen {
			t.Fatalf("round %d: the first token after restart is %d, not above %d seen before the kill", round, tok, maxSeen)
		}

		loadCtx, stopLoad := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			w.Run(loadCtx, c, rec)
		}()
		// Kill at an arbitrary moment of the load; this is the moment of
		// the crash, not a wait for anything.
		time.Sleep(time.Duration(20+rng.IntN(300)) * time.Millisecond)
		p.kill()
		<-done
		stopLoad()
		rec.Cut()
		maxSeen = max(maxSeen, maxToken(rec.History()))
	}

	p := startServe(t, dir)
	w := histcheck.Workload{Prefix: "crash", Families: 6}
	if err := w.ReadAll(ctx, newClient(t, p.url), rec, 0); err != nil {
		t.Fatal(err)
	}
	h := rec.History()
	counts := map[histcheck.Outcome]int{}
	for _, op := range h {
		counts[op.Output.Outcome]++
	}
	t.Logf("%d kill -9 rounds, %d operations: %v", rounds, len(h), counts)
	if counts[histcheck.OK] < rounds || counts[histcheck.Locked] == 0 {
		t.Fatalf("too little was acknowledged to prove anything: %v", counts)
	}
	if err := histcheck.Check(h, histcheck.CheckConfig{Timeout: 2 * time.Minute, VisualizeDir: histcheck.VisualizeDir()}); err != nil {
		t.Fatal(err)
	}
}

func maxToken(h []histcheck.Op) uint64 {
	var m uint64
	for _, op := range h {
		for _, g := range op.Output.Grants {
			m = max(m, g.Token)
		}
	}
	return m
}
