package server_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

func TestMalformedRequests(t *testing.T) {
	t.Parallel()
	h := newHarness(t, options{maxBodyBytes: 4096})
	for _, tc := range []struct {
		name, path, body, field string
	}{
		{"malformed JSON", "/v1/locks/acquire", `{"keys": [`, "body"},
		{"not an object", "/v1/locks/acquire", `["policy/1"]`, "body"},
		{"empty body", "/v1/locks/acquire", ``, "body"},
		{"trailing data", "/v1/locks/release", `{"session": "s", "keys": ["a/1"]} {}`, "body"},
		{"unknown field", "/v1/locks/acquire", `{"keys": ["a/1"], "owner": {"session": "s"}, "ttl": 5}`, "ttl"},
		{"unknown nested field", "/v1/locks/acquire", `{"keys": ["a/1"], "owner": {"sesion": "s"}}`, "sesion"},
		{"wrong type", "/v1/locks/verify", `{"key": "a/1", "session": "s", "token": "4711"}`, "token"},
		{"negative duration", "/v1/locks/acquire", `{"keys": ["a/1"], "owner": {"session": "s"}, "ttl_seconds": -1}`, "ttl_seconds"},
		{"zero duration", "/v1/sessions/heartbeat", `{"session": "s", "idle_timeout_seconds": 0}`, "idle_timeout_seconds"},
		{"duration as string", "/v1/locks/renew", `{"session": "s", "ttl_seconds": "2h"}`, "ttl_seconds"},
		{"bad key", "/v1/locks/acquire", `{"keys": ["a//1"], "owner": {"session": "s"}}`, "keys[0]"},
		{"key not UTF-8", "/v1/locks/acquire", "{\"keys\": [\"u/\xff\"], \"owner\": {\"session\": \"s\"}}", "body"},
		{"batch not UTF-8", "/v1/batch", "{\"ops\": [{\"op\": \"release\", \"body\": {\"session\": \"s\xfe\"}}]}", "body"},
		{"no keys", "/v1/locks/acquire", `{"keys": [], "owner": {"session": "s"}}`, "keys"},
		{"no session", "/v1/locks/acquire", `{"keys": ["a/1"], "owner": {}}`, ""},
		{"too large", "/v1/locks/acquire", `{"keys": ["` + strings.Repeat("a", 5000) + `"], "owner": {"session": "s"}}`, "body"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantError(t, h.call("POST", tc.path, clientToken, tc.body), 400, "invalid", tc.field)
		})
	}

	// More than 1000 keys, within the body limit of a default server.
	big := newHarness(t, options{})
	keys := make([]string, 1001)
	for i := range keys {
		keys[i] = fmt.Sprintf("k/%d", i)
	}
	wantError(t, big.call("POST", "/v1/locks/acquire", clientToken, map[string]any{"keys": keys, "owner": map[string]any{"session": "s"}}), 400, "invalid", "keys")
}

func TestBodyLimitDefault(t *testing.T) {
	t.Parallel()
	h := newHarness(t, options{})
	note := strings.Repeat("x", 1<<20)
	wantError(t, h.call("POST", "/v1/locks/acquire", clientToken, map[string]any{"keys": []string{"a/1"}, "owner": map[string]any{"session": "s"}, "note": note}), 400, "invalid", "body")
}

func TestJSONOnly(t *testing.T) {
	t.Parallel()
	h := newHarness(t, options{})
	req, err := http.NewRequest("POST", h.url+"/v1/locks/acquire", strings.NewReader(`keys=a/1&session=s`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+clientToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 400 {
		t.Fatalf("form post: status %d, want 400", res.StatusCode)
	}
	// No Content-Type at all (what a no-cors fetch of a Blob sends) is
	// refused too.
	req, _ = http.NewRequest("POST", h.url+"/v1/sessions/end", strings.NewReader(`{"session": "s"}`))
	req.Header.Set("Authorization", "Bearer "+clientToken)
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 400 {
		t.Fatalf("no content type: status %d, want 400", res.StatusCode)
	}
	// A charset parameter is fine.
	req, _ = http.NewRequest("POST", h.url+"/v1/sessions/end", strings.NewReader(`{"session": "s"}`))
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	req.Header.Set("Authorization", "Bearer "+clientToken)
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("json with charset: status %d, want 200", res.StatusCode)
	}
}

func TestUnknownRouteAndMethod(t *testing.T) {
	t.Parallel()
	h := newHarness(t, options{})
	wantError(t, h.call("GET", "/v1/lockz", adminToken, nil), 404, "not_found", "")
	wantError(t, h.call("GET", "/v1/locks/acquire/extra", "", nil), 404, "not_found", "")
	r := h.call("GET", "/v1/locks/acquire", clientToken, nil)
	wantError(t, r, 405, "method_not_allowed", "")
	if allow := r.header.Get("Allow"); allow != "POST" {
		t.Errorf("Allow = %q, want POST", allow)
	}
	r = h.call("DELETE", "/v1/aggregates", clientToken, nil)
	wantError(t, r, 405, "method_not_allowed", "")
	if allow := r.header.Get("Allow"); allow != "GET, POST" {
		t.Errorf("Allow = %q, want GET, POST", allow)
	}
}

func TestBatch(t *testing.T) {
	t.Parallel()
	h := newHarness(t, options{})
	h.post("/v1/locks/acquire", acquireBody("other", "policy/9"), 200)
	got := h.post("/v1/batch", map[string]any{"ops": []any{
		map[string]any{"op": "acquire", "body": acquireBody("s1", "policy/1")},
		map[string]any{"op": "acquire", "body": acquireBody("s1", "policy/9")},
		map[string]any{"op": "heartbeat", "body": map[string]any{"session": "s1"}},
		map[string]any{"op": "acquire", "body": map[string]any{"keys": []string{"policy/2"}, "owner": map[string]any{"session": "s1"}, "bogus": 1}},
		map[string]any{"op": "lock", "body": map[string]any{}},
		map[string]any{"op": "verify", "body": map[string]any{"key": "policy/1", "session": "s1"}},
		map[string]any{"op": "renew", "body": map[string]any{"session": "s1", "keys": []string{"policy/3"}}},
		map[string]any{"op": "release", "body": map[string]any{"session": "s1", "keys": []string{"policy/1"}}},
		map[string]any{"op": "end_session", "body": map[string]any{"session": "s1"}},
		map[string]any{"op": "verify"},
		map[string]any{"op": "verify", "body": map[string]any{"key": "policy/9", "session": "other"}, "extra": true},
	}}, 200)
	results := list(t, got, "results")
	wantStatus := []float64{200, 423, 200, 400, 400, 200, 409, 200, 200, 400, 400}
	if len(results) != len(wantStatus) {
		t.Fatalf("%d results for %d ops: %v", len(results), len(wantStatus), results)
	}
	for i, want := range wantStatus {
		r := results[i].(map[string]any)
		if r["status"] != want {
			t.Errorf("op %d: status %v, want %v: %v", i, r["status"], want, r)
			continue
		}
		_, hasBody := r["body"]
		_, hasErr := r["error"]
		if want == 200 && (!hasBody || hasErr) || want != 200 && (hasBody || !hasErr) {
			t.Errorf("op %d: want body xor error: %v", i, r)
		}
	}
	if at(t, results, 0, "body", "locks", 0, "key") != "policy/1" {
		t.Errorf("acquire result = %v", results[0])
	}
	if at(t, results, 1, "error", "code") != "locked" || len(list(t, results, 1, "error", "conflicts")) != 1 {
		t.Errorf("locked result = %v", results[1])
	}
	if at(t, results, 3, "error", "field") != "bogus" || at(t, results, 4, "error", "field") != "ops[4].op" {
		t.Errorf("malformed op results = %v / %v", results[3], results[4])
	}
	if at(t, results, 6, "error", "code") != "lock_lost" || at(t, results, 6, "error", "reason") != "never_held" {
		t.Errorf("renew result = %v", results[6])
	}
	if at(t, results, 10, "error", "field") != "ops[10].extra" {
		t.Errorf("op with an unknown field = %v", results[10])
	}
	// The ops ran in order: the session ended, so its lock is gone.
	if l := list(t, h.get("/v1/locks?session=s1", 200), "locks"); len(l) != 0 {
		t.Errorf("locks left = %v", l)
	}
}

func TestBatchEnvelope(t *testing.T) {
	t.Parallel()
	h := newHarness(t, options{})
	tooMany := make([]any, 1001)
	for i := range tooMany {
		tooMany[i] = map[string]any{"op": "heartbeat", "body": map[string]any{"session": "s"}}
	}
	for name, body := range map[string]any{
		"no ops":        `{"ops": []}`,
		"missing ops":   `{}`,
		"too many ops":  map[string]any{"ops": tooMany},
		"unknown field": `{"ops": [{"op": "heartbeat", "body": {"session": "s"}}], "atomic": true}`,
		"ops not list":  `{"ops": {"op": "heartbeat"}}`,
		"malformed":     `{"ops": [`,
	} {
		t.Run(name, func(t *testing.T) {
			r := h.call("POST", "/v1/batch", clientToken, body)
			wantError(t, r, 400, "invalid", "")
		})
	}
	// Nothing in a refused envelope ran.
	if s := list(t, h.get("/v1/sessions", 200), "sessions"); len(s) != 0 {
		t.Errorf("sessions = %v", s)
	}
}

// Every JSON answer declares its length, short (net/http counts it) or
// long (the server does), rather than going out chunked.
func TestAnswersDeclareTheirLength(t *testing.T) {
	t.Parallel()
	h := newHarness(t, options{})
	keys := make([]string, 40)
	for i := range keys {
		keys[i] = fmt.Sprintf("order/%d", i)
	}
	short := h.call("POST", "/v1/locks/acquire", clientToken, acquireBody("s-1", keys[0]))
	long := h.call("POST", "/v1/locks/acquire", clientToken, acquireBody("s-1", keys[1:]...))
	if len(short.raw) > 2048 || len(long.raw) <= 4096 {
		t.Fatalf("answers of %d and %d bytes, want one under 2 KiB and one over 4 KiB", len(short.raw), len(long.raw))
	}
	for _, r := range []response{short, long, h.call("GET", "/v1/locks/nope", clientToken, nil)} {
		if got := r.header.Get("Content-Length"); got != fmt.Sprint(len(r.raw)) {
			t.Errorf("answer of %d bytes (status %d): Content-Length %q", len(r.raw), r.status, got)
		}
	}
}
