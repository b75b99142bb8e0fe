package logstore_test

import (
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/internal/embeddedtest"
	"github.com/holdfast/holdfast/logstore"
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
	return logstore.Open(dir, logstore.Config{Now: now, Logger: quiet})
}

func open(t testing.TB, dir string, now func() time.Time) *logstore.Store {
	t.Helper()
	return embeddedtest.Open(openStore).MustOpen(t, dir, now).(*logstore.Store)
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, embeddedtest.Harness(openStore))
}

func BenchmarkStore(b *testing.B) {
	h := embeddedtest.Harness(openStore)
	h.Syncs = func(s store.Store) (uint64, time.Duration) {
		st := s.(*logstore.Store).Syncs()
		return st.Syncs, st.Time
	}
	storetest.Bench(b, h)
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

// Under concurrent load, whose commits share the log's writes, every
// event reaches a subscriber, in the order of the audit IDs.
func TestConcurrentCommitsArePublishedInOrder(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir(), time.Now)
	defer s.Close()
	m, err := holdfast.New(s, holdfast.Config{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	events, cancel := m.Subscribe("")
	defer cancel()
	const callers, each = 32, 50
	var wg sync.WaitGroup
	defer wg.Wait()
	for c := range callers {
		wg.Go(func() {
			for i := range each {
				req := holdfast.AcquireRequest{Keys: []string{fmt.Sprintf("order/%d-%d", c, i)}, Owner: holdfast.Owner{Session: fmt.Sprintf("s-%d", c)}}
				if _, err := m.Acquire(t.Context(), req); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	var last uint64
	for n := range callers * each {
		select {
		case e, ok := <-events:
			if !ok {
				t.Fatalf("the subscription ended after %d events", n)
			}
			if e.ID <= last {
				t.Fatalf("event %d has ID %d, after %d", n, e.ID, last)
			}
			last = e.ID
		case <-time.After(10 * time.Second):
			t.Fatalf("%d events of %d came", n, callers*each)
		}
	}
}
