package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/client"
)

// serveProcess is a real "holdfast serve" on the embedded store.
type serveProcess struct {
	cmd    *exec.Cmd
	url    string
	stderr *strings.Builder
}

// startServe runs holdfast serve on store with flags and waits until it is
// ready.
func startServe(t *testing.T, store string, flags ...string) *serveProcess {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	p := &serveProcess{url: "http://" + addr, stderr: &strings.Builder{}}
	p.cmd = exec.Command(binary, append([]string{"serve", "--listen", addr, "--store", store}, flags...)...)
	p.cmd.Env = append(os.Environ(), "HOLDFAST_TOKENS=", "HOLDFAST_CONFIG=")
	p.cmd.Stderr = &lockedWriter{b: p.stderr}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.kill)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if code, _ := get(p.url + "/readyz"); code == http.StatusOK {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("holdfast serve not ready after 30s\n%s", p.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (p *serveProcess) kill() {
	if p.cmd.ProcessState == nil {
		p.cmd.Process.Signal(syscall.SIGKILL)
		p.cmd.Wait()
	}
}

// output is what the server has written to its standard error so far.
func (p *serveProcess) output() string {
	w := p.cmd.Stderr.(*lockedWriter)
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

type lockedWriter struct {
	mu sync.Mutex
	b  *strings.Builder
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func newClient(t *testing.T, url string) *client.Client {
	t.Helper()
	c, err := client.New(client.Config{BaseURL: url})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestServeOneWinnerOf64 races 64 sessions for one key through the real
// server on the embedded store: exactly one is granted, every other one is
// refused naming the winner.
func TestServeOneWinnerOf64(t *testing.T) {
	t.Parallel()
	p := startServe(t, t.TempDir())
	c := newClient(t, p.url)
	for round := range 5 {
		key := fmt.Sprintf("policy/race-%d", round)
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			winners []string
			refused int
		)
		gate := make(chan struct{})
		for i := range 64 {
			wg.Go(func() {
				<-gate
				s := fmt.Sprintf("s-%d-%d", round, i)
				_, err := c.Acquire(context.Background(), holdfast.AcquireRequest{Keys: []string{key}, Owner: holdfast.Owner{Session: s, Name: s}})
				mu.Lock()
				defer mu.Unlock()
				var locked *holdfast.LockedError
				switch {
				case err == nil:
					winners = append(winners, s)
				case errors.As(err, &locked):
					refused++
				default:
					t.Errorf("acquire: %v", err)
				}
			})
		}
		close(gate)
		wg.Wait()
		if len(winners) != 1 || refused != 63 {
			t.Fatalf("round %d: %d granted %v, %d refused; want exactly 1 and 63", round, len(winners), winners, refused)
		}
	}
}

// A session whose idle timeout runs out while holdfast serve is down keeps
// its lock after the restart for the restart grace, so that its client's
// heartbeat, refused meanwhile, can still come; with the grace off the
// session has ended when the server is back.
func TestServeRestartGrace(t *testing.T) {
	t.Parallel()
	const idle = 5 * time.Second
	for _, tc := range []struct {
		grace string
		kept  bool
	}{
		{"30s", true},
		{"0s", false},
	} {
		t.Run("grace="+tc.grace, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			p := startServe(t, dir)
			ctx := t.Context()
			_, err := newClient(t, p.url).Acquire(ctx, holdfast.AcquireRequest{Keys: []string{"policy/1"},
				Owner: holdfast.Owner{Session: "s-ada", User: "ada"}, IdleTimeout: holdfast.Duration(idle)})
			if err != nil {
				t.Fatal(err)
			}
			acquired := time.Now()
			p.kill()
			time.Sleep(time.Until(acquired.Add(idle + time.Second))) // down past the idle timeout

			p = startServe(t, dir, "--restart-grace", tc.grace)
			c := newClient(t, p.url)
			_, err = c.Acquire(ctx, holdfast.AcquireRequest{Keys: []string{"policy/1"}, Owner: holdfast.Owner{Session: "s-bob"}})
			if tc.kept != errors.Is(err, holdfast.ErrLocked) {
				t.Fatalf("s-bob's acquire after the restart: %v, want it refused: %t", err, tc.kept)
			}
			hb, err := c.Heartbeat(ctx, holdfast.HeartbeatRequest{Session: "s-ada"})
			if !tc.kept {
				if lost, ok := errors.AsType[*holdfast.LockLostError](err); !ok || lost.Reason != holdfast.LostSessionExpired {
					t.Fatalf("s-ada's heartbeat after the restart: %v, want its session expired", err)
				}
				return
			}
			if err != nil || hb.Session.Locks != 1 {
				t.Fatalf("s-ada's heartbeat after the restart: %+v, %v; want its session live with its lock", hb, err)
			}
		})
	}
}

// TestServeTokenFloorAfterRestore restores a copy of a stopped server's
// directory: the copy grants again a token granted after it was taken,
// unless the server starts with --token-floor at that token.
func TestServeTokenFloorAfterRestore(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := t.TempDir()
	acquire := func(p *serveProcess, key, session string) uint64 {
		t.Helper()
		res, err := newClient(t, p.url).Acquire(ctx, holdfast.AcquireRequest{Keys: []string{key}, Owner: holdfast.Owner{Session: session}})
		if err != nil {
			t.Fatalf("%s acquiring %s: %v", session, key, err)
		}
		return res.Locks[0].Token
	}
	copyDir := func(name string) string {
		t.Helper()
		to := t.TempDir() + "/" + name
		if out, err := exec.Command("cp", "-a", dir, to).CombinedOutput(); err != nil {
			t.Fatalf("cp -a: %v\n%s", err, out)
		}
		return to
	}

	p := startServe(t, dir)
	acquire(p, "policy/1", "s-bob")
	p.kill()
	plain, floored := copyDir("plain"), copyDir("floored") // the backups
	p = startServe(t, dir)
	after := acquire(p, "invoice/555", "s-bob") // granted after the backup
	p.kill()

	p = startServe(t, plain)
	if again := acquire(p, "invoice/555", "s-ada"); again != after {
		t.Fatalf("the restored copy granted token %d; want %d again, as a restore does without a floor", again, after)
	}
	p.kill()

	floor := fmt.Sprint(after)
	p = startServe(t, floored, "--token-floor", floor)
	if tok := acquire(p, "invoice/555", "s-ada"); tok <= after {
		t.Fatalf("with --token-floor %s the restored copy granted token %d, want above it", floor, tok)
	}
	if out := p.output(); !strings.Contains(out, "raised the fencing-token counter") {
		t.Fatalf("the server did not say it raised the counter:\n%s", out)
	}
	p.kill()

	// Left in the configuration, the floor moves nothing at the next start.
	p = startServe(t, floored, "--token-floor", floor)
	if tok := acquire(p, "invoice/556", "s-ada"); tok <= after+1 {
		t.Fatalf("after a second start with the same floor: token %d, want above %d", tok, after+1)
	}
	if out := p.output(); !strings.Contains(out, "already at or above token_floor") {
		t.Fatalf("the server did not say the counter was already above the floor:\n%s", out)
	}
}
