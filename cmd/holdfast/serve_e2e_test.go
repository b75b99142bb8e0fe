package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
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

// startServe runs holdfast serve on dir and waits until it is ready.
func startServe(t *testing.T, dir string) *serveProcess {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	p := &serveProcess{url: "http://" + addr, stderr: &strings.Builder{}}
	p.cmd = exec.Command(binary, "serve", "--listen", addr, "--store", dir)
	p.cmd.Env = append(os.Environ(), "HOLDFAST_TOKENS=", "HOLDFAST_CONFIG=")
	p.cmd.Stderr = &lockedWriter{b: p.stderr}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.kill() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(p.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("holdfast serve not ready after 30s: %v\n%s", err, p.stderr.String())
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

// TestServeKill9KeepsAcknowledgedLocks kills the server with SIGKILL under
// concurrent load, restarts it on the same data directory, and checks that
// every acknowledged grant is still held with its token, every acknowledged
// release stays released, and tokens never go backwards.
func TestServeKill9KeepsAcknowledgedLocks(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	const workers, rounds = 16, 3
	type outcome struct {
		held    bool   // the last acknowledged operation left the key held
		token   uint64 // of that grant
		unknown bool   // an operation was in flight at the kill: either way is right
	}
	var maxToken uint64
	for round := range rounds {
		p := startServe(t, dir)
		c := newClient(t, p.url)
		ctx := context.Background()

		// Everything held before this round must have survived the last kill.
		page, err := c.Locks(ctx, holdfast.LockQuery{Prefix: "crash", Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range page.Locks {
			if l.Token > maxToken {
				t.Fatalf("round %d: token %d is above every token acknowledged before (%d)", round, l.Token, maxToken)
			}
		}

		var (
			mu       sync.Mutex
			outcomes = map[string]outcome{}
			acks     int
		)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				session := fmt.Sprintf("s-%d-%d", round, w)
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					key := fmt.Sprintf("crash/%d/%d/%d", round, w, i%8)
					mu.Lock()
					prev := outcomes[key]
					outcomes[key] = outcome{held: prev.held, token: prev.token, unknown: true}
					mu.Unlock()
					var next outcome
					if !prev.held {
						res, err := c.Acquire(ctx, holdfast.AcquireRequest{Keys: []string{key}, Owner: holdfast.Owner{Session: session}})
						if err != nil {
							return // the server is gone; the outcome stays unknown
						}
						next = outcome{held: true, token: res.Locks[0].Token}
					} else {
						if _, err := c.Release(ctx, holdfast.ReleaseRequest{Session: session, Keys: []string{key}}); err != nil {
							return
						}
						next = outcome{}
					}
					mu.Lock()
					outcomes[key] = next
					acks++
					if next.token > maxToken {
						maxToken = next.token
					}
					mu.Unlock()
				}
			})
		}
		// Let the load run, then kill at an arbitrary moment.
		time.Sleep(time.Duration(200+round*150) * time.Millisecond)
		p.kill()
		close(stop)
		wg.Wait()
		if acks == 0 {
			t.Fatalf("round %d: no operation was acknowledged before the kill\n%s", round, p.stderr.String())
		}

		p = startServe(t, dir)
		c = newClient(t, p.url)
		for key, want := range outcomes {
			if want.unknown {
				continue
			}
			page, err := c.Locks(ctx, holdfast.LockQuery{Key: key})
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case want.held && (len(page.Locks) != 1 || page.Locks[0].Token != want.token):
				t.Fatalf("round %d: %s was acknowledged held with token %d; after kill -9 and restart: %+v", round, key, want.token, page.Locks)
			case !want.held && len(page.Locks) != 0:
				t.Fatalf("round %d: %s was acknowledged released; after kill -9 and restart it is held: %+v", round, key, page.Locks)
			}
		}
		res, err := c.Acquire(ctx, holdfast.AcquireRequest{Keys: []string{fmt.Sprintf("crash/after/%d", round)}, Owner: holdfast.Owner{Session: "probe"}})
		if err != nil {
			t.Fatal(err)
		}
		if res.Locks[0].Token <= maxToken {
			t.Fatalf("round %d: first token after restart is %d, not above %d acknowledged before the kill", round, res.Locks[0].Token, maxToken)
		}
		maxToken = res.Locks[0].Token
		t.Logf("round %d: %d operations acknowledged before kill -9, all found after restart", round, acks)
		p.kill()
	}
}
