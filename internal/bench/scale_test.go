package bench

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// watchSweep goes by the store's lock records, which count expired locks
// until the sweep removes them, and waits until only the others and the
// live locks are left.
func TestWatchSweepWaitsForTheLockRecords(t *testing.T) {
	t.Parallel()
	var polls atomic.Int64
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := 7 - polls.Add(1) // 6, 5, 4, …
		fmt.Fprintf(w, "# TYPE holdfast_store_records gauge\nholdfast_store_records{kind=\"lost\"} 9\n%s%d\n", lockRecordsMetric, n)
	}))
	defer hs.Close()
	w := watchSweep(context.Background(), hs.URL, 3, oneLive, nil)
	if w.err != nil || w.left != 0 || w.at.IsZero() || polls.Load() != 3 {
		t.Fatalf("watchSweep = %+v after %d polls; want done after 3", w, polls.Load())
	}
}

// oneLive counts one live lock, which watchSweep leaves out.
func oneLive(context.Context) (int, error) { return 1, nil }

// Told to stop, watchSweep says how many more lock records are left.
func TestWatchSweepStops(t *testing.T) {
	t.Parallel()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s1e+06\n", lockRecordsMetric) // how the text format writes a million
	}))
	defer hs.Close()
	stop := make(chan struct{})
	close(stop)
	if w := watchSweep(context.Background(), hs.URL, 10, oneLive, stop); w.err != nil || w.left != 1_000_000-11 || !w.at.IsZero() {
		t.Fatalf("watchSweep after stop = %+v; want %d left", w, 1_000_000-11)
	}
}

func TestStoredLocksWithoutTheMetric(t *testing.T) {
	t.Parallel()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "go_goroutines 5")
	}))
	defer hs.Close()
	if n, err := storedLocks(context.Background(), hs.URL); err == nil {
		t.Fatalf("storedLocks from a server without the metric = %d, want an error", n)
	}
}
