package server

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// A store that does not answer must not hold a scrape up: its ping is
// given up and the store reported down.
func TestStoreUpDoesNotWaitForAHungStore(t *testing.T) {
	t.Parallel()
	m := NewMetrics()
	m.storeUp.timeout = time.Millisecond
	m.storeUp.watch(func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	})
	w := httptest.NewRecorder()
	m.serveHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	if text := w.Body.String(); !strings.Contains(text, "holdfast_store_up 0\n") {
		t.Errorf("want holdfast_store_up 0 for a store that does not answer, got\n%s", text)
	}
}
