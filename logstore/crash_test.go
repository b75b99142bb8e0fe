package logstore_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/holdfast/holdfast/logstore"
	"github.com/holdfast/holdfast/store"
)

// crashDirEnv makes the test binary a writer that never stops by itself:
// TestAcknowledgedWritesSurviveSIGKILL runs it and kills it mid-load.
const crashDirEnv = "HOLDFAST_LOGSTORE_CRASH_DIR"

const crashWriters = 8

func crashKey(w, i int) string { return fmt.Sprintf("k/%d/%d", w, i) }

// crashChild runs the writer when the environment asks for it, and reports
// whether it did. Its store rotates segments and writes checkpoints every
// few dozen KiB, so the kill comes amid them too. Step i of writer w puts crashKey(w, i) with a new token
// and, when i is odd, deletes crashKey(w, i-1) in the same transaction;
// after each acknowledged step it prints "w i token".
func crashChild() bool {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		return false
	}
	s, err := logstore.OpenChurning(dir, logstore.Config{Logger: quiet})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var out sync.Mutex
	var wg sync.WaitGroup
	for w := range crashWriters {
		wg.Go(func() {
			for i := 0; ; i++ {
				var token uint64
				err := s.Update(context.Background(), func(tx store.Tx) error {
					token, _ = tx.NextToken()
					if i%2 == 1 {
						tx.DeleteLock(crashKey(w, i-1), "s")
					}
					return tx.PutLock(store.Lock{Key: crashKey(w, i), Session: "s", Token: token})
				})
				if err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(2)
				}
				out.Lock()
				fmt.Printf("%d %d %d\n", w, i, token)
				out.Unlock()
			}
		})
	}
	wg.Wait()
	return true
}

// Not parallel: between fork and exec a child holds copies of the parent's
// open files, directory locks of other tests included, so a test that closes
// and reopens a store at that moment would find its directory "in use".
// Sequential tests finish before parallel ones start.
func TestAcknowledgedWritesSurviveSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a child process under load")
	}
	dir := t.TempDir()
	for round := range 3 { // each round also recovers what the previous kill left
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashDirEnv+"="+dir)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		tokens := make(map[string]uint64) // acknowledged key → token
		var maxToken uint64
		lines := bufio.NewScanner(stdout)
		for n := 0; n < 4000 && lines.Scan(); n++ {
			var w, i int
			var tok uint64
			if _, err := fmt.Sscan(lines.Text(), &w, &i, &tok); err != nil {
				t.Fatalf("child said %q: %v", lines.Text(), err)
			}
			tokens[crashKey(w, i)] = tok
			maxToken = max(maxToken, tok)
		}
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		if len(tokens) < 4000 {
			t.Fatalf("round %d: child acknowledged only %d steps; stderr: %s", round, len(tokens), stderr.String())
		}

		s := open(t, dir, nil)
		err = s.Update(context.Background(), func(tx store.Tx) error {
			for key, tok := range tokens {
				var w, i int
				fmt.Sscanf(key, "k/%d/%d", &w, &i)
				l, ok, _ := tx.Lock(key, "s")
				switch {
				case ok && l.Token != tok:
					t.Errorf("round %d: %s has token %d, acknowledged %d", round, key, l.Token, tok)
				case !ok && i%2 == 1:
					t.Errorf("round %d: acknowledged %s is gone", round, key)
				case !ok:
					// Only the next step deletes it, and then that whole
					// step is there.
					if _, next, _ := tx.Lock(crashKey(w, i+1), "s"); !next {
						t.Errorf("round %d: acknowledged %s is gone", round, key)
					}
				}
				if i%2 == 1 {
					if _, ok, _ := tx.Lock(crashKey(w, i-1), "s"); ok {
						t.Errorf("round %d: acknowledged delete of %s undone", round, crashKey(w, i-1))
					}
				}
			}
			next, _ := tx.NextToken()
			if next <= maxToken {
				t.Errorf("round %d: token %d after restart, %d was acknowledged", round, next, maxToken)
			}
			// Start the next round's writers on fresh keys.
			for _, l := range must(tx.Locks(store.LockQuery{})) {
				tx.DeleteLock(l.Key, l.Session)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
