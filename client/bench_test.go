package client_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/client"
	"github.com/holdfast/holdfast/memstore"
	"github.com/holdfast/holdfast/server"
)

// benchServer returns the URL of a holdfast server: the one named by
// HOLDFAST_BENCH_SERVER (e.g. a "holdfast serve" on the embedded store),
// whose CPU is then not the benchmark's, or else the real handler over a
// Manager on memstore, served in process.
func benchServer(b *testing.B) string {
	b.Helper()
	if url := os.Getenv("HOLDFAST_BENCH_SERVER"); url != "" {
		return url
	}
	st := memstore.New(memstore.Config{})
	discard := slog.New(slog.NewTextHandler(io.Discard, nil))
	mgr, err := holdfast.New(st, holdfast.Config{SweepInterval: -1, Logger: discard})
	if err != nil {
		b.Fatal(err)
	}
	srv, err := server.New(server.Config{Manager: mgr, Logger: discard, Anonymous: true})
	if err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	b.Cleanup(func() {
		hs.Close()
		mgr.Close()
		st.Close()
	})
	return hs.URL
}

// BenchmarkCycle is the cycle workload of holdfast bench: 64 callers each
// acquire and release a key of their own, one request per call or
// coalesced into batches. One op is one acquire+release cycle; cpu-µs/op
// is the CPU time the process spent per cycle, the client's own when the
// server runs apart (HOLDFAST_BENCH_SERVER).
func BenchmarkCycle(b *testing.B) {
	for _, linger := range []time.Duration{0, 200 * time.Microsecond} {
		name := "single"
		if linger > 0 {
			name = "coalesced"
		}
		b.Run(name, func(b *testing.B) {
			url := benchServer(b)
			// One idle connection per caller, as holdfast bench keeps.
			tr := http.DefaultTransport.(*http.Transport).Clone()
			tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 80, 80
			c, err := client.New(client.Config{BaseURL: url, Coalesce: linger, HTTPClient: &http.Client{Transport: tr}})
			if err != nil {
				b.Fatal(err)
			}
			var caller atomic.Int64
			ctx := context.Background()
			b.ReportAllocs()
			b.SetParallelism(64 / max(1, runtime.GOMAXPROCS(0)))
			b.ResetTimer()
			cpu := processCPU()
			b.RunParallel(func(pb *testing.PB) {
				owner := fmt.Sprintf("bench-%d", caller.Add(1))
				keys := []string{"order/" + owner}
				o := holdfast.Owner{Session: owner, User: owner}
				for pb.Next() {
					if _, err := c.Acquire(ctx, holdfast.AcquireRequest{Keys: keys, Owner: o, TTL: holdfast.Duration(time.Minute)}); err != nil {
						b.Error(err)
						return
					}
					if _, err := c.Release(ctx, holdfast.ReleaseRequest{Session: owner, Keys: keys}); err != nil {
						b.Error(err)
						return
					}
				}
			})
			if cpu > 0 {
				b.ReportMetric(float64(processCPU()-cpu)/float64(time.Microsecond)/float64(b.N), "cpu-µs/op")
			}
		})
	}
}

// BenchmarkHeartbeatBatch is the batched heartbeat workload of holdfast
// bench: one op is one /v1/batch keeping 1000 sessions alive.
func BenchmarkHeartbeatBatch(b *testing.B) {
	c, err := client.New(client.Config{BaseURL: benchServer(b)})
	if err != nil {
		b.Fatal(err)
	}
	ops := make([]client.Op, 1000)
	for i := range ops {
		ops[i] = client.HeartbeatOp(holdfast.HeartbeatRequest{Session: fmt.Sprintf("bench-heartbeat-%d", i)})
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	cpu := processCPU()
	for b.Loop() {
		results, err := c.Batch(ctx, ops)
		if err != nil {
			b.Fatal(err)
		}
		if results[0].Err != nil {
			b.Fatal(results[0].Err)
		}
	}
	if cpu > 0 {
		b.ReportMetric(float64(processCPU()-cpu)/float64(time.Microsecond)/float64(b.N), "cpu-µs/op")
	}
}
