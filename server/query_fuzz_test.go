package server_test

import (
	"encoding/json"
	"net/http/httptest"
	"testing"
)

var fuzzQueryPaths = []string{"/v1/locks", "/v1/sessions", "/v1/aggregates", "/v1/admin/audit"}

// FuzzQueries sends arbitrary query strings to every listing: the answer
// is a listing or a 400 in the error shape of API.md, never a 500.
func FuzzQueries(f *testing.F) {
	for _, q := range []string{
		"key=policy/1", "prefix=policy/&limit=1000", "session=s&after=cG9saWN5LzEAcw", "user=u&limit=0",
		"limit=-1", "limit=1001", "limit=99999999999999999999", "after=%00%ff", "key=a//b", "since=2026-11-30T10:47:00Z",
		"since=yesterday", "root=lease/3", "key=a&key=b", "unknown=1", "%zz", "after=AAAA&limit=1", "order=newest",
	} {
		for i := range fuzzQueryPaths {
			f.Add(uint8(i), q)
		}
	}
	h := newHarness(f, options{anonymous: true})
	f.Fuzz(func(t *testing.T, which uint8, query string) {
		path := fuzzQueryPaths[int(which)%len(fuzzQueryPaths)]
		req := httptest.NewRequest("GET", "/", nil)
		req.URL.Path, req.URL.RawQuery = path, query
		req.Host = "127.0.0.1:7070" // anonymous access is for loopback only
		rec := httptest.NewRecorder()
		h.srv.ServeHTTP(rec, req)
		if rec.Code != 200 && rec.Code != 400 {
			t.Fatalf("%s?%s: status %d %s", path, query, rec.Code, rec.Body)
		}
		var out map[string]json.RawMessage
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatalf("%s?%s: answer is not a JSON object: %s", path, query, rec.Body)
		}
		if rec.Code == 400 {
			var e struct {
				Error struct{ Code, Message string } `json:"error"`
			}
			if json.Unmarshal(rec.Body.Bytes(), &e) != nil || e.Error.Code != "invalid" || e.Error.Message == "" {
				t.Fatalf("%s?%s: 400 without code invalid and a message: %s", path, query, rec.Body)
			}
		}
	})
}
