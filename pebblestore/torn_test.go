package pebblestore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/holdfast/holdfast/pebblestore"
	"github.com/holdfast/holdfast/store"
)

// TestTornLogTailRecoversAPrefix damages the end of the write-ahead log as a
// crash mid-write would, and checks that reopening gives a prefix of the
// commits, each whole, or refuses to open; never half a commit.
func TestTornLogTailRecoversAPrefix(t *testing.T) {
	t.Parallel()
	damages := map[string]func(t *testing.T, path string){
		"truncated": func(t *testing.T, path string) {
			info, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(path, info.Size()-37); err != nil {
				t.Fatal(err)
			}
		},
		"garbage appended": func(t *testing.T, path string) {
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.Write([]byte("\x07\x00\x13torn write of a record that never finished"))
			f.Close()
		},
	}
	for name, damage := range damages {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			const commits = 50
			s := open(t, dir, nil)
			for i := range commits {
				err := s.Update(context.Background(), func(tx store.Tx) error {
					tx.PutLock(store.Lock{Key: fmt.Sprintf("p/%d/a", i), Session: "s", Note: "first half"})
					return tx.PutLock(store.Lock{Key: fmt.Sprintf("p/%d/b", i), Session: "s", Note: "second half"})
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			s.Close()

			logs, _ := filepath.Glob(filepath.Join(dir, "pebble", "*.log"))
			if len(logs) == 0 {
				t.Fatal("no write-ahead log to damage")
			}
			newest := logs[len(logs)-1]
			for _, l := range logs {
				if info, err := os.Stat(l); err == nil && info.Size() > 0 {
					newest = l
				}
			}
			damage(t, newest)

			s, err := pebblestore.Open(dir, pebblestore.Config{Logger: quiet})
			if err != nil {
				t.Logf("refused to open a damaged log: %v", err)
				return
			}
			defer s.Close()
			s.View(context.Background(), func(tx store.ReadTx) error {
				present := 0
				for i := range commits {
					_, a, _ := tx.Lock(fmt.Sprintf("p/%d/a", i), "s")
					_, b, _ := tx.Lock(fmt.Sprintf("p/%d/b", i), "s")
					if a != b {
						t.Errorf("commit %d is half there (a %v, b %v)", i, a, b)
					}
					if a && present != i {
						t.Errorf("commit %d is there but commit %d is not", i, present)
					}
					if a {
						present++
					}
				}
				t.Logf("%d of %d commits recovered", present, commits)
				return nil
			})
		})
	}
}
