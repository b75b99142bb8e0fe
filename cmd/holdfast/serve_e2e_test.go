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
