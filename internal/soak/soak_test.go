package soak_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/client"
	"github.com/holdfast/holdfast/pebblestore"
	"github.com/holdfast/holdfast/server"
)

const (
	sessions = 10_000
	workers  = 8
	keys     = 500
	// editors is how many sessions of each worker acquire and release;
	// the others only heartbeat, like open but idle pages.
	editors = 100
)

// soakLength is HOLDFAST_SOAK, a duration; without it the soak is three
// rounds of every worker (a few seconds), as in CI, so that a slow machine
// does the same work, only slower.
func soakLength(t *testing.T) (d time.Duration, rounds int, sample time.Duration) {
	v := os.Getenv("HOLDFAST_SOAK")
	if v == "" {
		return 0, 3, time.Second
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("HOLDFAST_SOAK=%q: want a duration such as 10m", v)
	}
	return d, 0, max(time.Second, d/20)
}

// sample is the process's state at one moment, after a collection.
type sample struct {
	at         time.Duration
	heap       uint64
	goroutines int
}

func measure(start time.Time) sample {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return sample{at: time.Since(start).Round(time.Millisecond), heap: ms.HeapAlloc, goroutines: runtime.NumGoroutine()}
}

// counts are the outcomes of the soak's operations.
type counts struct {
	heartbeats, grants, refusals, releases, errors atomic.Int64
	firstError                                     atomic.Value
}

func (c *counts) fail(err error) {
	c.errors.Add(1)
	c.firstError.CompareAndSwap(nil, err.Error())
}

// TestSoak keeps 10,000 sessions alive with batched heartbeats while they
// acquire and release keys that collide often, against a real server on
// the embedded store. The only errors allowed are refusals (423); memory
// and goroutines are sampled. Goroutines must end where they started; the
// heap may grow only by what the store keeps by retention (the embedded
// store holds its audit log and lost-lock records in memory, see
// docs/GUARANTEES.md), bounded here loosely so that a leak still fails.
func TestSoak(t *testing.T) {
	d, rounds, every := soakLength(t)
	baseline := runtime.NumGoroutine()

	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := pebblestore.Open(filepath.Join(t.TempDir(), "data"), pebblestore.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := holdfast.New(st, holdfast.Config{Logger: quiet})
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

	start := time.Now()
	ctx, stop := context.Background(), func() {}
	if d > 0 {
		ctx, stop = context.WithTimeout(ctx, d)
	}
	defer stop()
	var n counts
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() { work(ctx, c, w, rounds, &n) })
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	samples := []sample{measure(start)}
	tick := time.NewTicker(every)
	for finished := false; !finished; {
		select {
		case <-done:
			finished = true
		case <-tick.C:
			samples = append(samples, measure(start))
		}
	}
	tick.Stop()
	samples = append(samples, measure(start))
	elapsed := time.Since(start).Round(time.Millisecond)

	hs.Close()
	mgr.Close()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	for _, s := range samples {
		t.Logf("%8s  heap %6.1f MiB  goroutines %d", s.at, float64(s.heap)/(1<<20), s.goroutines)
	}
	t.Logf("%d sessions for %s: %d heartbeats, %d grants, %d refusals (423), %d releases, %d errors",
		sessions, elapsed, n.heartbeats.Load(), n.grants.Load(), n.refusals.Load(), n.releases.Load(), n.errors.Load())

	if n.errors.Load() > 0 {
		t.Errorf("%d errors other than refusals; the first: %v", n.errors.Load(), n.firstError.Load())
	}
	if n.heartbeats.Load() < sessions || n.grants.Load() == 0 || n.refusals.Load() == 0 {
		t.Errorf("the soak did too little to prove anything")
	}
	// Flat: the last sample holds no more than twice the first's heap
	// (plus room for the store's caches to warm), and every goroutine the
	// run started has ended once the server is closed.
	first, last := samples[1%len(samples)], samples[len(samples)-1]
	if last.heap > 2*first.heap+64<<20 {
		t.Errorf("heap grew from %d to %d bytes", first.heap, last.heap)
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

// work drives the sessions numbered w, w+workers, …: each round heartbeats
// all of them in batches, then lets a random few of its editors acquire a
// key (often taken) or release the one they hold. It stops after rounds
// rounds (0: when ctx ends).
func work(ctx context.Context, c *client.Client, w, rounds int, n *counts) {
	rng := rand.New(rand.NewPCG(uint64(w), 42))
	var mine []string
	for i := w; i < sessions; i += workers {
		mine = append(mine, fmt.Sprintf("soak-%d", i))
	}
	held := map[string]string{} // session → key
	for round := 0; ctx.Err() == nil && (rounds == 0 || round < rounds); round++ {
		for i := 0; i < len(mine); i += server.MaxBatchOps {
			var ops []client.Op
			for _, s := range mine[i:min(i+server.MaxBatchOps, len(mine))] {
				ops = append(ops, client.HeartbeatOp(holdfast.HeartbeatRequest{Session: s, IdleTimeout: holdfast.Duration(10 * time.Minute)}))
			}
			results, err := c.Batch(ctx, ops)
			if err != nil {
				if ctx.Err() == nil {
					n.fail(err)
				}
				return
			}
			for _, r := range results {
				if r.Err != nil {
					n.fail(r.Err)
				} else {
					n.heartbeats.Add(1)
				}
			}
		}
		for range 50 {
			s := mine[rng.IntN(editors)]
			if key, ok := held[s]; ok {
				_, err := c.Release(ctx, holdfast.ReleaseRequest{Session: s, Keys: []string{key}})
				if err != nil {
					if ctx.Err() == nil {
						n.fail(err)
					}
					return
				}
				delete(held, s)
				n.releases.Add(1)
				continue
			}
			key := fmt.Sprintf("soak/%d", rng.IntN(keys))
			_, err := c.Acquire(ctx, holdfast.AcquireRequest{
				Keys: []string{key}, Owner: holdfast.Owner{Session: s, Name: s}, TTL: holdfast.Duration(time.Hour),
			})
			switch {
			case err == nil:
				held[s] = key
				n.grants.Add(1)
			case errors.Is(err, holdfast.ErrLocked):
				n.refusals.Add(1)
			case ctx.Err() != nil:
				return
			default:
				n.fail(err)
			}
		}
	}
}
