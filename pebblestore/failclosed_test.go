package pebblestore

import (
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/holdfast/holdfast/internal/embeddedtest"
	"github.com/holdfast/holdfast/store"
)

func TestFailedWriteFailsClosed(t *testing.T) {
	embeddedtest.FailedWriteFailsClosed(t, openStore, func(s store.Store, err error) {
		s.(*Store).append = func(*pebble.Batch) error { return err }
	})
}
