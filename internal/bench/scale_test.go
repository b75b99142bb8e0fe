package bench

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// waitSwept goes by the store's lock records, which count expired locks
// until the sweep removes them, and waits until only the others are left.
func TestWaitSweptWaitsForTheLockRecords(t *testing.T) {
	t.Parallel()
	var polls atomic.Int64
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := 7 - polls.Add(1) // 6, 5, 4, …
		fmt.Fprintf(w, "# TYPE holdfast_store_records gauge\nholdfast_store_records{kind=\"lost\"} 9\n%s%d\n", lockRecordsMetric, n)
	}))
	defer hs.Close()
	left, err := waitSwept(context.Background(), hs.URL, 4)
	if err != nil || left != 0 || polls.Load() != 3 {
		t.Fatalf("waitSwept = %d, %v after %d polls; want 0 after 3", left, err, polls.Load())
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
