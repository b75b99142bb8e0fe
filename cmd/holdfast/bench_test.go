package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/internal/bench"
)

// A short run of every workload through the real binary keeps holdfast
// bench working. It asserts what the table says, never how fast: the
// machine is shared. Peers join when their test addresses are set.
func TestBenchSmoke(t *testing.T) {
	t.Parallel()
	args := []string{"bench", "--duration", "300ms", "--warmup", "100ms", "--clients", "4",
		"--sessions", "50", "--scale-locks", "3000"}
	peers := map[string]string{"--postgres": "HOLDFAST_TEST_POSTGRES", "--redis": "HOLDFAST_TEST_REDIS", "--etcd": "HOLDFAST_TEST_ETCD"}
	var joined []string
	for flag, env := range peers {
		if v := os.Getenv(env); v != "" {
			args = append(args, flag, strings.TrimPrefix(strings.TrimPrefix(v, "redis://"), "http://"))
			joined = append(joined, flag)
		} else if os.Getenv("CI") == "true" {
			t.Errorf("%s is not set, and CI must run the bench against every peer (.ci/run starts them)", env)
		}
	}
	// holdfast's own server over PostgreSQL joins with the lock table.
	pg := os.Getenv("HOLDFAST_TEST_POSTGRES")
	if pg != "" {
		args = append(args, "--holdfast-postgres", pg)
	}
	out, stderr := runBench(t, args...)
	wantLines(t, out,
		regexp.MustCompile(`(?m)^cycle +holdfast +\d+ +cycles/s`),
		regexp.MustCompile(`(?m)^cycle +holdfast, coalesced into /v1/batch +\d+ +cycles/s`),
		regexp.MustCompile(`(?m)^cycle +trivial HTTP handler \(ceiling\) +\d+ +cycles/s`),
		regexp.MustCompile(`(?m)^cycle +trivial HTTP handler \+ group commit +\d+ +cycles/s`),
		regexp.MustCompile(`(?m)^cycle +disk: write \+ fdatasync +\d+ +syncs/s`),
		regexp.MustCompile(`(?m)^hot +holdfast +\d+ +attempts/s .* \d+ granted, \d+ refused, 0 overlaps`),
		regexp.MustCompile(`(?m)^heartbeat +holdfast, one request each +\d+ +sessions/s`),
		regexp.MustCompile(`(?m)^heartbeat +holdfast, 1000 per /v1/batch +\d+ +sessions/s`),
		regexp.MustCompile(`(?m)^aggregate +holdfast +\d+ +cycles/s`),
		regexp.MustCompile(`(?m)^scale +holdfast, fill +3000 locks held`),
		regexp.MustCompile(`(?m)^scale +holdfast, restart +ready .* with 3000 locks`),
		regexp.MustCompile(`(?m)^scale +holdfast, sweep +all 3000 expired locks swept`),
		regexp.MustCompile(`(?m)^scale +holdfast, GET /v1/locks\?prefix= \(100 a page, 4 clients\) +\d+ +pages/s`),
		regexp.MustCompile(`(?m)^scale +holdfast, acquire\+release during mass expiry +\d+ +cycles/s`),
		regexp.MustCompile(`(?m)^  cycle +holdfast ÷ trivial HTTP handler \(ceiling\) = \d+\.\d\d×`),
		regexp.MustCompile(`(?m)^  cycle +holdfast ÷ trivial HTTP handler \+ group commit = \d+\.\d\d×`),
	)
	// The durable trivial handler is the cycle's only: holdfast syncs no
	// heartbeat, and the other workloads compare with the ceiling alone.
	if regexp.MustCompile(`(?m)^(hot|heartbeat|aggregate) +trivial HTTP handler \+ group commit`).MatchString(out) {
		t.Errorf("the durable trivial handler has a row outside the cycle:\n%s", out)
	}
	rows := map[string]string{"--postgres": "PostgreSQL lock table", "--redis": "Redis SET NX, AOF always", "--etcd": "etcd txn + lease"}
	for _, flag := range joined {
		if !regexp.MustCompile(`(?m)^cycle +` + regexp.QuoteMeta(rows[flag]) + ` +\d+ +cycles/s`).MatchString(out) {
			t.Errorf("%s was given, but the table has no cycle row for %s:\n%s", flag, rows[flag], out)
		}
	}
	if pg != "" {
		for _, system := range []string{"holdfast over PostgreSQL", "holdfast over PostgreSQL, coalesced into /v1/batch"} {
			if !regexp.MustCompile(`(?m)^cycle +` + regexp.QuoteMeta(system) + ` +\d+ +cycles/s`).MatchString(out) {
				t.Errorf("--holdfast-postgres was given, but the table has no cycle row for %s:\n%s", system, out)
			}
		}
	}
	if len(joined) == 0 && !strings.Contains(stderr, "skipping Redis: no --redis address given") {
		t.Errorf("a peer without an address is not reported as skipped:\n%s", stderr)
	}
	t.Logf("peers joined: %v\n%s", joined, out)
}

// At one client the table also sets the acquire's latency beside the
// disk's sync plus the ceiling's round trip (issue 4's C=1 target), so
// that one run gives that ratio too.
func TestBenchOneClient(t *testing.T) {
	t.Parallel()
	out, _ := runBench(t, "bench", "--workloads", "cycle", "--clients", "1", "--duration", "300ms", "--warmup", "100ms")
	wantLines(t, out,
		regexp.MustCompile(`(?m)^holdfast bench: 1 client, `),
		regexp.MustCompile(`(?m)^Latency at one client \(acquire p50 ÷ \(the disk's sync p50 \S+ \+ the ceiling's acquire p50 \S+\), same run\):$`),
		regexp.MustCompile(`(?m)^  cycle +holdfast = \d+\.\d\d×$`),
		regexp.MustCompile(`(?m)^  cycle +holdfast, coalesced into /v1/batch = \d+\.\d\d×$`),
	)
}

// With --rounds every row says how many rounds it is the median of, and
// every ratio and latency lists each round's.
func TestBenchRounds(t *testing.T) {
	t.Parallel()
	out, _ := runBench(t, "bench", "--workloads", "cycle,heartbeat", "--clients", "1", "--rounds", "3",
		"--duration", "300ms", "--warmup", "50ms", "--sessions", "10")
	// A row of a loaded machine may finish no cycle in its time: its
	// round then shows as "–" and the median is of the others.
	ratio := `(\d+\.\d\d×|–)`
	rounds := `\d+\.\d\d× \(rounds: ` + ratio + `, ` + ratio + `, ` + ratio + `\)$`
	median := `median of (\d of )?3 rounds, \d+–\d+`
	wantLines(t, out,
		regexp.MustCompile(`(?m)^holdfast bench: .*, 3 rounds, `),
		regexp.MustCompile(`(?m)^cycle +holdfast +\d+ +cycles/s .* `+median+` +$`),
		regexp.MustCompile(`(?m)^cycle +disk: write \+ fdatasync +\d+ +syncs/s .* `+median+`; 500 writes`),
		regexp.MustCompile(`(?m)^heartbeat +holdfast, 1000 per /v1/batch +\d+ +sessions/s .* `+median+`; sessions with`),
		regexp.MustCompile(`(?m)^  cycle +holdfast ÷ trivial HTTP handler \(ceiling\) = `+rounds),
		regexp.MustCompile(`(?m)^  cycle +holdfast, coalesced into /v1/batch = `+rounds),
	)
}

// A peer given but not reachable stops the bench before it measures
// anything: a mistyped address does not leave a table without its rows.
func TestBenchStopsOnAPeerItCannotReach(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	dsn := "postgres://postgres@" + addr + "/test?sslmode=disable&connect_timeout=5"
	for flag, value := range map[string]string{"--etcd": addr, "--redis": addr, "--postgres": dsn, "--holdfast-postgres": dsn} {
		t.Run(flag, func(t *testing.T) {
			t.Parallel()
			r := runToEnd(t, exec.Command(binary, "bench", "--workloads", "cycle", "--duration", "100ms", "--no-trivial", flag, value))
			if r.code == 0 || !strings.Contains(r.stderr, flag+":") || !strings.Contains(r.stderr, addr) {
				t.Errorf("bench %s with nothing at %s: exit %d, stderr:\n%s\nwant a failure naming %s and the address", flag, addr, r.code, r.stderr, flag)
			}
			if r.stdout != "" {
				t.Errorf("it printed a table:\n%s", r.stdout)
			}
		})
	}
}

// Flags that cannot run are refused as usage errors, before anything
// starts, rather than replaced by the defaults; --warmup 0 means none.
func TestBenchRefusesFlagsThatCannotRun(t *testing.T) {
	t.Parallel()
	// Done already: a flag let through fails at once, starting nothing,
	// rather than running the whole bench with the defaults.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for _, args := range [][]string{
		{"--clients", "0"},
		{"--clients", "-5"},
		{"--duration", "0"},
		{"--duration", "-1s"},
		{"--warmup", "-1s"},
		{"--coalesce", "0"},
		{"--sessions", "0"},
		{"--idle-timeout", "-1s"},
		{"--idle-timeout", "5s"},
		{"--scale-locks", "0"},
		{"--postgres-conns", "-1"},
		{"--rounds", "0"},
		{"--rounds", "2"},
		{"--server", "127.0.0.1:7070"},
		{"--workloads", "cycle,nope"},
		{"--durable", "/tmp"}, // without --serve-trivial
		{"--wait", "1ms"},     // likewise
		{"--durable", "/tmp", "--serve-trivial", "--wait", "1ms"},
		{"--wait", "-1ms", "--serve-trivial"},
	} {
		var out, errOut bytes.Buffer
		code := run(ctx, append([]string{"bench"}, args...), &out, &errOut)
		if code != exitUsage || !strings.Contains(errOut.String(), args[0]) {
			t.Errorf("holdfast bench %s = %d, stderr %q; want %d and a message naming %s", strings.Join(args, " "), code, errOut.String(), exitUsage, args[0])
		}
		if out.Len() > 0 {
			t.Errorf("holdfast bench %s printed a table:\n%s", strings.Join(args, " "), &out)
		}
	}

	cfg := bench.Config{Workloads: []string{"cycle"}, Clients: 1, Duration: time.Second, Coalesce: time.Millisecond, Sessions: 1, ScaleLocks: 1, Rounds: 1}
	if err := checkBenchFlags(&cfg); err != nil || cfg.Warmup != bench.NoWarmup {
		t.Errorf("--warmup 0: error %v, Warmup %v; want none and bench.NoWarmup", err, cfg.Warmup)
	}
}

// A bench killed before it can stop its servers (SIGKILL here; SIGPIPE
// from "holdfast bench | head" alike) leaves none of them running.
func TestBenchKilledLeavesNoServer(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the servers end with the bench through Linux's parent-death signal")
	}
	t.Parallel()
	cmd := exec.Command(binary, "bench", "--workloads", "cycle", "--duration", "1m", "--no-trivial")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	server, args := 0, []string(nil)
	for deadline := time.Now().Add(time.Minute); server == 0 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		server, args = childServing(cmd.Process.Pid)
	}
	if server == 0 {
		cmd.Process.Kill()
		t.Fatal("the bench started no server within a minute")
	}
	// A killed bench cannot remove its temporary directory, the parent
	// of the server's store.
	if i := slices.Index(args, "--store"); i >= 0 && i+1 < len(args) {
		t.Cleanup(func() { os.RemoveAll(filepath.Dir(args[i+1])) })
	}
	cmd.Process.Kill()
	for deadline := time.Now().Add(30 * time.Second); running(server); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			syscall.Kill(server, syscall.SIGKILL)
			t.Fatalf("server %d still runs 30s after its bench was killed", server)
		}
	}
}

// childServing returns the pid and arguments of a "holdfast serve" whose
// parent is pid, or 0.
func childServing(pid int) (int, []string) {
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		child, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		if fields := statAfterComm(child); len(fields) < 2 || fields[1] != strconv.Itoa(pid) {
			continue
		}
		cmdline, _ := os.ReadFile("/proc/" + d.Name() + "/cmdline")
		if args := strings.Split(string(cmdline), "\x00"); slices.Contains(args, "serve") {
			return child, args
		}
	}
	return 0, nil
}

// running reports whether pid is alive and not a zombie waiting to be
// reaped.
func running(pid int) bool {
	fields := statAfterComm(pid)
	return len(fields) > 0 && fields[0] != "Z" && fields[0] != "X"
}

// statAfterComm returns the fields of /proc/PID/stat after the command
// name (state, ppid, …), which may hold spaces but not a ')'; none if
// the process is gone.
func statAfterComm(pid int) []string {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	return strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
}

// runBench runs the binary with args and returns what it printed on
// stdout and stderr; it must succeed.
func runBench(t *testing.T, args ...string) (stdout, stderr string) {
	t.Helper()
	r := runToEnd(t, exec.Command(binary, args...))
	if r.code != 0 {
		t.Fatalf("holdfast %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout, r.stderr
}

// wantLines reports each pattern that no line of the table matches.
func wantLines(t *testing.T, out string, patterns ...*regexp.Regexp) {
	t.Helper()
	for _, want := range patterns {
		if !want.MatchString(out) {
			t.Errorf("the table has no line matching %s:\n%s", want, out)
		}
	}
}

// tools/wrk/cycle.lua drives holdfast serve from wrk, a load generator
// that is not ours (docs/BENCHMARKS.md). A second of it against the real
// binary keeps the script working: every request is answered 2xx, and
// whatever is held at the end is a connection's own key, held by its own
// session.
func TestWrkCycleScript(t *testing.T) {
	t.Parallel()
	wrk, err := exec.LookPath("wrk")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("wrk is not installed: .ci/run installs Debian's")
		}
		t.Skip("wrk is not installed (Debian: apt-get install wrk)")
	}
	p := startServe(t, t.TempDir())
	out, err := exec.Command(wrk, "-t", "4", "-c", "4", "-d", "1s", "-s", "../../tools/wrk/cycle.lua", p.url).CombinedOutput()
	if err != nil {
		t.Fatalf("wrk: %v\n%s", err, out)
	}
	if m := regexp.MustCompile(`(\d+) requests in`).FindSubmatch(out); m == nil || len(m[1]) < 2 {
		t.Errorf("wrk made fewer than 10 requests:\n%s", out)
	}
	if bytes.Contains(out, []byte("Non-2xx")) || bytes.Contains(out, []byte("Socket errors")) {
		t.Errorf("wrk saw failed requests:\n%s", out)
	}
	page, err := newClient(t, p.url).Locks(t.Context(), holdfast.LockQuery{})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range page.Locks {
		id, ok := strings.CutPrefix(l.Key, "wrk/")
		if !ok || l.Owner.Session != "wrk-"+id {
			t.Errorf("%s is held by %s, want wrk/N held by wrk-N", l.Key, l.Owner.Session)
		}
	}
	if len(page.Locks) > 4 {
		t.Errorf("%d locks held after wrk's 4 connections", len(page.Locks))
	}
}
