package logstore

import (
	"os"
	"testing"
	"time"

	"github.com/holdfast/holdfast/internal/embeddedtest"
	"github.com/holdfast/holdfast/store"
)

func openQuiet(dir string, now func() time.Time) (store.Store, error) {
	return Open(dir, Config{Now: now, Logger: quietLog})
}

func TestStalledDiskFailsClosedUntilItCompletes(t *testing.T) {
	embeddedtest.StalledDiskFailsClosedUntilItCompletes(t, openQuiet,
		func(dir string) (store.Store, error) {
			return Open(dir, Config{Logger: quietLog, Timeout: time.Second})
		},
		beforeSync)
}

func TestCallerWhoLeavesIsAnsweredWithTheCommit(t *testing.T) {
	embeddedtest.CallerWhoLeavesIsAnsweredWithTheCommit(t, openQuiet, beforeSync)
}

// beforeSync makes every later fdatasync of s call hook first.
func beforeSync(s store.Store, hook func()) {
	s.(*Store).syncFile = func(f *os.File) error {
		hook()
		return fdatasync(f)
	}
}
