//go:build unix

package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/memstore"
	"github.com/holdfast/holdfast/server"
)

// The benchmarks measure the server's CPU per request over the in-memory
// store, without sockets: what holdfast bench's server CPU/op column pays
// on top of the Manager and the store. They log at warn, as holdfast bench
// runs the server.

func benchServer(b *testing.B) http.Handler {
	b.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelWarn}))
	metrics := server.NewMetrics()
	mgr, err := holdfast.New(memstore.New(memstore.Config{}), holdfast.Config{SweepInterval: -1, Observer: metrics, Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { mgr.Close() })
	srv, err := server.New(server.Config{Manager: mgr, Anonymous: true, Metrics: metrics, Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	return srv
}

// post sends body to path and fails unless the answer is 200. The request
// is made by hand: httptest.NewRequest parses one, which costs as much as
// some of what is measured.
func post(b *testing.B, h http.Handler, path string, body []byte) {
	postWant(b, h, path, body, http.StatusOK)
}

func postWant(b *testing.B, h http.Handler, path string, body []byte, status int) {
	req := &http.Request{Method: "POST", URL: &url.URL{Path: path}, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)), Host: "127.0.0.1:7070"} // anonymous access is for loopback only
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != status {
		b.Fatalf("%s: %d %s", path, rec.Code, rec.Body)
	}
}

// reportCPU reports the process's CPU time per op (and per unit, when one
// op is several) from now until the benchmark ends: the server's cost,
// which the wall time per op, bound by the Manager's commits, hides.
func reportCPU(b *testing.B, perOp int, unit string) {
	start := cpuTime(b)
	b.Cleanup(func() {
		cpu := float64(cpuTime(b) - start)
		b.ReportMetric(cpu/float64(b.N), "cpu-ns/op")
		if perOp > 1 {
			b.ReportMetric(cpu/float64(b.N*perOp), "cpu-ns/"+unit)
		}
	})
}

func cpuTime(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func mustJSON(b *testing.B, v any) []byte {
	j, err := json.Marshal(v)
	if err != nil {
		b.Fatal(err)
	}
	return j
}

// BenchmarkCycle is holdfast bench's cycle: acquire and release a key of
// one's own, one request each.
func BenchmarkCycle(b *testing.B) {
	h := benchServer(b)
	var clients atomic.Int64
	b.ReportAllocs()
	reportCPU(b, 1, "")
	b.SetParallelism(32) // 64 clients on 2 CPUs, as holdfast bench runs
	b.RunParallel(func(pb *testing.PB) {
		owner := fmt.Sprintf("client-%d", clients.Add(1))
		acquire := mustJSON(b, holdfast.AcquireRequest{Keys: []string{"cycle/" + owner},
			Owner: holdfast.Owner{Session: owner, User: owner}, TTL: holdfast.Duration(60e9)})
		release := mustJSON(b, holdfast.ReleaseRequest{Session: owner, Keys: []string{"cycle/" + owner}})
		for pb.Next() {
			post(b, h, "/v1/locks/acquire", acquire)
			post(b, h, "/v1/locks/release", release)
		}
	})
}

// BenchmarkLocked is holdfast bench's hot workload at its worst: every
// acquire is refused with 423 and the holder.
func BenchmarkLocked(b *testing.B) {
	h := benchServer(b)
	post(b, h, "/v1/locks/acquire", mustJSON(b, holdfast.AcquireRequest{Keys: []string{"hot/1"}, Owner: holdfast.Owner{Session: "holder", Name: "Bob"}}))
	var clients atomic.Int64
	b.ReportAllocs()
	reportCPU(b, 1, "")
	b.SetParallelism(32)
	b.RunParallel(func(pb *testing.PB) {
		owner := fmt.Sprintf("client-%d", clients.Add(1))
		acquire := mustJSON(b, holdfast.AcquireRequest{Keys: []string{"hot/1"}, Owner: holdfast.Owner{Session: owner}})
		for pb.Next() {
			postWant(b, h, "/v1/locks/acquire", acquire, http.StatusLocked)
		}
	})
}

// BenchmarkListLocks lists a page of 1000 locks by prefix, as holdfast
// bench's scale workload does.
func BenchmarkListLocks(b *testing.B) {
	h := benchServer(b)
	for i := range 1000 {
		post(b, h, "/v1/locks/acquire", mustJSON(b, holdfast.AcquireRequest{Keys: []string{fmt.Sprintf("list/%d", i)},
			Owner: holdfast.Owner{Session: fmt.Sprintf("s-%d", i), User: "u", Name: "Bob Smith"}}))
	}
	b.ReportAllocs()
	reportCPU(b, 1, "")
	for b.Loop() {
		req := &http.Request{Method: "GET", URL: &url.URL{Path: "/v1/locks", RawQuery: "prefix=list/&limit=1000"},
			Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: http.Header{}, Host: "127.0.0.1:7070"}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("%d %s", rec.Code, rec.Body)
		}
	}
}

// BenchmarkHeartbeat is one heartbeat per request.
func BenchmarkHeartbeat(b *testing.B) {
	h := benchServer(b)
	var clients atomic.Int64
	b.ReportAllocs()
	reportCPU(b, 1, "")
	b.SetParallelism(32) // 64 clients on 2 CPUs, as holdfast bench runs
	b.RunParallel(func(pb *testing.PB) {
		body := mustJSON(b, holdfast.HeartbeatRequest{Session: fmt.Sprintf("session-%d", clients.Add(1))})
		for pb.Next() {
			post(b, h, "/v1/sessions/heartbeat", body)
		}
	})
}

// BenchmarkBatchHeartbeat is 1000 heartbeats per /v1/batch, of sessions
// without an idle timeout and of sessions with one, as editors' are.
func BenchmarkBatchHeartbeat(b *testing.B) {
	for _, idle := range []time.Duration{0, 5 * time.Minute} {
		b.Run("idle="+idle.String(), func(b *testing.B) {
			h := benchServer(b)
			ops := make([]map[string]any, 1000)
			for i := range ops {
				ops[i] = map[string]any{"op": "heartbeat", "body": holdfast.HeartbeatRequest{
					Session: fmt.Sprintf("session-%d", i), IdleTimeout: holdfast.Duration(idle)}}
			}
			body := mustJSON(b, map[string]any{"ops": ops})
			b.ReportAllocs()
			reportCPU(b, len(ops), "session")
			for b.Loop() {
				post(b, h, "/v1/batch", body)
			}
		})
	}
}
