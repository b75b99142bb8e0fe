package pebblestore

import (
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/holdfast/holdfast/internal/embeddedtest"
	"github.com/holdfast/holdfast/store"
)

func TestStalledDiskFailsClosedUntilItCompletes(t *testing.T) {
	embeddedtest.StalledDiskFailsClosedUntilItCompletes(t, openStore,
		func(dir string) (store.Store, error) {
			return Open(dir, Config{Logger: quietLog, Timeout: time.Second})
		},
		beforeSync)
}

func TestCallerWhoLeavesIsAnsweredWithTheCommit(t *testing.T) {
	embeddedtest.CallerWhoLeavesIsAnsweredWithTheCommit(t, openStore, beforeSync)
}

// beforeSync makes every later wait for Pebble's sync call hook first.
func beforeSync(s store.Store, hook func()) {
	s.(*Store).syncWait = func(b *pebble.Batch) error {
		hook()
		return b.SyncWait()
	}
}
