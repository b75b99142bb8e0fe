package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/memstore"
	"github.com/holdfast/holdfast/server"
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
	if err := tg.heartbeat(ctx, "s-1", time.Minute); err != nil {
		t.Fatalf("heartbeat: %v", err)
	}
	if err := tg.heartbeatBatch(ctx, []string{"s-1", "s-2", "s-3"}, time.Minute); err != nil {
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
	// The same port on another machine is not this process's; loopback
	// spelled otherwise is.
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	if p, ok := attach(net.JoinHostPort("192.0.2.1", port)); ok {
		t.Errorf("attach of another machine's address found this machine's process %+v", p)
	}
	for _, addr := range []string{"localhost:" + port, "postgres://u@localhost:" + port + "/db"} {
		if p, ok := attach(addr); !ok || p.pid != os.Getpid() {
			t.Errorf("attach(%q) found %+v (%v), want this process", addr, p, ok)
		}
	}
	busy0, total0, ok := machineTimes()
	if !ok {
		t.Fatal("machineTimes: /proc/stat not read")
	}
	// Burn some CPU so that the clock-tick counter moves.
	deadline := time.Now().Add(50 * time.Millisecond)
	for n := 0; time.Now().Before(deadline); n++ {
		_ = n * n
	}
	if cpu, ok := p.cpu(); !ok || cpu <= 0 {
		t.Errorf("CPU of this process = %v (%v), want > 0", cpu, ok)
	}
	if busy1, total1, ok := machineTimes(); !ok || busy1 <= busy0 || total1-total0 < busy1-busy0 {
		t.Errorf("machine busy %d → %d of %d → %d ticks (%v), want busy to grow, by no more than all", busy0, busy1, total0, total1, ok)
	}
	if rss, ok := rssBytes(p.pid); !ok || rss <= 0 {
		t.Errorf("RSS of this process = %d (%v), want > 0", rss, ok)
	}

	// A process's CPU includes that of the one it works through (for a
	// holdfast server over PostgreSQL, the database's): here, this
	// process a second time.
	twice := &process{pid: p.pid, also: p}
	before, _ := p.cpu()
	both, ok := twice.cpu()
	after, _ := p.cpu()
	if !ok || both < 2*before || both > 2*after {
		t.Errorf("CPU with the process it works through = %v (%v), want twice its own, between %v and %v", both, ok, 2*before, 2*after)
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

// keyRecorder grants everything and remembers the keys it was asked for.
type keyRecorder struct {
	mu   sync.Mutex
	keys []string
}

func (k *keyRecorder) acquire(_ context.Context, _ string, keys []string) (bool, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.keys = append(k.keys, keys...)
	return true, nil
}

func (k *keyRecorder) release(context.Context, string, []string) error { return nil }
func (k *keyRecorder) close() error                                    { return nil }

// A system's prefix reaches every key each workload locks on it, so
// that runs sharing a Redis never meet each other's keys; and no round
// locks a key of another, which a row cut off may have left held.
func TestWorkloadKeysCarryTheSystemPrefix(t *testing.T) {
	t.Parallel()
	r := &runner{cfg: Config{Clients: 2, Duration: time.Millisecond, Warmup: time.Millisecond}}
	for name, workload := range map[string]func(context.Context, *system) (row, error){
		"cycle": r.cycle, "hot": r.hot, "aggregate": r.aggregate,
	} {
		roundOf := make(map[string]int)
		for round := range 2 {
			r.round = round
			rec := &keyRecorder{}
			s := &system{name: "recorder", t: rec, prefix: keyPrefix, trivial: true}
			if _, err := workload(context.Background(), s); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if len(rec.keys) == 0 {
				t.Fatalf("%s locked no keys", name)
			}
			for _, k := range rec.keys {
				if !strings.HasPrefix(k, keyPrefix) {
					t.Fatalf("%s locked %q, want the prefix %q", name, k, keyPrefix)
				}
				if first, ok := roundOf[k]; ok && first != round {
					t.Fatalf("%s locked %q in rounds %d and %d", name, k, first+1, round+1)
				}
				roundOf[k] = round
			}
		}
	}
	if !strings.Contains(keyPrefix, fmt.Sprint(os.Getpid())+"_") {
		t.Errorf("keyPrefix %q does not name the pid and the start time", keyPrefix)
	}
}

// The disk probe times real synced writes and leaves nothing behind.
func TestProbeDisk(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	got, err := probeDisk(dir, 20)
	if err != nil {
		t.Fatal(err)
	}
	if got.ops != 20 || got.elapsed <= 0 || got.p50 <= 0 || got.p99 < got.p50 || got.elapsed < got.p99 {
		t.Errorf("probe = %d writes in %v, p50 %v, p99 %v; want 20 in more than p99 ≥ p50 > 0", got.ops, got.elapsed, got.p50, got.p99)
	}
	if got.unit != "syncs/s" || !strings.Contains(got.note, dir) {
		t.Errorf("probe unit %q, note %q; want syncs/s and the directory", got.unit, got.note)
	}
	if left, _ := os.ReadDir(dir); len(left) > 0 {
		t.Errorf("the probe left %d files in %s", len(left), dir)
	}
}

// The heartbeat workload's sessions have the idle timeout it was given,
// as editors' sessions do, and its rows say so.
func TestHeartbeatsAskForTheIdleTimeout(t *testing.T) {
	t.Parallel()
	mgr, err := holdfast.New(memstore.New(memstore.Config{}), holdfast.Config{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer mgr.Close()
	srv, err := server.New(server.Config{Manager: mgr, Anonymous: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	c, err := newHTTPClient(hs.URL, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	const idle = 90 * time.Second
	r := &runner{cfg: Config{Clients: 2, Duration: 20 * time.Millisecond, Sessions: 3, IdleTimeout: idle, Log: io.Discard}}
	r.holdfast = &system{name: "holdfast", t: &httpTarget{c}, holdfast: true}
	ctx := context.Background()
	rows, err := r.heartbeats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range rows {
		if row.note != "sessions with an idle timeout of 1m30s" {
			t.Errorf("%s row's note is %q, want the idle timeout", row.mode, row.note)
		}
	}
	page, err := c.Sessions(ctx, holdfast.SessionQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Sessions) != 3 {
		t.Fatalf("%d sessions, want the workload's 3: %+v", len(page.Sessions), page.Sessions)
	}
	for _, s := range page.Sessions {
		if time.Duration(s.IdleTimeout) != idle {
			t.Errorf("session %s has idle timeout %v, want %v", s.ID, time.Duration(s.IdleTimeout), idle)
		}
	}
}

// A single client's acquire is set beside the disk's sync plus the
// ceiling's round trip; the disk is no system to divide holdfast by.
func TestLatencyAtOneClient(t *testing.T) {
	t.Parallel()
	holdfast := &system{name: "holdfast", holdfast: true}
	batched := &system{name: "holdfast, coalesced into /v1/batch", holdfast: true}
	ceiling := &system{name: "trivial HTTP handler (ceiling)", ceiling: true, trivial: true}
	disk := &system{name: "disk: write + fdatasync", probe: true}
	rows := []row{
		{workload: "cycle", system: holdfast, ops: 10, elapsed: time.Second, p50: 900 * time.Microsecond},
		{workload: "cycle", system: batched, ops: 10, elapsed: time.Second, p50: 1200 * time.Microsecond},
		{workload: "cycle", system: ceiling, ops: 40, elapsed: time.Second, p50: 200 * time.Microsecond},
		{workload: "cycle", system: disk, ops: 20, elapsed: time.Second, p50: 400 * time.Microsecond, unit: "syncs/s"},
	}
	var b strings.Builder
	printTable(&b, rows)
	printLatency(&b, rows)
	out := b.String()
	if !regexp.MustCompile(`(?m)^cycle +disk: write \+ fdatasync +20 +syncs/s +400\.0µs`).MatchString(out) {
		t.Errorf("no disk row of 20 syncs/s, p50 400µs:\n%s", out)
	}
	for _, want := range []string{
		"holdfast ÷ trivial HTTP handler (ceiling) = 0.25×",
		"the disk's sync p50 400.0µs + the ceiling's acquire p50 200.0µs",
		"  cycle     holdfast = 1.50×\n",
		"  cycle     holdfast, coalesced into /v1/batch = 2.00×\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "÷ disk") {
		t.Errorf("holdfast is divided by the disk probe:\n%s", out)
	}
}

// Over rounds, the table shows each system's round of median throughput,
// and each ratio is the median of the rounds' own: a system is divided by
// its peer of the same round, never of another.
func TestRoundsPairRowsOfTheSameRound(t *testing.T) {
	t.Parallel()
	holdfast := &system{name: "holdfast", holdfast: true}
	ceiling := &system{name: "trivial HTTP handler (ceiling)", ceiling: true, trivial: true}
	disk := &system{name: "disk: write + fdatasync", probe: true}
	var rows []row
	// The machine slows down over the rounds: paired by round, holdfast
	// is 0.5× the ceiling each time; divided across rounds, up to 2.5×.
	// Each round's latency floor is its own disk's p50 plus its own
	// ceiling's: 200, 400 and 200 µs.
	for i, c := range []struct{ rate, disk, ceiling int64 }{{1000, 100, 100}, {400, 200, 200}, {200, 50, 150}} {
		rows = append(rows,
			row{workload: "cycle", system: holdfast, round: i, ops: c.rate / 2, elapsed: time.Second, p50: time.Duration(c.rate) * time.Microsecond},
			row{workload: "cycle", system: ceiling, round: i, ops: c.rate, elapsed: time.Second, p50: time.Duration(c.ceiling) * time.Microsecond},
			row{workload: "cycle", system: disk, round: i, ops: 10, elapsed: time.Second, p50: time.Duration(c.disk) * time.Microsecond, unit: "syncs/s"},
		)
	}
	etcd := &system{name: "etcd"}
	for i, why := range []string{"timeout", "refused", "down"} {
		rows = append(rows, row{workload: "cycle", system: etcd, round: i, note: "failed: " + why})
	}
	redis := &system{name: "redis"}
	rows = append(rows,
		row{workload: "cycle", system: redis, round: 0, ops: 700, elapsed: time.Second},
		row{workload: "cycle", system: redis, round: 1, note: "failed: refused"},
		row{workload: "cycle", system: redis, round: 2, ops: 100, elapsed: time.Second})
	var b strings.Builder
	printTable(&b, rows)
	printLatency(&b, rows)
	out := b.String()
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^cycle +holdfast +200 +cycles/s +400\.0µs .* median of 3 rounds, 100–500 +$`),
		regexp.MustCompile(`(?m)^cycle +trivial HTTP handler \(ceiling\) +400 +cycles/s .* median of 3 rounds, 200–1000 +$`),
		regexp.MustCompile(`(?m)^cycle +etcd +round 1 failed: timeout; round 2 failed: refused; round 3 failed: down +$`),
		// Of an even count, the lower of the middle two, in the table as
		// in the ratio; the round that failed keeps its place.
		regexp.MustCompile(`(?m)^cycle +redis +100 +cycles/s .* median of 2 of 3 rounds, 100–700; round 2 failed: refused +$`),
		regexp.MustCompile(`(?m)^  cycle +holdfast ÷ redis = 0\.71× \(rounds: 0\.71×, –, 1\.00×\)$`),
		regexp.MustCompile(`(?m)^  cycle +holdfast ÷ trivial HTTP handler \(ceiling\) = 0\.50× \(rounds: 0\.50×, 0\.50×, 0\.50×\)$`),
		// Each round's p50 over that round's floor: 1000/200, 400/400, 200/200.
		regexp.MustCompile(`(?m)^  cycle +holdfast = 1\.00× \(rounds: 5\.00×, 1\.00×, 1\.00×\)$`),
	} {
		if !want.MatchString(out) {
			t.Errorf("output lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "÷ etcd") {
		t.Errorf("a system that failed in every round has a ratio:\n%s", out)
	}
}

// Every other round measures the systems in reverse, so that none always
// follows the same one.
func TestRoundsAlternateTheOrder(t *testing.T) {
	t.Parallel()
	systems := []*system{{name: "a"}, {name: "b"}, {name: "c"}}
	r := &runner{cfg: Config{Log: io.Discard}}
	var order []string
	for round := range 3 {
		r.round = round
		_, err := r.each(context.Background(), "cycle", systems, func(_ context.Context, s *system) (row, error) {
			order = append(order, s.name)
			return row{ops: 1, elapsed: time.Second}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := strings.Join(order, ""); got != "abccbaabc" {
		t.Errorf("systems measured in the order %s, want abccbaabc", got)
	}
}

// Zero fields of Config take their defaults, negative ones are refused
// rather than quietly replaced, and NoWarmup measures from the start.
func TestConfigDefaults(t *testing.T) {
	t.Parallel()
	c := Config{Executable: "holdfast"}
	if err := c.defaults(); err != nil {
		t.Fatal(err)
	}
	if c.Clients != 64 || c.Duration != 10*time.Second || c.Warmup != time.Second || c.Sessions != 10_000 || c.ScaleLocks != 1_000_000 {
		t.Errorf("defaults = %d clients, %v, warm-up %v, %d sessions, %d locks", c.Clients, c.Duration, c.Warmup, c.Sessions, c.ScaleLocks)
	}
	c = Config{Executable: "holdfast", Warmup: NoWarmup}
	if err := c.defaults(); err != nil || c.Warmup != 0 {
		t.Errorf("NoWarmup: error %v, warm-up %v; want none and 0", err, c.Warmup)
	}
	for _, bad := range []Config{{Clients: -1}, {Duration: -time.Second}, {Warmup: -time.Second}, {Coalesce: -1}, {Sessions: -1}, {IdleTimeout: -1}, {ScaleLocks: -1}, {PostgresConns: -1}, {Rounds: -1}} {
		bad.Executable = "holdfast"
		if err := bad.defaults(); err == nil || !strings.Contains(err.Error(), "is negative") {
			t.Errorf("%+v: error %v, want one naming the negative field", bad, err)
		}
	}
	c = Config{Executable: "holdfast", Rounds: 2}
	if err := c.defaults(); err == nil || !strings.Contains(err.Error(), "Rounds is 2") {
		t.Errorf("Rounds 2: error %v, want one naming the even count", err)
	}
}

// A process's CPU keeps that of its children once they have ended, as a
// PostgreSQL server's keeps its backends': their time moves to the
// parent's count when it waits for them.
func TestCPUKeepsEndedChildren(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("server CPU is read from Linux's /proc")
	}
	before, ok := cpuOf(os.Getpid())
	if !ok {
		t.Fatal("cpuOf: /proc not read")
	}
	child := exec.Command("sh", "-c", "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done")
	if err := child.Run(); err != nil {
		t.Fatal(err)
	}
	used := child.ProcessState.UserTime() + child.ProcessState.SystemTime()
	after, _ := cpuOf(os.Getpid())
	// Clock ticks are 10 ms; allow two of rounding.
	if used < 50*time.Millisecond || after-before < used-20*time.Millisecond {
		t.Errorf("a child used %v and ended; this process's CPU grew by %v, want at least that", used, after-before)
	}
}

// etcdAddr is the etcd member of HOLDFAST_TEST_ETCD, as host:port: unset,
// the test is skipped, unless CI must run it.
func etcdAddr(t *testing.T) string {
	t.Helper()
	addr := strings.TrimPrefix(os.Getenv("HOLDFAST_TEST_ETCD"), "http://")
	if addr == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("HOLDFAST_TEST_ETCD is not set, and CI must run this test (.ci/run starts etcd)")
		}
		t.Skip("HOLDFAST_TEST_ETCD is not set: no etcd to test against")
	}
	return addr
}

// A row's end revokes its etcd leases: a key a request cut off at the end
// left held is free for the next row, whose owners lock with new leases
// that cannot expire while it is measured.
func TestEtcdLeasesLastOneRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tg, err := newEtcdTarget(ctx, etcdAddr(t), 1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer tg.close()
	key := keyPrefix + "lease-test"
	if ok, err := tg.acquire(ctx, "bench-1", []string{key}); !ok || err != nil {
		t.Fatalf("acquire = %v, %v; want granted", ok, err)
	}
	first, err := tg.lease(ctx, "bench-1")
	if err != nil {
		t.Fatal(err)
	}
	tg.endRow()
	if ok, err := tg.acquire(ctx, "bench-2", []string{key}); !ok || err != nil {
		t.Fatalf("after the row ended, another owner's acquire of the key left held = %v, %v; want granted", ok, err)
	}
	if err := tg.release(ctx, "bench-2", []string{key}); err != nil {
		t.Fatal(err)
	}
	if ok, err := tg.acquire(ctx, "bench-1", []string{key}); !ok || err != nil {
		t.Fatalf("the first owner's acquire in the next row = %v, %v; want granted", ok, err)
	}
	if next, _ := tg.lease(ctx, "bench-1"); next == first {
		t.Errorf("the next row kept the revoked lease %s", first)
	}
	if err := tg.release(ctx, "bench-1", []string{key}); err != nil {
		t.Fatal(err)
	}
}
