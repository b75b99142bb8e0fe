package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/memstore"
	"github.com/holdfast/holdfast/server"
)

// routeRoles is the role each route needs ("" for none), from API.md.
var routeRoles = map[string]string{
	"POST /v1/locks/acquire":       "client",
	"POST /v1/locks/release":       "client",
	"POST /v1/locks/renew":         "client",
	"POST /v1/locks/verify":        "client",
	"GET /v1/locks":                "reader",
	"POST /v1/sessions/heartbeat":  "client",
	"POST /v1/sessions/end":        "client",
	"GET /v1/sessions":             "reader",
	"POST /v1/aggregates":          "client",
	"GET /v1/aggregates":           "reader",
	"POST /v1/aggregates/remove":   "client",
	"POST /v1/batch":               "client",
	"POST /v1/admin/force-release": "admin",
	"GET /v1/admin/audit":          "admin",
	"GET /v1/events":               "reader",
	"GET /metrics":                 "reader",
	"GET /healthz":                 "",
	"GET /readyz":                  "",
	"GET /openapi.json":            "",
	// The admin console authenticates by its own sign-in cookie, not by
	// bearer tokens; package adminui tests its access rules.
	"GET /":                           "console",
	"GET /console/locks/rows":         "console",
	"GET /console/lock":               "console",
	"GET /console/sessions":           "console",
	"GET /console/audit":              "console",
	"GET /console/release":            "console",
	"POST /console/release":           "console",
	"GET /console/events":             "console",
	"GET /console/signin":             "console",
	"POST /console/signin":            "console",
	"POST /console/signout":           "console",
	"GET /console/assets/console.css": "console",
	"GET /console/assets/console.js":  "console",
}

// validBodies lets each POST succeed once authorized.
var validBodies = map[string]string{
	"/v1/locks/acquire":       `{"keys": ["auth/1"], "owner": {"session": "s"}}`,
	"/v1/locks/release":       `{"session": "s", "keys": ["auth/1"]}`,
	"/v1/locks/renew":         `{"session": "s"}`,
	"/v1/locks/verify":        `{"key": "auth/1", "session": "s"}`,
	"/v1/sessions/heartbeat":  `{"session": "s"}`,
	"/v1/sessions/end":        `{"session": "s"}`,
	"/v1/aggregates":          `{"member": "auth/2", "root": "auth/3"}`,
	"/v1/aggregates/remove":   `{"member": "auth/2"}`,
	"/v1/batch":               `{"ops": [{"op": "heartbeat", "body": {"session": "s"}}]}`,
	"/v1/admin/force-release": `{"session": "s", "reason": "test"}`,
}

var roleRank = map[string]int{"": 0, "reader": 1, "client": 2, "admin": 3}

func TestEveryRouteEveryRole(t *testing.T) {
	t.Parallel()
	h := newHarness(t, options{})
	routes := h.srv.Routes()
	if len(routes) != len(routeRoles) {
		t.Errorf("server has %d routes, the table %d: %v", len(routes), len(routeRoles), routes)
	}
	callers := []struct{ role, token string }{
		{"", ""}, {"", "not-a-token"}, {"reader", readerToken}, {"client", clientToken}, {"admin", adminToken},
	}
	for _, rt := range routes {
		need, ok := routeRoles[rt]
		if !ok {
			t.Errorf("route %s is not in the role table", rt)
			continue
		}
		method, path, _ := strings.Cut(rt, " ")
		if need == "console" {
			continue
		}
		for _, c := range callers {
			status, code := authCall(t, h, method, path, c.token)
			switch {
			case need == "":
				if status != 200 {
					t.Errorf("%s as %q: status %d, want 200 for a public route", rt, c.role, status)
				}
			case c.role == "":
				if status != 401 || code != "unauthenticated" {
					t.Errorf("%s with token %q: %d %s, want 401 unauthenticated", rt, c.token, status, code)
				}
			case roleRank[c.role] < roleRank[need]:
				if status != 403 || code != "forbidden" {
					t.Errorf("%s as %s: %d %s, want 403 forbidden", rt, c.role, status, code)
				}
			default:
				// Earlier calls change state (a verify after the release
				// is a 409), so only the authorization is checked here.
				if status == 401 || status == 403 || status >= 500 {
					t.Errorf("%s as %s: status %d %s, want it authorized", rt, c.role, status, code)
				}
			}
		}
	}
}

// authCall makes one authorized-or-not call and returns status and error
// code. Event streams are closed as soon as their status is known.
func authCall(t *testing.T, h *harness, method, path, token string) (int, string) {
	t.Helper()
	if path == "/v1/events" {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, method, h.url+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		code := ""
		if res.StatusCode != 200 {
			r := h.call(method, path, token, nil)
			code, _ = at(t, r.body, "error", "code").(string)
		}
		return res.StatusCode, code
	}
	var body any
	if method == "POST" {
		body = validBodies[path]
	}
	r := h.call(method, path, token, body)
	code := ""
	if e, ok := r.body["error"].(map[string]any); ok {
		code, _ = e["code"].(string)
	}
	return r.status, code
}

func TestBearerSchemeAndTokenChecks(t *testing.T) {
	t.Parallel()
	h := newHarness(t, options{})
	for name, header := range map[string]string{
		"basic scheme":  "Basic " + adminToken,
		"no scheme":     adminToken,
		"empty bearer":  "Bearer ",
		"token prefix":  "Bearer " + adminToken[:len(adminToken)-1],
		"token suffix":  "Bearer " + adminToken + "x",
		"another token": "Bearer " + strings.ToUpper(adminToken),
	} {
		req, _ := http.NewRequest("GET", h.url+"/v1/locks", nil)
		req.Header.Set("Authorization", header)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 401 {
			t.Errorf("%s: status %d, want 401", name, res.StatusCode)
		}
	}
	req, _ := http.NewRequest("GET", h.url+"/v1/locks", nil)
	req.Header.Set("Authorization", "bearer "+readerToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Errorf("lower-case scheme: status %d, want 200", res.StatusCode)
	}
}

func TestAnonymousOnlyWhenAllowed(t *testing.T) {
	t.Parallel()
	open := newHarness(t, options{anonymous: true})
	open.want(open.call("POST", "/v1/admin/force-release", "", validBodies["/v1/admin/force-release"]), 200)
	open.want(open.call("GET", "/v1/admin/audit", "", nil), 200)

	// DNS rebinding: a page on evil.example resolving to 127.0.0.1.
	req, _ := http.NewRequest("GET", open.url+"/v1/locks", nil)
	req.Host = "evil.example:7070"
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 403 {
		t.Errorf("anonymous request for another host name: status %d, want 403", res.StatusCode)
	}
	for _, host := range []string{"localhost:7070", "127.0.0.1", "[::1]:7070"} {
		req, _ := http.NewRequest("GET", open.url+"/v1/locks", nil)
		req.Host = host
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Errorf("anonymous request for host %s: status %d, want 200", host, res.StatusCode)
		}
	}

	closed := newHarness(t, options{tokens: []server.Token{}})
	wantError(t, closed.call("GET", "/v1/locks", "", nil), 401, "unauthenticated", "")

	// Tokens configured: anonymous is not honoured.
	both := newHarness(t, options{tokens: defaultTokens(), anonymous: true})
	wantError(t, both.call("GET", "/v1/locks", "", nil), 401, "unauthenticated", "")
}

func TestParseTokens(t *testing.T) {
	t.Parallel()
	// Spaces around a role or a secret are not part of it: a request's
	// token is read trimmed, so " r" would never match.
	tokens, err := server.ParseTokens(" admin:a:b , reader: r,,client :c ")
	if err != nil {
		t.Fatal(err)
	}
	want := []server.Token{{Role: server.Admin, Secret: "a:b"}, {Role: server.Reader, Secret: "r"}, {Role: server.Client, Secret: "c"}}
	if len(tokens) != len(want) {
		t.Fatalf("tokens = %v", tokens)
	}
	for i := range want {
		if tokens[i] != want[i] {
			t.Errorf("token %d = %v, want %v", i, tokens[i], want[i])
		}
	}
	for _, bad := range []string{"admin", "admin:", "admin: ", "root:x", ":x"} {
		if _, err := server.ParseTokens(bad); err == nil {
			t.Errorf("ParseTokens(%q) accepted", bad)
		}
	}
	// One secret cannot grant two roles; a secret with spaces around it
	// could never be presented.
	for _, tokens := range [][]server.Token{
		{{Role: server.Admin, Secret: "x"}, {Role: server.Client, Secret: "x"}},
		{{Role: server.Admin, Secret: " x"}},
	} {
		m, err := holdfast.New(memstore.New(memstore.Config{}), holdfast.Config{SweepInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := server.New(server.Config{Manager: m, Tokens: tokens}); err == nil {
			t.Errorf("server.New accepted tokens %v", tokens)
		}
		m.Close()
	}
}
