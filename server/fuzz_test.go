package server_test

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
)

var fuzzPaths = []string{
	"/v1/locks/acquire", "/v1/locks/release", "/v1/locks/renew", "/v1/locks/verify",
	"/v1/sessions/heartbeat", "/v1/sessions/end", "/v1/aggregates", "/v1/aggregates/remove",
	"/v1/batch", "/v1/admin/force-release",
}

// FuzzRequestBodies checks that no body, however broken, gets anything but
// a well-formed answer: never a 500, always the error shape of API.md.
func FuzzRequestBodies(f *testing.F) {
	for _, body := range []string{
		`{"keys": ["policy/1"], "owner": {"session": "s"}, "ttl_seconds": 1.5}`,
		`{"session": "s", "keys": ["a/1"], "token": 1}`,
		`{"ops": [{"op": "acquire", "body": {"keys": ["a"], "owner": {"session": "s"}}}, {"op": "verify", "body": {"key": "a", "session": "s"}}]}`,
		`{"member": "a/1", "root": "b/1"}`,
		`{"keys": ["a//b"], "owner": {"session": ""}}`,
		`{"ttl_seconds": -1e400}`, `{"token": 1e30}`, `[]`, `null`, `{`, `""`, `{"keys": null}`,
	} {
		for i := range fuzzPaths {
			f.Add(uint8(i), body)
		}
	}
	h := newHarness(f, options{anonymous: true})
	f.Fuzz(func(t *testing.T, which uint8, body string) {
		path := fuzzPaths[int(which)%len(fuzzPaths)]
		req := httptest.NewRequest("POST", path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		// Anonymous access is for loopback only: without this every
		// request would stop at a 403 before its body is read.
		req.Host = "127.0.0.1:7070"
		rec := httptest.NewRecorder()
		h.srv.ServeHTTP(rec, req)
		if rec.Code == 500 {
			t.Fatalf("%s %q: 500 %s", path, body, rec.Body)
		}
		var out map[string]json.RawMessage
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatalf("%s %q: answer is not a JSON object: %s", path, body, rec.Body)
		}
		if rec.Code == 403 {
			t.Fatalf("%s %q: 403: the fuzzer never reaches the decoder", path, body)
		}
		if rec.Code != 200 {
			var e struct {
				Error struct{ Code, Message string } `json:"error"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
				t.Fatalf("%s %q: %d without an error code and message: %s", path, body, rec.Code, rec.Body)
			}
		}
	})
}
