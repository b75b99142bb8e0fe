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
		func(s store.Store, until <-chan struct{}) {
			s.(*Store).syncWait = func(b *pebble.Batch) error {
				<-until
				return b.SyncWait()
			}
		})
}
