package pebblestore_test

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/holdfast/holdfast/internal/embeddedtest"
	"github.com/holdfast/holdfast/pebblestore"
	"github.com/holdfast/holdfast/store"
	"github.com/holdfast/holdfast/store/storetest"
)

func TestMain(m *testing.M) {
	if crash.Child() {
		return
	}
	goleak.VerifyTestMain(m)
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func openStore(dir string, now func() time.Time) (store.Store, error) {
	return pebblestore.Open(dir, pebblestore.Config{Now: now, Logger: quiet})
}

func open(t testing.TB, dir string, now func() time.Time) *pebblestore.Store {
	t.Helper()
	return embeddedtest.Open(openStore).MustOpen(t, dir, now).(*pebblestore.Store)
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, embeddedtest.Harness(openStore))
}

func BenchmarkStore(b *testing.B) {
	storetest.Bench(b, embeddedtest.Harness(openStore))
}

func TestEveryRecordAndCounterSurvivesReopen(t *testing.T) {
	embeddedtest.EveryRecordAndCounterSurvivesReopen(t, openStore)
}

func TestFailedUpdateIsNotWritten(t *testing.T) { embeddedtest.FailedUpdateIsNotWritten(t, openStore) }

func TestDirectoryHeldByAnotherStoreIsRefused(t *testing.T) {
	embeddedtest.DirectoryHeldByAnotherStoreIsRefused(t, openStore)
}

func TestClosedStoreIsUnavailable(t *testing.T) { embeddedtest.ClosedStoreIsUnavailable(t, openStore) }

func TestConcurrentWritersAllDurable(t *testing.T) {
	embeddedtest.ConcurrentWritersAllDurable(t, openStore)
}
