package logstore

import (
	"os"
	"testing"
	"time"

	"github.com/holdfast/holdfast/internal/embeddedtest"
	"github.com/holdfast/holdfast/store"
)

func TestStalledDiskFailsClosedUntilItCompletes(t *testing.T) {
	embeddedtest.StalledDiskFailsClosedUntilItCompletes(t,
		func(dir string, now func() time.Time) (store.Store, error) {
			return Open(dir, Config{Now: now, Logger: quietLog})
		},
		func(dir string) (store.Store, error) {
			return Open(dir, Config{Logger: quietLog, Timeout: time.Second})
		},
		func(s store.Store, until <-chan struct{}) {
			s.(*Store).syncFile = func(f *os.File) error {
				<-until
				return fdatasync(f)
			}
		})
}
