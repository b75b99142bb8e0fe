package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/client"
)

const runHelp = `
Usage: holdfast run KEY... [--session S] [--ttl 1m] [--grace 10s] -- COMMAND [ARG...]

Locks every KEY, runs COMMAND while renewing the locks every third of their
ttl, then releases them and exits with COMMAND's exit status. If the locks
are held by another session, COMMAND does not run and the exit code is 2.
If the locks are lost while COMMAND runs (force-released, or not renewed
before they expired), COMMAND gets SIGTERM, then SIGKILL after --grace, and
the exit code is 3. SIGINT and SIGTERM are passed on to COMMAND.

A short --ttl frees the locks soon after this process dies without
releasing them. COMMAND finds the session in $HOLDFAST_SESSION. Without
--session, a new session is made for the run and ended after it. A script
without a "#!" line is run by /bin/sh, as a shell would run it.

Example:
  holdfast run report/2026-11 --ttl 30s -- ./monthly-report.sh --month 2026-11
`

// releaseTimeout bounds the release after the command ends, which also
// runs after the user pressed Ctrl-C.
const releaseTimeout = 10 * time.Second

type runCommand struct {
	stdout, stderr io.Writer
}

func newRunCommand(stdout, stderr io.Writer) *runCommand {
	return &runCommand{stdout: stdout, stderr: stderr}
}

func (c *runCommand) Run(ctx context.Context, args []string) error {
	fs := newFlagSet("run", runHelp)
	var conn connection
	conn.register(fs)
	var (
		req    holdfast.AcquireRequest
		shared bool
	)
	fs.StringVar(&req.Owner.Session, "session", "", "session to hold the locks (default: a new one for this run)")
	fs.StringVar(&req.Owner.User, "user", "", "stable user id of the holder")
	fs.StringVar(&req.Owner.Name, "name", "", "holder's name as other people see it")
	ttl := fs.Duration("ttl", time.Minute, "lifetime of the locks between renewals")
	grace := fs.Duration("grace", 10*time.Second, "time COMMAND has to stop after SIGTERM when the locks are lost")
	fs.BoolVar(&shared, "shared", false, "take shared locks instead of exclusive ones")
	fs.StringVar(&req.Note, "note", "", "note shown to others with the lock (default: the command line)")
	fs.BoolVar(&req.Takeover, "takeover", false, "take over conflicting locks held by the same --user in other sessions")
	keys, command, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(keys) == 0:
		return usagef("run: at least one KEY is required")
	case len(command) == 0:
		return usagef("run: give the command to run after --")
	case *ttl <= 0 || *grace < 0:
		return usagef("run: --ttl and --grace must be positive")
	}
	ownSession := req.Owner.Session == ""
	if ownSession {
		req.Owner.Session = newSessionID()
	}
	if req.Note == "" {
		req.Note = strings.ToValidUTF8(truncate(strings.Join(command, " "), 200), "")
	}
	req.Keys = keys
	req.TTL = holdfast.Duration(*ttl)
	if shared {
		req.Mode = holdfast.Shared
	}
	cl, err := conn.client()
	if err != nil {
		return err
	}

	requested := time.Now()
	res, err := cl.Acquire(ctx, req)
	if err != nil {
		return err
	}
	held := heldLock{cl: cl, session: req.Owner.Session, keys: keys, ttl: grantedTTL(*ttl, res.Locks), stderr: c.stderr}
	defer held.release(ctx, ownSession)

	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(signals)
	cmd, err := c.start(command, req.Owner.Session)
	if err != nil {
		fmt.Fprintf(c.stderr, "holdfast: %v\n", err)
		// As a shell answers: 127 for a command it cannot find, by name
		// or by path, 126 for one it cannot run.
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return exitStatus(127)
		}
		return exitStatus(126)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	// Renewal runs until the command ends, whatever happens to ctx: a
	// Ctrl-C is the command's to handle.
	keepCtx, stopKeeping := context.WithCancel(context.WithoutCancel(ctx))
	lost := make(chan error, 1)
	kept := make(chan struct{})
	go func() {
		defer close(kept)
		held.keep(keepCtx, requested.Add(held.ttl), lost)
	}()
	defer func() {
		stopKeeping()
		<-kept
	}()

	var (
		lostErr error
		kill    <-chan time.Time
		waitErr error
	)
wait:
	for {
		select {
		case sig := <-signals:
			cmd.Process.Signal(sig)
		case lostErr = <-lost:
			fmt.Fprintf(c.stderr, "holdfast: lost the lock while the command ran: %v; stopping the command\n", lostErr)
			cmd.Process.Signal(syscall.SIGTERM)
			kill = time.After(*grace)
		case <-kill:
			cmd.Process.Kill()
		case waitErr = <-exited:
			break wait
		}
	}
	if lostErr != nil {
		return exitStatus(exitLockLost)
	}
	var exitErr *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &exitErr) {
		return fmt.Errorf("run: %w", waitErr)
	}
	if code := exitCode(cmd.ProcessState); code != 0 {
		return exitStatus(code)
	}
	return nil
}

// start starts command with the session in its environment. A script the
// kernel cannot run because it has no "#!" line is run by /bin/sh, as a
// shell runs it, so that it works here as it does typed. A binary the
// kernel refuses (another architecture, a corrupt file) stays refused.
func (c *runCommand) start(command []string, session string) (*exec.Cmd, error) {
	cmd := c.command(command[0], command[1:], session)
	err := cmd.Start()
	if errors.Is(err, syscall.ENOEXEC) && isText(cmd.Path) {
		cmd = c.command("/bin/sh", append([]string{cmd.Path}, command[1:]...), session)
		err = cmd.Start()
	}
	return cmd, err
}

// isText reports whether the file at path looks like a script: bash's
// test, no NUL byte in its first line or first 80 bytes.
func isText(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, 80)
	n, _ := io.ReadFull(f, head)
	head = head[:n]
	if i := bytes.IndexByte(head, '\n'); i >= 0 {
		head = head[:i]
	}
	return bytes.IndexByte(head, 0) < 0
}

func (c *runCommand) command(name string, args []string, session string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, c.stdout, c.stderr
	cmd.Env = append(os.Environ(), "HOLDFAST_SESSION="+session)
	return cmd
}

// heldLock keeps the locks of a run alive and gives them back.
type heldLock struct {
	cl      *client.Client
	session string
	keys    []string
	ttl     time.Duration
	stderr  io.Writer
}

// keep renews the locks every third of their ttl until ctx ends. It
// reports on lost when the server says they are gone, or when it could not
// renew them before deadline, judged on this machine's monotonic clock:
// past it the server may already have given the locks to someone else.
func (h *heldLock) keep(ctx context.Context, deadline time.Time, lost chan<- error) {
	interval := h.ttl / 3
	timer := time.NewTimer(interval)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		sent := time.Now()
		rctx, cancel := context.WithDeadline(ctx, deadline)
		_, err := h.cl.Renew(rctx, holdfast.RenewRequest{Session: h.session, Keys: h.keys, TTL: holdfast.Duration(h.ttl)})
		cancel()
		switch {
		case err == nil:
			deadline = sent.Add(h.ttl)
			timer.Reset(interval)
		case ctx.Err() != nil:
			return
		case errors.Is(err, holdfast.ErrLockLost), errors.Is(err, holdfast.ErrStaleToken):
			lost <- err
			return
		case !time.Now().Before(deadline):
			lost <- fmt.Errorf("could not renew it before it expired: %w", err)
			return
		default:
			fmt.Fprintf(h.stderr, "holdfast: renewing the lock failed, retrying: %v\n", err)
			timer.Reset(max(100*time.Millisecond, min(interval, time.Until(deadline)/2)))
		}
	}
}

// release gives the locks back, or ends the run's own session.
func (h *heldLock) release(ctx context.Context, endSession bool) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	var err error
	if endSession {
		_, err = h.cl.EndSession(ctx, holdfast.EndSessionRequest{Session: h.session})
	} else {
		_, err = h.cl.Release(ctx, holdfast.ReleaseRequest{Session: h.session, Keys: h.keys})
	}
	if err != nil {
		fmt.Fprintf(h.stderr, "holdfast: releasing the lock failed (it expires by itself within %s): %v\n", h.ttl, err)
	}
}

// grantedTTL is the lifetime the server actually granted, which its type
// configuration may cap below the one asked for.
func grantedTTL(asked time.Duration, locks []holdfast.Lock) time.Duration {
	ttl := asked
	for _, l := range locks {
		if d := l.ExpiresAt.Sub(l.AcquiredAt); d > 0 && d < ttl {
			ttl = d
		}
	}
	return ttl
}

// exitCode is a finished process's exit status, 128+N when signal N
// killed it, as shells report it.
func exitCode(state *os.ProcessState) int {
	if code := state.ExitCode(); code >= 0 {
		return code
	}
	if ws, ok := state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return exitError
}

// newSessionID names a run's own session after the host and process, so
// that "holdfast ls" shows where it runs.
func newSessionID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	b := make([]byte, 4)
	rand.Read(b)
	return fmt.Sprintf("run-%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b))
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
