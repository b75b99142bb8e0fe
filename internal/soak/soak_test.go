package soak_test

import (
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/client"
	"github.com/holdfast/holdfast/logstore"
	"github.com/holdfast/holdfast/server"
)

// ciRounds is the soak without HOLDFAST_SOAK: enough rounds for a third of
// warm-up and two thirds to compare, the same work on a slow machine.
const ciRounds = 10

// soakLength is HOLDFAST_SOAK, a duration; without it the soak is
// ciRounds rounds, sampled after each.
func soakLength(t *testing.T) (d time.Duration, every time.Duration) {
	v := os.Getenv("HOLDFAST_SOAK")
	if v == "" {
		return 0, 0
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("HOLDFAST_SOAK=%q: want a duration such as 10m", v)
	}
	return d, d / 30
}

// TestSoak keeps 10,000 sessions alive with batched heartbeats while
// editors acquire and release keys that collide often and pages come and
// go, against a real server on the embedded store holdfast serve opens
// (logstore), in rounds that all workers finish before the next starts.
// The store's clock gains 12 hours a round, so a day of retention passes
// every two rounds. The only errors allowed are refusals (423). Between
// rounds the heap (where logstore keeps its records), the store's record
// counts and the goroutines are sampled; after a third of
// the run for warm-up, none of them may grow (see notFlat), and every
// goroutine ends once the server is closed.
func TestSoak(t *testing.T) {
	d, every := soakLength(t)
	profiles := os.Getenv("HOLDFAST_SOAK_PROFILE")
	baseline := runtime.NumGoroutine()

	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	var clk clock
	st, err := logstore.Open(filepath.Join(t.TempDir(), "data"), logstore.Config{Now: clk.now, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	// The sweep runs ten times a second: a second of real time is hours
	// of the store's.
	mgr, err := holdfast.New(st, holdfast.Config{Logger: quiet, SweepInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Manager: mgr, Anonymous: true, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewUnstartedServer(srv)
	hs.Config = srv.HTTPServer()
	hs.Start()
	c, err := client.New(client.Config{BaseURL: hs.URL})
	if err != nil {
		t.Fatal(err)
	}

	var n counts
	var ws []*worker
	for id := range workers {
		ws = append(ws, newWorker(c, id, &n))
	}
	start := time.Now()
	sampleNow := func(round int) sample {
		s, err := measure(round, start, st, profiles)
		if err != nil {
			t.Fatal(err)
		}
		t.Log(s)
		return s
	}
	samples := []sample{sampleNow(0)}
	for round := 1; d == 0 && round <= ciRounds || d > 0 && time.Since(start) < d; round++ {
		var wg sync.WaitGroup
		for _, w := range ws {
			wg.Go(func() { w.round(t.Context()) })
		}
		wg.Wait()
		// Sampled before the clock moves on: the background sweep has had
		// the round to remove what the round's time made due.
		if d == 0 || time.Since(start)-samples[len(samples)-1].at >= every {
			samples = append(samples, sampleNow(round))
		}
		clk.rounds.Add(1)
		if n.errors.Load() > 0 {
			break
		}
	}
	if last := int(clk.rounds.Load()); samples[len(samples)-1].round != last {
		samples = append(samples, sampleNow(last))
	}
	elapsed := time.Since(start).Round(time.Millisecond)

	hs.Close()
	mgr.Close()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d sessions, %d rounds in %s: %d heartbeats (%d lost locks reported), %d grants, %d refusals (423), %d releases (%d after the lock expired); %d logouts, %d pages abandoned, %d visitors; %d errors",
		sessions, clk.rounds.Load(), elapsed, n.heartbeats.Load(), n.lostReported.Load(), n.grants.Load(), n.refusals.Load(),
		n.releases.Load(), n.expiredBeforeRelease.Load(), n.logouts.Load(), n.abandoned.Load(), n.visitors.Load(), n.errors.Load())

	if n.errors.Load() > 0 {
		t.Fatalf("%d errors other than refusals; the first: %v", n.errors.Load(), n.firstError.Load())
	}
	if n.grants.Load() == 0 || n.refusals.Load() == 0 || n.lostReported.Load() == 0 || n.expiredBeforeRelease.Load() == 0 {
		t.Errorf("the soak did too little to prove anything")
	}
	for _, grew := range notFlat(samples) {
		t.Error(grew)
	}
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > baseline+2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if g := runtime.NumGoroutine(); g > baseline+2 {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines after the soak, %d before:\n%s", g, baseline, buf[:runtime.Stack(buf, true)])
	}
}
