package server_test

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/memstore"
	"github.com/holdfast/holdfast/server"
)

// TestFieldLimits sends every field at one past its limit and wants a 400
// naming the field, never a grant and never a 5xx.
func TestFieldLimits(t *testing.T) {
	t.Parallel()
	h := newHarness(t, options{})
	long := func(n int) string { return strings.Repeat("k", n) }
	owner := func(session, name string) map[string]any { return map[string]any{"session": session, "name": name} }
	manyOps := make([]any, server.MaxBatchOps+1)
	for i := range manyOps {
		manyOps[i] = map[string]any{"op": "heartbeat", "body": map[string]any{"session": "s"}}
	}
	manyKeys := make([]string, holdfast.MaxKeys+1)
	for i := range manyKeys {
		manyKeys[i] = fmt.Sprintf("k/%d", i)
	}
	for _, tc := range []struct {
		name, path string
		body       map[string]any
		field      string
	}{
		{"key of 513 bytes", "/v1/locks/acquire", map[string]any{"keys": []string{long(513)}, "owner": owner("s", "")}, "keys[0]"},
		{"second key too long", "/v1/locks/acquire", map[string]any{"keys": []string{"a/1", "a/" + long(511)}, "owner": owner("s", "")}, "keys[1]"},
		{"session of 257 bytes", "/v1/locks/acquire", map[string]any{"keys": []string{"a/1"}, "owner": owner(long(257), "")}, "owner.session"},
		{"name of 201 bytes", "/v1/locks/acquire", map[string]any{"keys": []string{"a/1"}, "owner": owner("s", long(201))}, "owner.name"},
		{"note of 1001 bytes", "/v1/locks/acquire", map[string]any{"keys": []string{"a/1"}, "owner": owner("s", ""), "note": long(1001)}, "note"},
		{"release of 1001 keys", "/v1/locks/release", map[string]any{"session": "s", "keys": manyKeys}, "keys"},
		{"renew of 1001 keys", "/v1/locks/renew", map[string]any{"session": "s", "keys": manyKeys}, "keys"},
		{"verify of a long key", "/v1/locks/verify", map[string]any{"session": "s", "key": long(513)}, "key"},
		{"heartbeat of a long session", "/v1/sessions/heartbeat", map[string]any{"session": long(257)}, "session"},
		{"force release of 1001 keys", "/v1/admin/force-release", map[string]any{"keys": manyKeys, "reason": "r"}, "keys"},
		{"aggregate with a long member", "/v1/aggregates", map[string]any{"member": long(513), "root": "a/1"}, "member"},
		{"batch of 1001 ops", "/v1/batch", map[string]any{"ops": manyOps}, "ops"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantError(t, h.call("POST", tc.path, adminToken, tc.body), 400, "invalid", tc.field)
		})
	}
	// Nothing was granted by any of them.
	body := h.get("/v1/locks", 200)
	if n := len(list(t, body, "locks")); n != 0 {
		t.Fatalf("%d locks after refused requests: %v", n, body)
	}
	// Exactly at the limits is fine.
	h.post("/v1/locks/acquire", map[string]any{"keys": []string{long(512)}, "owner": owner(long(256), long(200)), "note": long(1000)}, 200)
}

// TestHeaderLimit sends headers beyond the server's limit: 431, and the
// server goes on answering.
func TestHeaderLimit(t *testing.T) {
	t.Parallel()
	h := newHarness(t, options{})
	req, _ := http.NewRequest("GET", h.url+"/v1/locks", nil)
	req.Header.Set("Authorization", "Bearer "+readerToken)
	req.Header.Set("X-Padding", strings.Repeat("p", 2*server.DefaultMaxHeaderBytes))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("status %d for %d bytes of headers, want 431", res.StatusCode, 2*server.DefaultMaxHeaderBytes)
	}
	h.want(h.call("GET", "/v1/locks", readerToken, nil), 200)
}

// slowServer is a real server with short read timeouts, so slow clients
// meet them within the test.
func slowServer(t *testing.T) string {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	st := memstore.New(memstore.Config{})
	mgr, err := holdfast.New(st, holdfast.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{
		Manager: mgr, Anonymous: true, Logger: quiet,
		ReadHeaderTimeout: 300 * time.Millisecond, ReadTimeout: 600 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewUnstartedServer(srv)
	hs.Config = srv.HTTPServer()
	hs.Start()
	t.Cleanup(func() {
		hs.Close()
		mgr.Close()
		st.Close()
	})
	return hs.Listener.Addr().String()
}

// TestSlowClients opens connections that send their headers or their body
// too slowly (slowloris): the server cuts each of them off at its read
// timeouts, answering at most a 4xx, and keeps serving everyone else while
// they hang.
func TestSlowClients(t *testing.T) {
	t.Parallel()
	addr := slowServer(t)
	partial := map[string]string{
		"headers never finish": "POST /v1/locks/acquire HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\n",
		"body never finishes": "POST /v1/locks/acquire HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\n" +
			"Content-Length: 200\r\n\r\n{\"keys\": [\"slow/1\"], ",
	}
	var wg sync.WaitGroup
	for name, prefix := range partial {
		for i := range 20 {
			wg.Go(func() {
				conn, err := net.Dial("tcp", addr)
				if err != nil {
					t.Error(err)
					return
				}
				defer conn.Close()
				if _, err := io.WriteString(conn, prefix); err != nil {
					t.Error(err)
					return
				}
				// The server must end this; the deadline only keeps a
				// broken server from hanging the test.
				conn.SetReadDeadline(time.Now().Add(30 * time.Second))
				res, err := http.ReadResponse(bufio.NewReader(conn), nil)
				if err == nil {
					res.Body.Close()
					if res.StatusCode < 400 || res.StatusCode >= 500 {
						t.Errorf("%s (%d): status %d, want a 4xx or the connection closed", name, i, res.StatusCode)
					}
					return
				}
				if ne, ok := err.(net.Error); ok && ne.Timeout() {
					t.Errorf("%s (%d): the server never cut the connection off", name, i)
				}
			})
		}
	}
	// While the slow clients hang, others are served.
	for i := range 10 {
		res, err := http.Post("http://"+addr+"/v1/locks/acquire", "application/json",
			strings.NewReader(fmt.Sprintf(`{"keys": ["fast/%d"], "owner": {"session": "fast"}}`, i)))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Fatalf("a normal request beside slow clients: status %d", res.StatusCode)
		}
	}
	wg.Wait()
	res, err := http.Get("http://" + addr + "/v1/locks?prefix=slow")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if !strings.Contains(string(body), `"locks":[]`) {
		t.Fatalf("a request cut off mid-body took a lock: %s", body)
	}
}

// TestTokensNeverLogged makes requests with good and bad tokens and checks
// that no secret reaches the log, whatever the outcome.
func TestTokensNeverLogged(t *testing.T) {
	t.Parallel()
	h := newHarness(t, options{})
	wrong := "wrong-secret-7f3a"
	h.call("GET", "/v1/locks", readerToken, nil)
	h.call("POST", "/v1/locks/acquire", clientToken, acquireBody("s", "log/1"))
	h.call("POST", "/v1/admin/force-release", adminToken, map[string]any{"keys": []string{"log/1"}, "reason": "r"})
	h.call("POST", "/v1/admin/force-release", clientToken, map[string]any{"keys": []string{"log/1"}, "reason": "r"})
	h.call("GET", "/v1/locks", wrong, nil)
	h.call("POST", "/v1/locks/acquire", adminToken, "{broken")
	logs := h.logs.String()
	if !strings.Contains(logs, "/v1/admin/force-release") {
		t.Fatalf("the requests were not logged at all, so this proves nothing:\n%s", logs)
	}
	for _, secret := range []string{readerToken, clientToken, adminToken, wrong} {
		if strings.Contains(logs, secret) {
			t.Errorf("the log contains the bearer token %q:\n%s", secret, logs)
		}
	}
}
