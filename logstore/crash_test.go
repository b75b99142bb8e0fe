package logstore_test

import (
	"testing"

	"github.com/holdfast/holdfast/internal/embeddedtest"
	"github.com/holdfast/holdfast/logstore"
	"github.com/holdfast/holdfast/store"
)

// crash's writer rotates segments and writes checkpoints every few dozen
// KiB, so the kill comes amid them too.
var crash = embeddedtest.Crash{
	Env: "HOLDFAST_LOGSTORE_CRASH_DIR",
	Open: func(dir string) (store.Store, error) {
		return logstore.OpenChurning(dir, logstore.Config{Logger: quiet})
	},
	Steps: 4000,
}

func TestAcknowledgedWritesSurviveSIGKILL(t *testing.T) {
	embeddedtest.AcknowledgedWritesSurviveSIGKILL(t, crash, openStore)
}
