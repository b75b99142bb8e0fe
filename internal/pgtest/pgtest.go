// Package pgtest runs a private PostgreSQL server for one test, which the
// test may stop, crash and start again without disturbing anyone else's
// database.
//
// The server is a fresh cluster (initdb) in a temporary directory,
// listening on a loopback port of its own and a unix socket in that
// directory, with fsync and synchronous_commit on, as in production. When
// the test process runs as root, the server runs as the postgres OS user
// (PostgreSQL refuses root). Without PostgreSQL's binaries, the test is
// skipped, except under CI=true, where that is a failure.
package pgtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/holdfast/holdfast/internal/tcpproxy"
)

// Stop modes, as pg_ctl names them.
type Mode syscall.Signal

const (
	// Fast ends every session and shuts down cleanly.
	Fast = Mode(syscall.SIGINT)
	// Immediate quits at once, without a checkpoint: a crash, after which
	// the next start replays the WAL.
	Immediate = Mode(syscall.SIGQUIT)
)

func (m Mode) String() string {
	if m == Immediate {
		return "immediate"
	}
	return "fast"
}

// Server is a private PostgreSQL server. Its methods are for the test
// goroutine (they call t.Fatal).
type Server struct {
	t    testing.TB
	bin  string
	dir  string // owns the data directory, the socket and the log
	port int
	cred *syscall.Credential // nil unless the server runs as postgres

	// exited is closed when the running postmaster has exited; nil while
	// the server is stopped.
	exited chan struct{}
	pid    int
}

// SharedDSN returns HOLDFAST_TEST_POSTGRES, the database that tests which
// need no server of their own share. Unset, the test is skipped, or fails
// under CI=true, which must run every PostgreSQL test.
func SharedDSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv("HOLDFAST_TEST_POSTGRES")
	if dsn == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("HOLDFAST_TEST_POSTGRES is not set, and CI must run the PostgreSQL tests")
		}
		t.Skip("HOLDFAST_TEST_POSTGRES is not set; set it to a PostgreSQL DSN to run the PostgreSQL tests")
	}
	return dsn
}

// BehindProxy returns a proxy to the database of dsn, a URL, which the
// test can cut, stall or strand, and dsn rewritten to connect through it,
// giving up on a connection after 2s.
func BehindProxy(t testing.TB, dsn string) (*tcpproxy.Proxy, string) {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	p := tcpproxy.New(t, u.Host)
	u.Host = p.Addr()
	q := u.Query()
	q.Set("connect_timeout", "2")
	u.RawQuery = q.Encode()
	return p, u.String()
}

// readyTimeout bounds how long a start, including crash recovery, may take.
const readyTimeout = 60 * time.Second

// Start creates a cluster and starts its server; the test's cleanup stops
// it and deletes it.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := binDir()
	if bin == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("pgtest: PostgreSQL's initdb and postgres are not installed, and CI must run this test")
		}
		t.Skip("pgtest: PostgreSQL's initdb and postgres are not installed")
	}
	// Not t.TempDir: its parents are private to root, and the server may
	// run as another user.
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{t: t, bin: bin, dir: dir, port: freePort(t)}
	t.Cleanup(func() {
		s.stop(Immediate)
		os.RemoveAll(dir)
	})
	if os.Geteuid() == 0 {
		s.cred = postgresUser(t)
		if err := os.Chown(dir, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	s.run("initdb", "--pgdata", s.dataDir(), "--username", "postgres", "--auth", "trust",
		"--encoding", "UTF8", "--locale", "C", "--no-sync")
	s.Start()
	return s
}

// DSN is a connection string for the server's postgres database.
func (s *Server) DSN() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
}

// Start starts the stopped server on the same port and data, and returns
// once it accepts connections (after crash recovery, if it crashed).
func (s *Server) Start() {
	s.t.Helper()
	if s.exited != nil {
		s.t.Fatal("pgtest: Start: the server is running")
	}
	log, err := os.OpenFile(s.logFile(), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		s.t.Fatal(err)
	}
	defer log.Close()
	cmd := exec.Command(filepath.Join(s.bin, "postgres"), "-D", s.dataDir(),
		"-c", "listen_addresses=127.0.0.1", "-c", "port="+strconv.Itoa(s.port),
		"-c", "unix_socket_directories="+s.dir,
		"-c", "fsync=on", "-c", "synchronous_commit=on",
		"-c", "shared_buffers=32MB", "-c", "max_connections=200")
	cmd.Stdout, cmd.Stderr = log, log
	// If the test process dies without its cleanup (a test timeout), the
	// server quits too instead of holding the port and directory.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Pdeathsig: syscall.SIGQUIT}
	started, exited := make(chan error), make(chan struct{})
	go func() {
		// Pdeathsig follows the thread that started the process: keep
		// that thread for as long as the server runs.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		cmd.Wait()
		close(exited)
	}()
	if err := <-started; err != nil {
		s.t.Fatalf("pgtest: starting postgres: %v", err)
	}
	s.exited, s.pid = exited, cmd.Process.Pid
	if err := s.awaitReady(); err != nil {
		s.stop(Immediate)
		s.t.Fatalf("pgtest: %v\n%s", err, s.Log())
	}
}

// Stop stops the server the way mode says and returns once it has exited.
func (s *Server) Stop(mode Mode) {
	s.t.Helper()
	if s.exited == nil {
		s.t.Fatal("pgtest: Stop: the server is not running")
	}
	if err := s.stop(mode); err != nil {
		s.t.Fatalf("pgtest: %s stop: %v\n%s", mode, err, s.Log())
	}
}

// Log returns what the server has logged so far.
func (s *Server) Log() string {
	b, _ := os.ReadFile(s.logFile())
	return string(b)
}

// stopTimeout bounds a stop; a fast stop waits for sessions to end, which
// they do at once when told.
const stopTimeout = 30 * time.Second

func (s *Server) stop(mode Mode) error {
	if s.exited == nil {
		return nil
	}
	defer func() { s.exited = nil }()
	if err := syscall.Kill(s.pid, syscall.Signal(mode)); err != nil {
		return err
	}
	select {
	case <-s.exited:
		return nil
	case <-time.After(stopTimeout):
		syscall.Kill(s.pid, syscall.SIGKILL)
		<-s.exited
		return fmt.Errorf("the server did not exit within %s and was killed", stopTimeout)
	}
}

// awaitReady waits until the server accepts a query.
func (s *Server) awaitReady() error {
	deadline := time.Now().Add(readyTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgx.Connect(ctx, s.DSN())
		if err == nil {
			err = conn.Ping(ctx)
			conn.Close(ctx)
		}
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-s.exited:
			return fmt.Errorf("postgres exited while starting: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres not ready after %s: %v", readyTimeout, err)
		}
	}
}

func (s *Server) dataDir() string { return filepath.Join(s.dir, "data") }
func (s *Server) logFile() string { return filepath.Join(s.dir, "postgres.log") }

// run runs one of PostgreSQL's programs as the server's user.
func (s *Server) run(program string, args ...string) {
	s.t.Helper()
	cmd := exec.Command(filepath.Join(s.bin, program), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	// initdb runs in the directory it is started in; the test's may not
	// be readable by the postgres user.
	cmd.Dir = s.dir
	if out, err := cmd.CombinedOutput(); err != nil {
		s.t.Fatalf("pgtest: %s: %v\n%s", program, err, out)
	}
}

// binDir finds the directory of initdb and postgres: pg_config's, or the
// newest of Debian's /usr/lib/postgresql/*/bin; "" if there is none.
func binDir() string {
	var dirs []string
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		dirs = append(dirs, strings.TrimSpace(string(out)))
	}
	installed, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(installed, func(a, b string) int { return version(b) - version(a) })
	for _, d := range append(dirs, installed...) {
		if isFile(filepath.Join(d, "initdb")) && isFile(filepath.Join(d, "postgres")) {
			return d
		}
	}
	return ""
}

// version is the major version in a path like /usr/lib/postgresql/16/bin.
func version(bin string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(bin)))
	return n
}

func isFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

func postgresUser(t testing.TB) *syscall.Credential {
	t.Helper()
	u, err := user.Lookup("postgres")
	if err != nil {
		t.Fatalf("pgtest: running as root, and there is no postgres user to run the server as: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
}

// freePort picks a loopback port below the kernel's range for outgoing
// connections, so that no client connection takes it while the server is
// down and it can start again on the same port.
func freePort(t testing.TB) int {
	t.Helper()
	low := ephemeralLow()
	for range 100 {
		port := 10000 + rand.IntN(low-10000)
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err == nil {
			ln.Close()
			return port
		}
	}
	t.Fatal("pgtest: no free loopback port")
	return 0
}

// ephemeralLow is where the kernel's range of ports for outgoing
// connections begins.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 2 {
		if low, err := strconv.Atoi(f[0]); err == nil && low > 10000 {
			return low
		}
	}
	return 32768
}
