package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/memstore"
	"github.com/holdfast/holdfast/server"
)

// binary is the holdfast command built once for all tests, which run it
// as a real subprocess against a real server.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "holdfast-cli-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "holdfast")
	build := exec.Command("go", "build", "-o", binary, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building holdfast:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// testServer is a real server over a Manager on memstore, with a clock
// that stands still unless a test moves it, so that no lock expires by
// itself while a test runs.
type testServer struct {
	url string
	mgr *holdfast.Manager
}

var epoch = time.Date(2026, 11, 30, 10, 47, 0, 0, time.UTC)

func newTestServer(t *testing.T, tokens ...server.Token) *testServer {
	t.Helper()
	var (
		mu  sync.Mutex
		now = epoch
	)
	st := memstore.New(memstore.Config{Now: func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(time.Millisecond) // distinct times, same order as calls
		return now
	}})
	discard := slog.New(slog.NewTextHandler(io.Discard, nil))
	mgr, err := holdfast.New(st, holdfast.Config{SweepInterval: -1, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Manager: mgr, Tokens: tokens, Anonymous: len(tokens) == 0, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		hs.Close()
		mgr.Close()
		st.Close()
	})
	return &testServer{url: hs.URL, mgr: mgr}
}

// command prepares "holdfast args..." against the server.
func (s *testServer) command(args ...string) *exec.Cmd {
	cmd := exec.Command(binary, args...)
	cmd.Env = append(environ(), "HOLDFAST_SERVER="+s.url, "HOLDFAST_TEST_BIN="+binary)
	return cmd
}

// environ is the tests' environment without the HOLDFAST_* variables of
// whoever runs them, which would change what holdfast does or says.
func environ() []string {
	return slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "HOLDFAST_") })
}

type result struct {
	stdout, stderr string
	code           int
}

// run runs holdfast to the end.
func (s *testServer) run(t *testing.T, args ...string) result {
	t.Helper()
	return runToEnd(t, s.command(args...))
}

// runToEnd runs cmd to the end and returns what it printed and its exit
// code; it fails the test only if cmd could not run at all.
func runToEnd(t *testing.T, cmd *exec.Cmd) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		t.Fatalf("%v: %v", cmd.Args, err)
	}
	return result{stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()}
}

// must runs holdfast and fails the test unless it exits 0.
func (s *testServer) must(t *testing.T, args ...string) string {
	t.Helper()
	r := s.run(t, args...)
	if r.code != 0 {
		t.Fatalf("holdfast %v: exit %d\nstdout: %s\nstderr: %s", args, r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// holders asks the Manager itself who holds key.
func (s *testServer) holders(t *testing.T, key string) []holdfast.Lock {
	t.Helper()
	page, err := s.mgr.Locks(context.Background(), holdfast.LockQuery{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	return page.Locks
}

func TestLockRefusedThenFreed(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	out := s.must(t, "lock", "policy/12345", "--session", "s-81", "--user", "u-7", "--name", "Bob Smith", "--ttl", "90m", "--note", "underwriting review")
	if !strings.Contains(out, "policy/12345") || !strings.Contains(out, "Bob Smith (u-7)") {
		t.Errorf("lock printed:\n%s", out)
	}

	// Flags after the keys or before them: both work.
	r := s.run(t, "lock", "--session", "s-82", "--name", "Alice", "policy/12345/coverage/2")
	if r.code != exitLocked {
		t.Fatalf("second session: exit %d, want %d\nstderr: %s", r.code, exitLocked, r.stderr)
	}
	for _, want := range []string{"Bob Smith", "policy/12345", "s-81", "KEY", "HOLDER", "--takeover", "holdfast break"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("refusal does not mention %q:\n%s", want, r.stderr)
		}
	}
	if hs := s.holders(t, "policy/12345/coverage/2"); len(hs) != 1 || hs[0].Owner.Session != "s-81" {
		t.Errorf("after the refusal, holders = %+v, want only s-81", hs)
	}

	ls := s.must(t, "ls")
	if !strings.Contains(ls, "policy/12345") || !strings.Contains(ls, "Bob Smith (u-7)") || !strings.Contains(ls, "s-81") {
		t.Errorf("ls:\n%s", ls)
	}
	who := s.must(t, "who", "policy/12345/coverage/2")
	if !strings.Contains(who, "policy/12345/coverage/2 is covered by policy/12345, being edited by Bob Smith (u-7)") ||
		!strings.Contains(who, "underwriting review") {
		t.Errorf("who:\n%s", who)
	}

	s.must(t, "unlock", "policy/12345", "--session", "s-81")
	if ls := s.must(t, "ls"); strings.TrimSpace(ls) != "No locks." {
		t.Errorf("ls after unlock:\n%s", ls)
	}
	if who := s.must(t, "who", "policy/12345"); !strings.Contains(who, "policy/12345 is free") {
		t.Errorf("who after unlock:\n%s", who)
	}
	s.must(t, "lock", "policy/12345/coverage/2", "--session", "s-82")
	if hs := s.holders(t, "policy/12345/coverage/2"); len(hs) != 1 || hs[0].Owner.Session != "s-82" {
		t.Errorf("holders = %+v, want s-82", hs)
	}
}

func TestLockJSON(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	var res holdfast.AcquireResult
	if err := json.Unmarshal([]byte(s.must(t, "lock", "order/42", "--session", "s-1", "--shared", "--json")), &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Locks) != 1 || res.Locks[0].Key != "order/42" || res.Locks[0].Mode != holdfast.Shared || res.Locks[0].Token == 0 {
		t.Errorf("lock --json = %+v", res)
	}
}

func TestListAllPagesAndLimit(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	// More locks than the largest page, so that ls must follow the cursor.
	for batch := 0; batch < 2; batch++ {
		var keys []string
		for i := 0; i < 600; i++ {
			keys = append(keys, fmt.Sprintf("doc/%d/%04d", batch, i))
		}
		if _, err := s.mgr.Acquire(context.Background(), holdfast.AcquireRequest{Keys: keys, Owner: holdfast.Owner{Session: "bulk"}}); err != nil {
			t.Fatal(err)
		}
	}
	var all struct{ Locks []holdfast.Lock }
	if err := json.Unmarshal([]byte(s.must(t, "ls", "--json")), &all); err != nil {
		t.Fatal(err)
	}
	if len(all.Locks) != 1200 || all.Locks[0].Key != "doc/0/0000" || all.Locks[1199].Key != "doc/1/0599" {
		t.Errorf("ls --json listed %d locks, want 1200 in key order", len(all.Locks))
	}
	table := s.must(t, "ls", "--limit", "3", "--prefix", "doc/1")
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[1], "doc/1/0000 ") || !strings.HasPrefix(lines[3], "doc/1/0002 ") {
		t.Errorf("ls --limit 3 --prefix doc/1:\n%s", table)
	}
}

func TestBreakRequiresReason(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	s.must(t, "lock", "policy/7", "--session", "s-81", "--name", "Bob Smith")
	r := s.run(t, "break", "policy/7")
	if r.code != exitUsage || !strings.Contains(r.stderr, "--reason is required") {
		t.Fatalf("break without --reason: exit %d, stderr %q", r.code, r.stderr)
	}
	if hs := s.holders(t, "policy/7"); len(hs) != 1 {
		t.Fatalf("break without --reason released the lock: %+v", hs)
	}
	out := s.must(t, "break", "policy/7", "--reason", "Bob is on leave", "--actor", "alice")
	if !strings.Contains(out, "Force-released 1 lock") || !strings.Contains(out, "Bob Smith") {
		t.Errorf("break printed:\n%s", out)
	}
	_, err := s.mgr.Verify(context.Background(), holdfast.VerifyRequest{Key: "policy/7", Session: "s-81"})
	var lost *holdfast.LockLostError
	if !errors.As(err, &lost) || lost.Reason != holdfast.LostForceReleased || lost.Actor != "alice" || lost.ForceReason != "Bob is on leave" {
		t.Errorf("the former holder's verify = %v, want lock_lost force_released by alice", err)
	}
	// The former holder's unlock is no error, and says who broke the lock
	// and why.
	r = s.run(t, "unlock", "policy/7", "--session", "s-81")
	if r.code != exitOK || !strings.Contains(r.stderr, "holdfast: policy/7 is no longer held: an administrator (alice) released it at ") ||
		!strings.Contains(r.stderr, "Bob is on leave") {
		t.Errorf("unlock after the break: exit %d, stderr %q", r.code, r.stderr)
	}
	r = s.run(t, "unlock", "policy/8", "--session", "s-81")
	if r.code != exitOK || strings.TrimSpace(r.stderr) != "holdfast: policy/8 was not held by session s-81" {
		t.Errorf("unlock of a key never held: exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestEndSession(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	s.must(t, "lock", "a/1", "a/2", "--session", "tab-1")
	out := s.must(t, "end-session", "tab-1")
	if !strings.Contains(out, "2 lock(s) released") {
		t.Errorf("end-session printed:\n%s", out)
	}
	if hs := s.holders(t, "a"); len(hs) != 0 {
		t.Errorf("after end-session, locks below a: %+v", hs)
	}
}

func TestUnlockStaleToken(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	s.must(t, "lock", "a/1", "--session", "s")
	lock := s.holders(t, "a/1")[0]
	r := s.run(t, "unlock", "a/1", "--session", "s", "--fencing-token", fmt.Sprint(lock.Token+1))
	if r.code != exitLockLost || !strings.Contains(r.stderr, "stale") {
		t.Fatalf("unlock with a stale token: exit %d, stderr %q", r.code, r.stderr)
	}
	if hs := s.holders(t, "a/1"); len(hs) != 1 {
		t.Fatalf("a stale unlock released the lock")
	}
	s.must(t, "unlock", "a/1", "--session", "s", "--fencing-token", fmt.Sprint(lock.Token))
	if hs := s.holders(t, "a/1"); len(hs) != 0 {
		t.Fatalf("unlock with the current token left %+v", hs)
	}
}

func TestRunHoldsLockAndPropagatesStatus(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	seen := filepath.Join(t.TempDir(), "seen.json")
	// The command looks at the lock from inside, then fails with 7.
	r := s.run(t, "run", "job/nightly", "--", "sh", "-c",
		`"$HOLDFAST_TEST_BIN" ls --session "$HOLDFAST_SESSION" --json > "$1"; exit 7`, "sh", seen)
	if r.code != 7 {
		t.Fatalf("run: exit %d, want the command's 7\nstderr: %s", r.code, r.stderr)
	}
	b, err := os.ReadFile(seen)
	if err != nil {
		t.Fatal(err)
	}
	var during struct{ Locks []holdfast.Lock }
	if err := json.Unmarshal(b, &during); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	if len(during.Locks) != 1 || during.Locks[0].Key != "job/nightly" || !strings.Contains(during.Locks[0].Note, "sh -c") {
		t.Errorf("while the command ran, its session held %+v, want job/nightly", during.Locks)
	}
	if hs := s.holders(t, "job/nightly"); len(hs) != 0 {
		t.Errorf("after run, job/nightly is still held: %+v", hs)
	}
	if r := s.run(t, "run", "job/nightly", "--", "true"); r.code != 0 {
		t.Errorf("run of true: exit %d, stderr %s", r.code, r.stderr)
	}
}

// A command that is not there, or cannot run, gets a shell's statuses,
// and its lock is released.
func TestRunCommandNotRunnable(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	dir := t.TempDir()
	notExecutable := filepath.Join(dir, "report.sh")
	if err := os.WriteFile(notExecutable, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A binary the kernel refuses is not handed to /bin/sh as a script.
	notABinary := filepath.Join(dir, "report")
	if err := os.WriteFile(notABinary, []byte("\x7fELF\x02\x01\x01\x00\x00\x00garbage"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		command string
		want    int
	}{
		{"holdfast-no-such-command", 127},
		{filepath.Join(dir, "missing.sh"), 127},
		{notExecutable, 126},
		{notABinary, 126},
	} {
		r := s.run(t, "run", "job/report", "--", c.command)
		if r.code != c.want {
			t.Errorf("run %s: exit %d, want %d\nstderr: %s", c.command, r.code, c.want, r.stderr)
		}
		if hs := s.holders(t, "job/report"); len(hs) != 0 {
			t.Errorf("after run %s, job/report is still held: %+v", c.command, hs)
		}
	}
}

// A script without a "#!" line runs under /bin/sh, as a shell runs it,
// with its arguments, the session and its own exit status.
func TestRunScriptWithoutInterpreterLine(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	dir := t.TempDir()
	script := filepath.Join(dir, "report.sh")
	body := "echo \"$1 $HOLDFAST_SESSION\" > \"$2\"\nexit 4\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	r := s.run(t, "run", "job/report", "--session", "nightly", "--", script, "2026-11", out)
	if r.code != 4 {
		t.Fatalf("exit %d, want the script's 4\nstderr: %s", r.code, r.stderr)
	}
	if got, err := os.ReadFile(out); err != nil || string(got) != "2026-11 nightly\n" {
		t.Errorf("the script wrote %q (%v), want %q", got, err, "2026-11 nightly\n")
	}
	if hs := s.holders(t, "job/report"); len(hs) != 0 {
		t.Errorf("after the run, job/report is still held: %+v", hs)
	}
}

func TestRunRefusedWhenLocked(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	s.must(t, "lock", "job/nightly", "--session", "ops", "--name", "Carol")
	ran := filepath.Join(t.TempDir(), "ran")
	r := s.run(t, "run", "job/nightly", "--", "touch", ran)
	if r.code != exitLocked || !strings.Contains(r.stderr, "Carol") {
		t.Fatalf("run over a held lock: exit %d, stderr %s", r.code, r.stderr)
	}
	if _, err := os.Stat(ran); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the command ran although the lock was refused (stat: %v)", err)
	}
}

// startRun starts "holdfast run" with a command that prints "started" once
// it runs, and returns when it has.
func startRun(t *testing.T, s *testServer, args ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := s.command(args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if line != "started\n" {
		cmd.Wait()
		t.Fatalf("the command did not start: %q, %v\nstderr: %s", line, err, stderr.String())
	}
	return cmd, &stderr
}

func exitOf(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	err := cmd.Wait()
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode()
}

func TestRunStopsCommandWhenLockLost(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	// A short ttl makes run renew often, so that it learns of the loss
	// soon; the store's clock stands still, so the lock cannot expire.
	cmd, stderr := startRun(t, s, "run", "job/import", "--ttl", "300ms", "--", "sh", "-c", "echo started; exec sleep 60")
	if hs := s.holders(t, "job/import"); len(hs) != 1 {
		t.Fatalf("while running, holders = %+v", hs)
	}
	if _, err := s.mgr.ForceRelease(context.Background(), holdfast.ForceReleaseRequest{
		Keys: []string{"job/import"}, Reason: "stuck import", Actor: "alice"}); err != nil {
		t.Fatal(err)
	}
	if code := exitOf(t, cmd); code != exitLockLost {
		t.Errorf("exit %d, want %d", code, exitLockLost)
	}
	if !strings.Contains(stderr.String(), "lost the lock") || !strings.Contains(stderr.String(), "stuck import") {
		t.Errorf("stderr does not say that and why the lock was lost:\n%s", stderr)
	}
}

func TestRunForwardsSignals(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	cmd, stderr := startRun(t, s, "run", "job/export", "--", "sh", "-c",
		`trap 'kill $!; exit 42' TERM; echo started; sleep 60 & wait`)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := exitOf(t, cmd); code != 42 {
		t.Errorf("exit %d, want the command's 42 from its TERM trap\nstderr: %s", code, stderr)
	}
	if hs := s.holders(t, "job/export"); len(hs) != 0 {
		t.Errorf("after an interrupted run, job/export is still held: %+v", hs)
	}
}

func TestExitCodes(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{}, exitUsage, "Exit codes:"},
		{[]string{"frobnicate"}, exitUsage, `unknown command "frobnicate"`},
		{[]string{"lock", "a/1"}, exitUsage, "--session is required"},
		{[]string{"lock", "a/1", "--session"}, exitUsage, "flag needs an argument"},
		{[]string{"lock", "a/1", "--session", "s", "--ttl", "soon"}, exitUsage, "invalid value"},
		{[]string{"run", "a/1"}, exitUsage, "after --"},
		{[]string{"lock", "-h"}, exitOK, "Example:"},
		{[]string{"lock", "/bad", "--session", "s"}, exitUsage, `the server refused the request: keys[0]: key "/bad" starts with /`},
		{[]string{"serve", "--lisen", "127.0.0.1:0"}, exitUsage, "flag provided but not defined: -lisen"},
		{[]string{"serve", "extra-arg"}, exitUsage, "unexpected arguments: extra-arg"},
		{[]string{"serve", "--listen", "127.0.0.1"}, exitUsage, `listen "127.0.0.1" (from --listen): want host:port`},
		{[]string{"serve", "--listen", "127.0.0.1:0", "--store", "redis://localhost:6379"}, exitUsage, "not supported yet"},
		{[]string{"migrate", "--store", "postgres://%zz"}, exitUsage, "not a valid postgres:// URL"},
		{[]string{"version", "now"}, exitUsage, "takes no arguments"},
	} {
		r := s.run(t, tc.args...)
		if r.code != tc.code || !strings.Contains(r.stdout+r.stderr, tc.want) {
			t.Errorf("holdfast %v: exit %d, want %d with %q\nstdout: %s\nstderr: %s", tc.args, r.code, tc.code, tc.want, r.stdout, r.stderr)
		}
	}
}

// A server that is not there is told apart from one whose store is
// unavailable, with what to check; the exit code is the same.
func TestServerNotRunning(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String()
	ln.Close()
	r := s.run(t, "lock", "a/1", "--session", "s", "--server", down)
	if r.code != exitUnavailable {
		t.Fatalf("lock against %s: exit %d, want %d\nstderr: %s", down, r.code, exitUnavailable, r.stderr)
	}
	for _, want := range []string{"cannot reach the holdfast server at " + down + ": ", `"holdfast serve"`, "--server", "HOLDFAST_SERVER"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, r.stderr)
		}
	}
	if strings.Contains(r.stderr, "store") {
		t.Errorf("stderr blames the store:\n%s", r.stderr)
	}
}

// A server address without its scheme is refused as wrong usage, naming
// the flag or variable it came from.
func TestServerAddressWithoutScheme(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	fromEnv := s.command("ls")
	fromEnv.Env = append(fromEnv.Env, "HOLDFAST_SERVER=127.0.0.1:7091")
	for _, tc := range []struct {
		cmd  *exec.Cmd
		want string
	}{
		{fromEnv, `HOLDFAST_SERVER must be a URL such as http://127.0.0.1:7070, not "127.0.0.1:7091"`},
		{s.command("ls", "--server", "localhost:7070"), `--server must be a URL such as http://127.0.0.1:7070, not "localhost:7070"`},
	} {
		r := runToEnd(t, tc.cmd)
		if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d, want %d saying %q\nstderr: %s", tc.cmd.Args, r.code, exitUsage, tc.want, r.stderr)
		}
	}
}

// commands are the commands the usage text lists.
func commands(t *testing.T) []string {
	t.Helper()
	var names []string
	for _, line := range strings.Split(usage, "\n") {
		if rest, ok := strings.CutPrefix(line, "  holdfast "); ok {
			names = append(names, strings.Fields(rest)[0])
		}
	}
	if len(names) < 13 {
		t.Fatalf("the usage text lists %v", names)
	}
	return names
}

// Help asked for goes to stdout, so that it can be paged; a mistake goes
// to stderr with the help, and exits 64.
func TestHelpAndMistakesOfEveryCommand(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	for _, args := range [][]string{{"-h"}, {"help"}} {
		r := s.run(t, args...)
		if r.code != exitOK || !strings.Contains(r.stdout, "Exit codes:") || r.stderr != "" {
			t.Errorf("holdfast %v: exit %d\nstdout: %s\nstderr: %s", args, r.code, r.stdout, r.stderr)
		}
	}
	for _, name := range commands(t) {
		r := s.run(t, name, "-h")
		if r.code != exitOK || !strings.HasPrefix(r.stdout, "Usage: holdfast "+name) || !strings.Contains(r.stdout, "Example:") || r.stderr != "" {
			t.Errorf("holdfast %s -h: exit %d, want 0 with the help on stdout\nstdout: %s\nstderr: %s", name, r.code, r.stdout, r.stderr)
		}
		r = s.run(t, name, "--no-such-flag")
		if r.code != exitUsage || r.stdout != "" ||
			!strings.HasPrefix(r.stderr, "holdfast: "+name+": flag provided but not defined: -no-such-flag\n") || !strings.Contains(r.stderr, "Usage: holdfast "+name) {
			t.Errorf("holdfast %s --no-such-flag: exit %d, want %d with the mistake and the help on stderr\nstdout: %s\nstderr: %s", name, r.code, exitUsage, r.stdout, r.stderr)
		}
	}
}

// A misspelled HOLDFAST_* variable is warned of, not refused; the tests'
// HOLDFAST_TEST_* are not.
func TestUnknownEnvironmentVariables(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	cmd := s.command("ls")
	cmd.Env = append(cmd.Env, "HOLDFAST_SERVR=http://127.0.0.1:7091", "HOLDFAST_TEST_WHATEVER=1")
	r := runToEnd(t, cmd)
	if r.code != exitOK || !strings.Contains(r.stderr, "warning: ignoring HOLDFAST_SERVR") || strings.Contains(r.stderr, "HOLDFAST_TEST_") {
		t.Errorf("ls with HOLDFAST_SERVR set: exit %d\nstderr: %s", r.code, r.stderr)
	}
	if r := s.run(t, "ls"); r.stderr != "" {
		t.Errorf("ls with only known variables set warns:\n%s", r.stderr)
	}

	// serve logs it; a store it refuses once the log has started ends it
	// at once.
	serve := exec.Command(binary, "serve", "--listen", "127.0.0.1:0", "--store", "redis://localhost:6379", "--log-format", "json")
	serve.Env = append(environ(), "HOLDFAST_LISTN=127.0.0.1:7071", "HOLDFAST_TEST_WHATEVER=1")
	r = runToEnd(t, serve)
	if !strings.Contains(r.stderr, `"level":"WARN"`) || !strings.Contains(r.stderr, `"variable":"HOLDFAST_LISTN"`) || strings.Contains(r.stderr, "HOLDFAST_TEST_") {
		t.Errorf("serve with HOLDFAST_LISTN set: exit %d\nstderr: %s", r.code, r.stderr)
	}
}

func TestTokenAndRoles(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, server.Token{Role: server.Reader, Secret: "read-only"}, server.Token{Role: server.Client, Secret: "s3cret-app"})
	if r := s.run(t, "ls"); r.code != exitDenied {
		t.Errorf("ls without a token: exit %d, want %d\nstderr: %s", r.code, exitDenied, r.stderr)
	}
	if r := s.run(t, "ls", "--token", "read-only"); r.code != exitOK {
		t.Errorf("ls as reader: exit %d\nstderr: %s", r.code, r.stderr)
	}
	if r := s.run(t, "lock", "a/1", "--session", "s", "--token", "read-only"); r.code != exitDenied {
		t.Errorf("lock as reader: exit %d, want %d\nstderr: %s", r.code, exitDenied, r.stderr)
	}
	withToken := func(args ...string) *exec.Cmd {
		cmd := s.command(args...)
		cmd.Env = append(cmd.Env, "HOLDFAST_TOKEN=s3cret-app")
		return cmd
	}
	if out, err := withToken("lock", "a/1", "--session", "s").CombinedOutput(); err != nil {
		t.Errorf("lock with HOLDFAST_TOKEN: %v\n%s", err, out)
	}
	if out, _ := withToken("lock", "-h").CombinedOutput(); strings.Contains(string(out), "s3cret") {
		t.Errorf("-h shows the token:\n%s", out)
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	out := s.must(t, "version")
	if !strings.HasPrefix(out, "holdfast ") || !strings.Contains(out, "go1.") {
		t.Errorf("version printed %q", out)
	}
}
