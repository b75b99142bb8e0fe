package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/adminui"
)

func TestHealthAndReadiness(t *testing.T) {
	t.Parallel()
	h := newHarness(t, options{})
	if got := h.want(h.call("GET", "/healthz", "", nil), 200); got["status"] != "ok" {
		t.Errorf("healthz = %v", got)
	}
	if got := h.want(h.call("GET", "/readyz", "", nil), 200); got["status"] != "ready" {
		t.Errorf("readyz = %v", got)
	}

	h.store.Close()
	r := h.call("GET", "/readyz", "", nil)
	wantError(t, r, 503, "unavailable", "")
	if r.header.Get("Retry-After") == "" {
		t.Error("503 without Retry-After")
	}
	// Fail closed: lock requests are refused the same way.
	r = h.call("POST", "/v1/locks/acquire", clientToken, acquireBody("s1", "policy/1"))
	wantError(t, r, 503, "unavailable", "")
	if r.header.Get("Retry-After") == "" {
		t.Error("503 without Retry-After")
	}
	if got := h.want(h.call("GET", "/healthz", "", nil), 200); got["status"] != "ok" {
		t.Errorf("healthz with the store down = %v", got)
	}
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	h := newHarness(t, options{})
	h.post("/v1/locks/acquire", acquireBody("s1", "policy/1"), 200)
	h.want(h.call("POST", "/v1/locks/acquire", clientToken, acquireBody("s2", "policy/1")), 423)
	h.want(h.call("GET", "/nowhere", "", nil), 404)
	h.want(h.call("GET", "/v1/locks/acquire", clientToken, nil), 405)
	h.stream("", "")

	r := h.call("GET", "/metrics", readerToken, nil)
	if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/plain") {
		t.Fatalf("metrics: %d %s", r.status, r.header.Get("Content-Type"))
	}
	text := string(r.raw)
	for _, want := range []string{
		`holdfast_http_requests_total{code="200",method="POST",route="/v1/locks/acquire"} 1`,
		`holdfast_http_requests_total{code="423",method="POST",route="/v1/locks/acquire"} 1`,
		`holdfast_http_requests_total{code="404",method="GET",route="unmatched"} 1`,
		`holdfast_http_requests_total{code="405",method="GET",route="/v1/locks/acquire"} 1`,
		`holdfast_http_request_duration_seconds_count{method="POST",route="/v1/locks/acquire"} 2`,
		`holdfast_operations_total{op="acquire",outcome="ok"} 1`,
		`holdfast_operations_total{op="acquire",outcome="locked"} 1`,
		`holdfast_operation_duration_seconds_count{op="acquire"} 2`,
		// Each acquire, the refused one too, committed alone.
		"holdfast_commit_operations_sum 2\n",
		"holdfast_commit_operations_count 2\n",
		"holdfast_commit_duration_seconds_count 2\n",
		`holdfast_event_streams 1`,
		"holdfast_store_up 1\n",
		`go_goroutines `,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	// A test binary is built from a checkout: its version is "(devel)".
	buildInfo := regexp.MustCompile(`(?m)^holdfast_build_info\{goversion="` + regexp.QuoteMeta(runtime.Version()) + `",version="[^"]+"\} 1$`)
	if !buildInfo.MatchString(text) {
		t.Errorf("metrics lack holdfast_build_info with goversion %s:\n%s", runtime.Version(), grepLines(text, "build_info"))
	}
	if strings.Contains(text, "/nowhere") {
		t.Error("unknown paths became label values")
	}
}

// holdfast_store_up asks the store at each scrape, so it says 0 as soon as
// the store stops answering, whichever way.
func TestStoreUpFollowsTheStore(t *testing.T) {
	t.Parallel()
	down := newHarness(t, options{failWrites: fmt.Errorf("disk on fire: %w", holdfast.ErrUnavailable)})
	if text := string(down.call("GET", "/metrics", readerToken, nil).raw); !strings.Contains(text, "holdfast_store_up 0\n") {
		t.Errorf("a failing store: want holdfast_store_up 0, got\n%s", grepLines(text, "holdfast_store_up"))
	}

	h := newHarness(t, options{})
	if text := string(h.call("GET", "/metrics", readerToken, nil).raw); !strings.Contains(text, "holdfast_store_up 1\n") {
		t.Fatalf("a working store: want holdfast_store_up 1, got\n%s", grepLines(text, "holdfast_store_up"))
	}
	h.store.Close()
	if text := string(h.call("GET", "/metrics", readerToken, nil).raw); !strings.Contains(text, "holdfast_store_up 0\n") {
		t.Errorf("a closed store: want holdfast_store_up 0, got\n%s", grepLines(text, "holdfast_store_up"))
	}
}

// /readyz answers anyone, so its 503 does not repeat the store's error,
// which can name internal addresses, to a caller without a token; the
// request log and callers with a token get it whole.
func TestReadyzTellsOnlyTrustedCallersWhy(t *testing.T) {
	t.Parallel()
	const detail = "dial tcp 10.0.0.5:5432: connect: connection refused"
	storeDown := fmt.Errorf("%s: %w", detail, holdfast.ErrUnavailable)
	h := newHarness(t, options{failWrites: storeDown})

	for _, token := range []string{"", "not-a-token"} {
		r := h.call("GET", "/readyz", token, nil)
		e := wantError(t, r, 503, "unavailable", "")
		if r.header.Get("Retry-After") == "" {
			t.Errorf("token %q: 503 without Retry-After", token)
		}
		if msg, _ := e["message"].(string); strings.Contains(string(r.raw), "10.0.0.5") || !strings.Contains(msg, "unavailable") {
			t.Errorf("token %q: want a message that says only that the store is unavailable, got %s", token, r.raw)
		}
	}
	for _, token := range []string{readerToken, adminToken} {
		r := h.call("GET", "/readyz", token, nil)
		if e := wantError(t, r, 503, "unavailable", ""); !strings.Contains(e["message"].(string), detail) {
			t.Errorf("token %q: want the store's error in the message, got %s", token, r.raw)
		}
	}
	anon := newHarness(t, options{anonymous: true, failWrites: storeDown})
	if r := anon.call("GET", "/readyz", "", nil); !strings.Contains(string(r.raw), detail) {
		t.Errorf("without tokens, on loopback: want the store's error in the message, got %s", r.raw)
	}

	logged := 0
	for _, line := range strings.Split(strings.TrimSpace(h.logs.String()), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil || rec["msg"] != "request" || rec["route"] != "/readyz" {
			continue
		}
		logged++
		if msg, _ := rec["error"].(string); rec["level"] != "WARN" || !strings.Contains(msg, detail) {
			t.Errorf("the 503's log line: %s, want a warning with the store's error", line)
		}
	}
	if logged != 4 {
		t.Errorf("%d request log lines for /readyz, want 4:\n%s", logged, h.logs.String())
	}
}

func TestOpenAPIMatchesRoutes(t *testing.T) {
	t.Parallel()
	h := newHarness(t, options{})
	r := h.call("GET", "/openapi.json", "", nil)
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(r.raw, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi = %q, want 3.1.0", doc.OpenAPI)
	}
	var documented []string
	for path, ops := range doc.Paths {
		for method := range ops {
			documented = append(documented, strings.ToUpper(method)+" "+path)
		}
	}
	sort.Strings(documented)
	// The console's pages under adminui.Prefix are HTML for browsers, not
	// the JSON API; of the console, API.md and the document name only GET /.
	var served []string
	for _, rt := range h.srv.Routes() {
		if _, path, _ := strings.Cut(rt, " "); !strings.HasPrefix(path, adminui.Prefix) {
			served = append(served, rt)
		}
	}
	if strings.Join(documented, "\n") != strings.Join(served, "\n") {
		t.Fatalf("the document and the router differ\ndocumented:\n%s\nserved:\n%s", strings.Join(documented, "\n"), strings.Join(served, "\n"))
	}
	// And the router really answers each of them.
	for _, rt := range served {
		method, path, _ := strings.Cut(rt, " ")
		if status, code := authCall(t, h, method, path, adminToken); status == 404 && code == "not_found" {
			t.Errorf("%s is documented and listed but not routed", rt)
		}
	}
}

func TestOpenAPIReferencesResolve(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				target := doc
				for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
					m, ok := target.(map[string]any)
					if !ok || m[part] == nil {
						t.Errorf("$ref %s does not resolve", ref)
						return
					}
					target = m[part]
				}
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(doc)
}

func TestConsoleIsMountedAtRoot(t *testing.T) {
	t.Parallel()
	h := newHarness(t, options{})
	// Without a console session, / leads to the sign-in form; a bearer
	// token does not sign a browser in.
	for _, token := range []string{"", adminToken} {
		r := h.call("GET", "/", token, nil)
		if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") || !strings.Contains(string(r.raw), `action="/console/signin"`) {
			t.Fatalf("GET / with token %q = %d %s", token, r.status, r.raw)
		}
	}
	if r := h.call("GET", "/console/nowhere", "", nil); r.status != 404 {
		t.Errorf("GET /console/nowhere = %d, want 404", r.status)
	}
}

func TestRequestLogs(t *testing.T) {
	t.Parallel()
	h := newHarness(t, options{})
	h.post("/v1/locks/acquire", acquireBody("s1", "policy/1"), 200)
	h.call("GET", "/v1/admin/audit", readerToken, nil)

	var found, forbidden bool
	for _, line := range strings.Split(strings.TrimSpace(h.logs.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if rec["msg"] != "request" {
			continue
		}
		if rec["method"] == "POST" && rec["route"] == "/v1/locks/acquire" && rec["status"] == 200.0 {
			found = true
			if _, ok := rec["duration"]; !ok {
				t.Errorf("request log without duration: %s", line)
			}
		}
		if rec["route"] == "/v1/admin/audit" && rec["status"] == 403.0 {
			forbidden = true
		}
	}
	if !found || !forbidden {
		t.Errorf("request logs missing (acquire %v, forbidden audit %v):\n%s", found, forbidden, h.logs.String())
	}
	for _, secret := range []string{clientToken, readerToken, "Bearer"} {
		if strings.Contains(h.logs.String(), secret) {
			t.Errorf("logs contain %q", secret)
		}
	}
}

// A request that failed because its client went away first is no outage:
// the logs and metrics count it as 499 (client closed request), not as a
// 503 that would page an operator for a healthy store.
func TestClientGoneIsNotAnOutage(t *testing.T) {
	t.Parallel()
	stall := make(chan struct{})
	h := newHarness(t, options{stall: stall})
	defer close(stall)

	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", h.url+"/v1/locks/acquire", strings.NewReader(`{"keys":["policy/1"],"owner":{"session":"s1","user":"u1"}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+clientToken)
	req.Header.Set("Content-Type", "application/json")
	if res, err := http.DefaultClient.Do(req); err == nil {
		res.Body.Close()
		t.Fatalf("acquire over a stalled store answered %d; want the client to give up", res.StatusCode)
	}

	want := `holdfast_http_requests_total{code="499",method="POST",route="/v1/locks/acquire"} 1`
	var text string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		text = string(h.call("GET", "/metrics", readerToken, nil).raw)
		if strings.Contains(text, want) {
			break
		}
	}
	if !strings.Contains(text, want) {
		t.Fatalf("metrics lack %s:\n%s", want, grepLines(text, "holdfast_http_requests_total"))
	}
	if strings.Contains(text, `code="503"`) {
		t.Errorf("a request whose client went away was counted as 503:\n%s", grepLines(text, "holdfast_http_requests_total"))
	}
	if ops := grepLines(text, "holdfast_operations_total{"); ops != `holdfast_operations_total{op="acquire",outcome="canceled"} 1` {
		t.Errorf("operations: want one acquire canceled, got\n%s", ops)
	}
	if !strings.Contains(h.logs.String(), `"status":499`) {
		t.Errorf("no request log with status 499:\n%s", h.logs.String())
	}

	// A store that fails while the client waits is an outage all the same.
	down := newHarness(t, options{failWrites: fmt.Errorf("disk on fire: %w", holdfast.ErrUnavailable)})
	down.post("/v1/locks/acquire", acquireBody("s1", "policy/1"), 503)
	down.want(down.call("GET", "/readyz", "", nil), 503)
	text = string(down.call("GET", "/metrics", readerToken, nil).raw)
	if want := `holdfast_http_requests_total{code="503",method="POST",route="/v1/locks/acquire"} 1`; !strings.Contains(text, want) {
		t.Errorf("metrics lack %s:\n%s", want, grepLines(text, "holdfast_http_requests_total"))
	}
	if want := `holdfast_operations_total{op="acquire",outcome="unavailable"} 1`; !strings.Contains(text, want) {
		t.Errorf("metrics lack %s:\n%s", want, grepLines(text, "holdfast_operations_total"))
	}
	// Their log lines are warnings that say what the store said, for an
	// operation and for /readyz, which answers by itself, alike.
	logged := 0
	for _, line := range strings.Split(strings.TrimSpace(down.logs.String()), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil || rec["msg"] != "request" || rec["status"] != 503.0 {
			continue
		}
		logged++
		if msg, _ := rec["error"].(string); rec["level"] != "WARN" || !strings.Contains(msg, "disk on fire") {
			t.Errorf("the 503's log line: %s, want a warning with the store's error", line)
		}
	}
	if logged != 2 {
		t.Errorf("%d request log lines with status 503, want 2:\n%s", logged, down.logs.String())
	}
}

// grepLines returns the lines of text that contain s.
func grepLines(text, s string) string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
