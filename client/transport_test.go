package client_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
)

// Concurrent callers of a client built without an HTTPClient reuse their
// connections instead of opening one per call.
func TestDefaultClientReusesConnections(t *testing.T) {
	t.Parallel()
	var opened atomic.Int64
	hs := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"status":"ready"}`)
	}))
	hs.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	hs.Start()
	t.Cleanup(hs.Close)
	c := newClient(t, hs.URL, "")

	const callers = 32
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for range 100 {
				if err := c.Ping(context.Background()); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	// About one each: a few more when a dial races a connection coming
	// back to the pool. Go's default of two idle connections opens several
	// times as many.
	if n := opened.Load(); n > 3*callers {
		t.Errorf("%d connections opened by %d concurrent callers, want about one each", n, callers)
	}
}
