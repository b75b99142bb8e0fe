package embeddedtest

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

	"github.com/holdfast/holdfast/store"
)

// Crash is how a store's test binary becomes the writer that
// AcknowledgedWritesSurviveSIGKILL kills mid-load.
type Crash struct {
	// Env names the environment variable that holds the writer's
	// directory; the store's TestMain calls Child first.
	Env string
	// Open opens the writer's store in dir.
	Open func(dir string) (store.Store, error)
	// Steps is how many acknowledged steps the test reads before the kill:
	// enough for the store to be amid its own background work.
	Steps int
}

const crashWriters = 8

func crashKey(w, i int) string { return fmt.Sprintf("k/%d/%d", w, i) }

// Child runs the writer when the environment asks for it, and reports
// whether it did. It never stops by itself. Step i of writer w puts
// crashKey(w, i) with a new token and, when i is odd, deletes
// crashKey(w, i-1) in the same transaction; after each acknowledged step
// it prints "w i token".
func (c Crash) Child() bool {
	dir := os.Getenv(c.Env)
	if dir == "" {
		return false
	}
	s, err := c.Open(dir)
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

// AcknowledgedWritesSurviveSIGKILL runs the test binary as c's writer,
// kills it mid-load, and checks with open that every acknowledged step is
// there and no token goes back; three rounds, each also recovering what
// the previous kill left.
//
// Not parallel: between fork and exec a child holds copies of the parent's
// open files, directory locks of other tests included, so a test that closes
// and reopens a store at that moment would find its directory "in use".
// Sequential tests finish before parallel ones start.
func AcknowledgedWritesSurviveSIGKILL(t *testing.T, c Crash, open Open) {
	if testing.Short() {
		t.Skip("runs a child process under load")
	}
	dir := t.TempDir()
	for round := range 3 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), c.Env+"="+dir)
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
		for n := 0; n < c.Steps && lines.Scan(); n++ {
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
		if len(tokens) < c.Steps {
			t.Fatalf("round %d: child acknowledged only %d steps; stderr: %s", round, len(tokens), stderr.String())
		}

		s := open.MustOpen(t, dir, nil)
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
			locks, err := tx.Locks(store.LockQuery{})
			for _, l := range locks {
				tx.DeleteLock(l.Key, l.Session)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
	}
}
