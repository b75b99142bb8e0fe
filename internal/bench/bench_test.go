package bench

import (
	"context"
	"net"
	"net/http/httptest"
	"os"
	"runtime"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	t.Parallel()
	var l latencies
	if got := l.percentile(99); got != 0 {
		t.Errorf("p99 of nothing = %v, want 0", got)
	}
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	l.add(ds)
	for p, want := range map[float64]time.Duration{50: 50 * time.Millisecond, 99: 99 * time.Millisecond, 100: 100 * time.Millisecond} {
		if got := l.percentile(p); got != want {
			t.Errorf("p%v = %v, want %v", p, got, want)
		}
	}
}

// The ceiling answers what holdfast answers, so the same client code
// drives both.
func TestTrivialHandlerSpeaksTheAPI(t *testing.T) {
	t.Parallel()
	hs := httptest.NewServer(TrivialHandler())
	defer hs.Close()
	c, err := newHTTPClient(hs.URL, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	tg := &httpTarget{c}
	ctx := context.Background()
	if ok, err := tg.acquire(ctx, "bench-1", []string{"cycle/1"}); !ok || err != nil {
		t.Fatalf("acquire = %v, %v; want granted", ok, err)
	}
	if err := tg.release(ctx, "bench-1", []string{"cycle/1"}); err != nil {
		t.Fatalf("release: %v", err)
	}
	if err := tg.heartbeat(ctx, "s-1"); err != nil {
		t.Fatalf("heartbeat: %v", err)
	}
	if err := tg.heartbeatBatch(ctx, []string{"s-1", "s-2", "s-3"}); err != nil {
		t.Fatalf("batched heartbeat: %v", err)
	}
}

func TestServerCostIsReadFromProc(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("server CPU and memory are read from Linux's /proc")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	p, ok := attach("http://" + ln.Addr().String())
	if !ok || p.pid != os.Getpid() {
		t.Fatalf("attach found %+v (%v), want this process %d", p, ok, os.Getpid())
	}
	// Burn some CPU so that the clock-tick counter moves.
	deadline := time.Now().Add(50 * time.Millisecond)
	for n := 0; time.Now().Before(deadline); n++ {
		_ = n * n
	}
	if cpu, ok := p.cpu(); !ok || cpu <= 0 {
		t.Errorf("CPU of this process = %v (%v), want > 0", cpu, ok)
	}
	if rss, ok := rssBytes(p.pid); !ok || rss <= 0 {
		t.Errorf("RSS of this process = %d (%v), want > 0", rss, ok)
	}
}

// The holdfast server over PostgreSQL gets as many connections as the
// lock table, in either form of DSN, unless the DSN sizes its pool.
func TestWithPoolSize(t *testing.T) {
	t.Parallel()
	for dsn, want := range map[string]string{
		"postgres://u@db:5432/app?sslmode=disable": "postgres://u@db:5432/app?pool_max_conns=64&sslmode=disable",
		"postgresql://u@db/app":                    "postgresql://u@db/app?pool_max_conns=64",
		"postgres://u@db/app?pool_max_conns=8":     "postgres://u@db/app?pool_max_conns=8",
		"host=db dbname=app":                       "host=db dbname=app pool_max_conns=64",
		"host=db dbname=app pool_max_conns=8":      "host=db dbname=app pool_max_conns=8",
	} {
		if got := withPoolSize(dsn, 64); got != want {
			t.Errorf("withPoolSize(%q, 64) = %q, want %q", dsn, got, want)
		}
	}
}
