package pebblestore_test

import (
	"testing"

	"github.com/holdfast/holdfast/internal/embeddedtest"
	"github.com/holdfast/holdfast/pebblestore"
	"github.com/holdfast/holdfast/store"
)

var crash = embeddedtest.Crash{
	Env: "HOLDFAST_PEBBLESTORE_CRASH_DIR",
	Open: func(dir string) (store.Store, error) {
		return pebblestore.Open(dir, pebblestore.Config{Logger: quiet})
	},
	Steps: 400,
}

func TestAcknowledgedWritesSurviveSIGKILL(t *testing.T) {
	embeddedtest.AcknowledgedWritesSurviveSIGKILL(t, crash, openStore)
}
