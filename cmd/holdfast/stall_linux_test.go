package main

import (
	"context"
	"errors"
	"fmt"
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
)

// TestServeStalledDisk freezes the filesystem under holdfast serve's
// embedded store (fsfreeze on a loop-mounted ext4 image: every write and
// fdatasync to it blocks until it is thawed). Within --store-timeout the
// callers waiting for the disk, and those that come after, get 503
// unavailable with Retry-After saying the disk stalled, and /readyz is
// 503; once the filesystem is thawed the same process serves again, the
// grant made before still held, and an event stream open during the
// stall ends, and once resumed delivers the grants answered 503 that
// committed. It needs root, a loop device, mkfs.ext4
// and fsfreeze: without them it skips, or fails under CI=true (.ci/run
// installs the tools, and runs as root).
func TestServeStalledDisk(t *testing.T) {
	t.Parallel()
	mnt := loopMount(t)
	node := startServe(t, filepath.Join(mnt, "data"), "--store-timeout", "2s", "--log-level", "warn")
	c := newClient(t, node.url)
	streamCtx, endStream := context.WithTimeout(context.Background(), 2*time.Minute)
	defer endStream()
	events, err := c.Events(streamCtx, "policy/", "")
	if err != nil {
		t.Fatal(err)
	}
	defer events.Close()
	if _, err := acquire(c, "policy/1", "before"); err != nil {
		t.Fatal(err)
	}
	if !events.Next() || events.Entry().Lock.Key != "policy/1" {
		t.Fatalf("event stream: %+v, %v; want the grant of policy/1", events.Entry(), events.Err())
	}

	// Should this process be killed while the filesystem is frozen, a
	// process of its own thaws it a minute later: else the filesystem,
	// and the server blocked in it, would stay so.
	watchdog := exec.Command("sh", "-c", `sleep 60; fsfreeze --unfreeze "$1"`, "sh", mnt)
	watchdog.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := watchdog.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		syscall.Kill(-watchdog.Process.Pid, syscall.SIGKILL) // its sleep too
		watchdog.Wait()
	}()
	runTool(t, "fsfreeze", "--freeze", mnt)
	thawed := false
	thaw := func() {
		if !thawed {
			thawed = true
			runTool(t, "fsfreeze", "--unfreeze", mnt)
		}
	}
	defer thaw()
	// Bounded, so that a server that waits for the disk forever fails
	// the test rather than hangs it.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, 50)
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = c.Acquire(ctx, holdfast.AcquireRequest{Keys: []string{fmt.Sprintf("policy/%d", i+2)},
				Owner: holdfast.Owner{Session: fmt.Sprintf("during-%d", i)}})
		})
	}
	wg.Wait()
	for i, err := range errs {
		var un *holdfast.UnavailableError
		if !errors.As(err, &un) || un.RetryAfter <= 0 || !strings.Contains(err.Error(), "the disk has not completed a write") {
			t.Errorf("acquire %d with the disk frozen: %v, want 503 unavailable with Retry-After, saying the disk stalled", i, err)
		}
	}
	if code, h := get(node.url + "/readyz"); code != http.StatusServiceUnavailable || h.Get("Retry-After") == "" {
		t.Errorf("/readyz with the disk frozen: %d, Retry-After %q; want 503 with Retry-After", code, h.Get("Retry-After"))
	}

	// The stream cannot tell whether those 503s committed: it ends, and
	// its client resumes once the store serves again.
	ended := make(chan bool, 1)
	go func() { ended <- !events.Next() }()
	select {
	case ok := <-ended:
		if !ok {
			t.Fatalf("event stream during the stall: %+v, want it ended", events.Entry())
		}
	case <-ctx.Done():
		t.Fatal("the event stream was still open after the acquires answered 503, waiting for entries it will never get")
	}

	thaw()
	servesAgain(t, node, c, "policy/free")
	// Those that committed once the disk allowed are held, and the
	// resumed stream delivers their grants, before policy/free's.
	page, err := c.Locks(ctx, holdfast.LockQuery{Prefix: "policy/"})
	if err != nil {
		t.Fatal(err)
	}
	held := map[string]bool{}
	for _, l := range page.Locks {
		if l.Owner.Session != "before" && l.Key != "policy/free" {
			held[l.Key] = true
		}
	}
	if len(held) == 0 {
		t.Fatalf("no acquire answered 503 committed once the disk was thawed (%+v): the test shows nothing", page.Locks)
	}
	resumed, err := c.Events(streamCtx, "policy/", events.LastEventID())
	if err != nil {
		t.Fatal(err)
	}
	defer resumed.Close()
	for resumed.Next() {
		e := resumed.Entry()
		if e.Lock.Key == "policy/free" {
			break
		}
		if e.Event == holdfast.EventAcquired {
			delete(held, e.Lock.Key)
		}
	}
	if len(held) > 0 {
		t.Errorf("the resumed event stream did not deliver the grants of %v (%v)", held, resumed.Err())
	}
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(node.output(), "serving again"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the server's log does not say the stall ended:\n%s", node.output())
		}
	}
}

// loopMount mounts a new ext4 image of its own and returns where. When
// this machine cannot, it skips the test, or fails it under CI=true.
func loopMount(t *testing.T) string {
	t.Helper()
	cannot := func(format string, args ...any) {
		t.Helper()
		if os.Getenv("CI") == "true" {
			t.Fatalf("the frozen-disk test must run in CI: "+format, args...)
		}
		t.Skipf(format, args...)
	}
	if os.Geteuid() != 0 {
		cannot("mounting a filesystem to freeze needs root")
	}
	for _, tool := range []string{"mkfs.ext4", "mount", "umount", "fsfreeze"} {
		if _, err := exec.LookPath(tool); err != nil {
			cannot("%s is not installed: %v", tool, err)
		}
	}
	dir := t.TempDir()
	img, mnt := filepath.Join(dir, "disk.img"), filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 64<<20); err != nil {
		t.Fatal(err)
	}
	runTool(t, "mkfs.ext4", "-q", "-F", img)
	if out, err := exec.Command("mount", "-o", "loop", img, mnt).CombinedOutput(); err != nil {
		cannot("cannot loop-mount a filesystem here: %v: %s", err, out)
	}
	t.Cleanup(func() {
		exec.Command("fsfreeze", "--unfreeze", mnt).Run() // in case the test stopped while frozen
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", mnt, err, out)
		}
	})
	return mnt
}

func runTool(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
}
