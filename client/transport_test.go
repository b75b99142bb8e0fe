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

	"github.com/holdfast/holdfast/client"
)

// Concurrent callers of a client built without an HTTPClient reuse their
// connections instead of opening one per call.
func TestDefaultClientReusesConnections(t *testing.T) {
	t.Parallel()
	url, opened := countingServer(t)
	c := newClient(t, url, "")

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

// Clients built without an HTTPClient share one connection pool: taking
// turns, ten of them need about one connection, not one each.
func TestDefaultClientsShareConnections(t *testing.T) {
	t.Parallel()
	url, opened := countingServer(t)
	const clients = 10
	cs := make([]*client.Client, clients)
	for i := range cs {
		cs[i] = newClient(t, url, "")
	}
	for range 5 {
		for _, c := range cs {
			if err := c.Ping(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A connection may be handed back to the pool a moment after its
	// answer is read, so the next call can still dial a second one.
	if n := opened.Load(); n > clients/2 {
		t.Errorf("%d connections opened by %d clients taking turns, want one or two", n, clients)
	}
}

// countingServer answers every request as GET /readyz does and counts the
// connections opened to it.
func countingServer(t *testing.T) (url string, opened *atomic.Int64) {
	t.Helper()
	opened = new(atomic.Int64)
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
	return hs.URL, opened
}
