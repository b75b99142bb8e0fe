package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/client"
)

// These tests check the client's half of the wire contract against the
// literal bodies of API.md, served by a handler that answers exactly that.
// The tests in server_test.go run the same client against the real server.

const bobLock = `{"key": "policy/12345", "requested_key": "policy/12345", "mode": "exclusive",
 "owner": {"session": "s-81", "user": "u-7", "name": "Bob Smith"},
 "acquired_at": "2026-11-30T10:47:00.000Z", "expires_at": "2026-11-30T12:47:00.000Z",
 "token": 4711, "note": "underwriting review"}`

var bobAcquired = time.Date(2026, 11, 30, 10, 47, 0, 0, time.UTC)

// cannedServer answers every request with status, headers and body, and
// records the last request it saw.
type cannedServer struct {
	*httptest.Server
	last chan seenRequest
}

type seenRequest struct {
	method, path, query, auth, contentType, lastEventID string
	accept, userAgent                                   string
	body                                                map[string]any
}

func newCannedServer(t *testing.T, status int, header http.Header, body string) *cannedServer {
	t.Helper()
	s := &cannedServer{last: make(chan seenRequest, 1)}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen := seenRequest{method: r.Method, path: r.URL.Path, query: r.URL.RawQuery,
			auth: r.Header.Get("Authorization"), contentType: r.Header.Get("Content-Type"),
			lastEventID: r.Header.Get("Last-Event-ID"), accept: r.Header.Get("Accept"), userAgent: r.Header.Get("User-Agent")}
		if b, _ := io.ReadAll(r.Body); len(b) > 0 {
			if err := json.Unmarshal(b, &seen.body); err != nil {
				t.Errorf("request body is not JSON: %v: %s", err, b)
			}
		}
		select {
		case s.last <- seen:
		default:
		}
		for k, v := range header {
			w.Header()[k] = v
		}
		if w.Header().Get("Content-Type") == "" {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	t.Cleanup(s.Close)
	return s
}

func newClient(t *testing.T, baseURL, token string) *client.Client {
	t.Helper()
	c, err := client.New(client.Config{BaseURL: baseURL, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func acquireBob(c *client.Client) error {
	_, err := c.Acquire(context.Background(), holdfast.AcquireRequest{
		Keys: []string{"policy/12345"}, Owner: holdfast.Owner{Session: "s-82"}})
	return err
}

func TestDecodeLocked(t *testing.T) {
	t.Parallel()
	srv := newCannedServer(t, 423, nil, `{"error": {"code": "locked", "message": "policy/12345 is being edited by Bob Smith since 10:47 UTC (until 12:47 UTC)",
           "conflicts": [{"key": "policy/12345", "requested_key": "policy/12345", "holders": [`+bobLock+`]}]}}`)
	err := acquireBob(newClient(t, srv.URL, ""))
	if !errors.Is(err, holdfast.ErrLocked) {
		t.Fatalf("err = %v, want ErrLocked", err)
	}
	var le *holdfast.LockedError
	if !errors.As(err, &le) {
		t.Fatalf("err is %T, want *holdfast.LockedError", err)
	}
	if le.Message != "policy/12345 is being edited by Bob Smith since 10:47 UTC (until 12:47 UTC)" {
		t.Errorf("Message = %q", le.Message)
	}
	if len(le.Conflicts) != 1 || len(le.Conflicts[0].Holders) != 1 {
		t.Fatalf("Conflicts = %+v, want one conflict with one holder", le.Conflicts)
	}
	h := le.Conflicts[0].Holders[0]
	if h.Owner != (holdfast.Owner{Session: "s-81", User: "u-7", Name: "Bob Smith"}) ||
		h.Token != 4711 || h.Mode != holdfast.Exclusive || !h.AcquiredAt.Equal(bobAcquired) ||
		!h.ExpiresAt.Equal(bobAcquired.Add(2*time.Hour)) || h.Note != "underwriting review" {
		t.Errorf("holder = %+v", h)
	}
}

func TestDecodeLockLost(t *testing.T) {
	t.Parallel()
	srv := newCannedServer(t, 409, nil, `{"error": {"code": "lock_lost", "message": "policy/12345 was force-released by alice: Bob is on leave",
		"reason": "force_released", "lock": `+bobLock+`, "actor": "alice", "force_reason": "Bob is on leave"}}`)
	_, err := newClient(t, srv.URL, "").Renew(context.Background(), holdfast.RenewRequest{Session: "s-81"})
	var lost *holdfast.LockLostError
	if !errors.Is(err, holdfast.ErrLockLost) || !errors.As(err, &lost) {
		t.Fatalf("err = %#v, want *holdfast.LockLostError", err)
	}
	if lost.Reason != holdfast.LostForceReleased || lost.Actor != "alice" || lost.ForceReason != "Bob is on leave" {
		t.Errorf("lost = %+v", lost)
	}
	if lost.Lock == nil || lost.Lock.Token != 4711 || lost.Lock.Key != "policy/12345" {
		t.Errorf("Lock = %+v, want the lost grant", lost.Lock)
	}
	if !strings.Contains(lost.Error(), "force-released by alice") {
		t.Errorf("Error() = %q, want the server's message", lost.Error())
	}
}

func TestDecodeSessionEnded(t *testing.T) {
	t.Parallel()
	srv := newCannedServer(t, 409, nil, `{"error": {"code": "lock_lost", "message": "session s-81 has ended",
		"reason": "session_ended", "released": [`+bobLock+`]}}`)
	_, err := newClient(t, srv.URL, "").Heartbeat(context.Background(), holdfast.HeartbeatRequest{Session: "s-81"})
	var lost *holdfast.LockLostError
	if !errors.As(err, &lost) {
		t.Fatalf("err = %#v, want *holdfast.LockLostError", err)
	}
	if lost.Reason != holdfast.LostSessionEnded || lost.Lock != nil || len(lost.Released) != 1 || lost.Released[0].Token != 4711 {
		t.Errorf("lost = %+v", lost)
	}
}

func TestDecodeStaleToken(t *testing.T) {
	t.Parallel()
	srv := newCannedServer(t, 409, nil, `{"error": {"code": "stale_token", "message": "token 4700 is not the current grant's token 4711", "lock": `+bobLock+`}}`)
	_, err := newClient(t, srv.URL, "").Verify(context.Background(), holdfast.VerifyRequest{Key: "policy/12345", Session: "s-81", Token: 4700})
	var stale *holdfast.StaleTokenError
	if !errors.Is(err, holdfast.ErrStaleToken) || errors.Is(err, holdfast.ErrLockLost) || !errors.As(err, &stale) {
		t.Fatalf("err = %#v, want only *holdfast.StaleTokenError", err)
	}
	if stale.Lock.Token != 4711 || stale.Message != "token 4700 is not the current grant's token 4711" {
		t.Errorf("stale = %+v", stale)
	}
}

func TestDecodeInvalid(t *testing.T) {
	t.Parallel()
	srv := newCannedServer(t, 400, nil, `{"error": {"code": "invalid", "message": "keys[0]: key \"/x\" starts with /", "field": "keys[0]"}}`)
	err := acquireBob(newClient(t, srv.URL, ""))
	var inv *holdfast.InvalidError
	if !errors.Is(err, holdfast.ErrInvalid) || !errors.As(err, &inv) {
		t.Fatalf("err = %#v, want *holdfast.InvalidError", err)
	}
	if inv.Field != "keys[0]" || !strings.Contains(inv.Message, "starts with /") {
		t.Errorf("invalid = %+v", inv)
	}
}

func TestDecodeSentinels(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status int
		code   string
		want   error
	}{
		{401, "unauthenticated", holdfast.ErrUnauthenticated},
		{403, "forbidden", holdfast.ErrForbidden},
		{404, "not_found", holdfast.ErrNotFound},
	} {
		t.Run(tc.code, func(t *testing.T) {
			t.Parallel()
			srv := newCannedServer(t, tc.status, nil, `{"error": {"code": "`+tc.code+`", "message": "server says `+tc.code+`"}}`)
			err := acquireBob(newClient(t, srv.URL, ""))
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), "server says "+tc.code) {
				t.Errorf("Error() = %q, want the server's message", err)
			}
		})
	}
}

func TestDecodeUnavailable(t *testing.T) {
	t.Parallel()
	srv := newCannedServer(t, 503, http.Header{"Retry-After": {"7"}},
		`{"error": {"code": "unavailable", "message": "the lock store cannot be reached"}}`)
	err := acquireBob(newClient(t, srv.URL, ""))
	var un *holdfast.UnavailableError
	if !errors.Is(err, holdfast.ErrUnavailable) || !errors.As(err, &un) {
		t.Fatalf("err = %#v, want *holdfast.UnavailableError", err)
	}
	if un.RetryAfter != 7*time.Second {
		t.Errorf("RetryAfter = %v, want 7s", un.RetryAfter)
	}
	if !strings.Contains(un.Error(), "the lock store cannot be reached") {
		t.Errorf("Error() = %q, want the server's message", un.Error())
	}
}

// A holdfast server's 503 says "lock store unavailable, retry later: "
// and its cause; the client's error says it once, not twice.
func TestDecodeUnavailableSaysItOnce(t *testing.T) {
	t.Parallel()
	for msg, want := range map[string]string{
		"lock store unavailable, retry later: pgstore: store unavailable: PostgreSQL did not answer within 5s": "lock store unavailable, retry later: pgstore: store unavailable: PostgreSQL did not answer within 5s",
		"lock store unavailable, retry later": "lock store unavailable, retry later",
	} {
		srv := newCannedServer(t, 503, http.Header{"Retry-After": {"1"}}, `{"error": {"code": "unavailable", "message": "`+msg+`"}}`)
		if err := acquireBob(newClient(t, srv.URL, "")); err == nil || err.Error() != want {
			t.Errorf("from %q: %v, want %q", msg, err, want)
		}
	}
}

// A gateway's page in front of a server that is down means the same as the
// server's own 503: retry later.
func TestDecodeGatewayPage(t *testing.T) {
	t.Parallel()
	srv := newCannedServer(t, 502, http.Header{"Content-Type": {"text/html"}}, `<html><body>Bad Gateway</body></html>`)
	err := acquireBob(newClient(t, srv.URL, ""))
	if !errors.Is(err, holdfast.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
}

func TestDecodeUndefinedError(t *testing.T) {
	t.Parallel()
	srv := newCannedServer(t, 500, nil, `{"error": {"code": "internal", "message": "boom"}}`)
	err := acquireBob(newClient(t, srv.URL, ""))
	var re *client.ResponseError
	if !errors.As(err, &re) || re.StatusCode != 500 || re.Code != "internal" || re.Message != "boom" {
		t.Fatalf("err = %#v, want *client.ResponseError 500 internal boom", err)
	}
	for _, s := range []error{holdfast.ErrLocked, holdfast.ErrLockLost, holdfast.ErrUnavailable, holdfast.ErrInvalid} {
		if errors.Is(err, s) {
			t.Errorf("a 500 matches %v", s)
		}
	}
}

func TestTransportFailureIsUnavailable(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: connection refused
	c := newClient(t, "http://"+addr, "")
	err = acquireBob(c)
	var un *holdfast.UnavailableError
	if !errors.Is(err, holdfast.ErrUnavailable) || !errors.As(err, &un) {
		t.Fatalf("err = %#v, want *holdfast.UnavailableError", err)
	}
	var opErr *net.OpError
	if !errors.As(err, &opErr) {
		t.Errorf("err = %v does not wrap the transport's *net.OpError", err)
	}
	if err := c.Ping(context.Background()); !errors.Is(err, holdfast.ErrUnavailable) {
		t.Errorf("Ping = %v, want ErrUnavailable", err)
	}
}

// A server that cannot be reached is told apart from one whose store is
// unavailable: the error names the server, and not its password.
func TestTransportFailureNamesTheServer(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c := newClient(t, "http://bob:s3cret@"+addr+"/holdfast", "")
	_, eventsErr := c.Events(context.Background(), "", "")
	for _, err := range []error{acquireBob(c), eventsErr} {
		var unreachable *client.UnreachableError
		if !errors.As(err, &unreachable) || unreachable.URL != "http://bob:xxxxx@"+addr+"/holdfast" {
			t.Errorf("err = %#v, want *client.UnreachableError with the base URL", err)
		}
		msg := fmt.Sprint(err)
		if want := "cannot reach the holdfast server at http://bob:xxxxx@" + addr + "/holdfast: dial tcp " + addr; !strings.HasPrefix(msg, want) {
			t.Errorf("Error() = %q, want it to start %q", msg, want)
		}
		if strings.Contains(msg, "store") || strings.Contains(msg, "s3cret") || strings.Contains(msg, "/v1/") {
			t.Errorf("Error() = %q blames the store, shows the password or repeats the request's URL", msg)
		}
	}
}

func TestTimeoutIsUnavailable(t *testing.T) {
	t.Parallel()
	block := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-block:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(block) })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := newClient(t, srv.URL, "").Locks(ctx, holdfast.LockQuery{})
	if !errors.Is(err, holdfast.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want ErrUnavailable wrapping context.DeadlineExceeded", err)
	}
}

func TestRequestShape(t *testing.T) {
	t.Parallel()
	srv := newCannedServer(t, 200, nil, `{"locks": [`+bobLock+`]}`)
	c, err := client.New(client.Config{BaseURL: srv.URL + "/proxy/holdfast/", Token: "sekret"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Acquire(context.Background(), holdfast.AcquireRequest{
		Keys: []string{"policy/12345"}, Mode: holdfast.Shared,
		Owner: holdfast.Owner{Session: "s-81", User: "u-7", Name: "Bob Smith"},
		TTL:   holdfast.Duration(90 * time.Minute), IdleTimeout: holdfast.Duration(250 * time.Millisecond),
		Takeover: true, Note: "underwriting review",
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Locks) != 1 || res.Locks[0].Token != 4711 || res.Locks[0].Owner.Name != "Bob Smith" {
		t.Errorf("result = %+v", res)
	}
	seen := <-srv.last
	if seen.method != "POST" || seen.path != "/proxy/holdfast/v1/locks/acquire" {
		t.Errorf("request = %s %s", seen.method, seen.path)
	}
	if seen.auth != "Bearer sekret" || seen.contentType != "application/json" || seen.accept != "application/json" ||
		seen.userAgent != "holdfast-go-client" {
		t.Errorf("Authorization = %q, Content-Type = %q, Accept = %q, User-Agent = %q",
			seen.auth, seen.contentType, seen.accept, seen.userAgent)
	}
	want := map[string]any{
		"keys": []any{"policy/12345"}, "mode": "shared",
		"owner":       map[string]any{"session": "s-81", "user": "u-7", "name": "Bob Smith"},
		"ttl_seconds": 5400.0, "idle_timeout_seconds": 0.25, "takeover": true, "note": "underwriting review",
	}
	if got, _ := json.Marshal(seen.body); string(got) != mustJSON(t, want) {
		t.Errorf("body = %s\nwant   %s", got, mustJSON(t, want))
	}
}

func TestQueryShape(t *testing.T) {
	t.Parallel()
	srv := newCannedServer(t, 200, nil, `{"entries": [], "next": null}`)
	since := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	_, err := newClient(t, srv.URL, "").Audit(context.Background(), holdfast.AuditQuery{
		Key: "policy/12345", User: "u-7", Since: since, Limit: 10, After: "99"})
	if err != nil {
		t.Fatal(err)
	}
	seen := <-srv.last
	if seen.auth != "" || seen.contentType != "" || seen.userAgent != "holdfast-go-client" {
		t.Errorf("Authorization = %q, Content-Type = %q, User-Agent = %q", seen.auth, seen.contentType, seen.userAgent)
	}
	if seen.method != "GET" || seen.path != "/v1/admin/audit" ||
		seen.query != "after=99&key=policy%2F12345&limit=10&since=2026-11-30T10%3A00%3A00Z&user=u-7" {
		t.Errorf("request = %s %s?%s", seen.method, seen.path, seen.query)
	}
	if seen.body != nil {
		t.Errorf("a GET sent a body: %v", seen.body)
	}
}

func TestBatchDecode(t *testing.T) {
	t.Parallel()
	srv := newCannedServer(t, 200, nil, `{"results": [
		{"status": 200, "body": {"locks": [`+bobLock+`]}},
		{"status": 423, "error": {"code": "locked", "message": "policy/12345 is being edited by Bob Smith",
			"conflicts": [{"key": "policy/12345", "requested_key": "policy/12345", "holders": [`+bobLock+`]}]}},
		{"status": 200, "body": {"session": {"id": "s-81", "last_seen": "2026-11-30T10:50:00.000Z", "expires_at": null, "locks": 1}, "lost": []}},
		{"status": 400, "error": {"code": "invalid", "message": "ops[3].op: unknown op", "field": "ops[3].op"}}]}`)
	res, err := newClient(t, srv.URL, "").Batch(context.Background(), []client.Op{
		client.AcquireOp(holdfast.AcquireRequest{Keys: []string{"policy/12345"}, Owner: holdfast.Owner{Session: "s-81"}}),
		client.AcquireOp(holdfast.AcquireRequest{Keys: []string{"policy/12345"}, Owner: holdfast.Owner{Session: "s-82"}}),
		client.HeartbeatOp(holdfast.HeartbeatRequest{Session: "s-81"}),
		client.EndSessionOp(holdfast.EndSessionRequest{Session: "s-83"}),
	})
	if err != nil {
		t.Fatal(err)
	}
	seen := <-srv.last
	ops, _ := seen.body["ops"].([]any)
	if seen.path != "/v1/batch" || len(ops) != 4 || mustJSON(t, ops[2]) != `{"body":{"session":"s-81"},"op":"heartbeat"}` ||
		ops[3].(map[string]any)["op"] != "end_session" {
		t.Errorf("batch request = %s %v", seen.path, seen.body)
	}
	if res[0].Err != nil || res[0].Acquire == nil || res[0].Acquire.Locks[0].Token != 4711 {
		t.Errorf("result 0 = %+v", res[0])
	}
	var le *holdfast.LockedError
	if res[1].Status != 423 || !errors.As(res[1].Err, &le) || le.Conflicts[0].Holders[0].Owner.Name != "Bob Smith" || res[1].Acquire != nil {
		t.Errorf("result 1 = %+v", res[1])
	}
	if res[2].Err != nil || res[2].Heartbeat == nil || res[2].Heartbeat.Session.ID != "s-81" || res[2].Heartbeat.Session.Locks != 1 {
		t.Errorf("result 2 = %+v", res[2])
	}
	var inv *holdfast.InvalidError
	if !errors.As(res[3].Err, &inv) || inv.Field != "ops[3].op" {
		t.Errorf("result 3 = %+v", res[3])
	}
}

func TestEventStreamParse(t *testing.T) {
	t.Parallel()
	stream := ": connected\n\n" +
		"event: acquired\nid: 41\ndata: {\"id\": 41, \"at\": \"2026-11-30T10:47:00.000Z\", \"event\": \"acquired\", \"lock\": " +
		strings.ReplaceAll(bobLock, "\n", "") + "}\n\n" +
		": ping\n\n" +
		"event: force_released\nid: 42\ndata: {\"id\": 42, \"at\": \"2026-11-30T11:00:00.000Z\", \"event\": \"force_released\",\n" +
		"data:  \"lock\": " + strings.ReplaceAll(bobLock, "\n", "") + ", \"actor\": \"alice\", \"reason\": \"Bob is on leave\"}\n\n"
	srv := newCannedServer(t, 200, http.Header{"Content-Type": {"text/event-stream"}}, stream)
	s, err := newClient(t, srv.URL, "").Events(context.Background(), "policy", "40")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	seen := <-srv.last
	if seen.path != "/v1/events" || seen.query != "prefix=policy" || seen.lastEventID != "40" {
		t.Errorf("request = %s?%s Last-Event-ID %q", seen.path, seen.query, seen.lastEventID)
	}
	var got []holdfast.AuditEntry
	var ids []string
	for s.Next() {
		got = append(got, s.Entry())
		ids = append(ids, s.LastEventID())
	}
	if len(got) != 2 || got[0].Event != holdfast.EventAcquired || got[0].Lock.Token != 4711 ||
		got[1].Event != holdfast.EventForceReleased || got[1].Actor != "alice" || got[1].Reason != "Bob is on leave" {
		t.Fatalf("entries = %+v", got)
	}
	if strings.Join(ids, ",") != "41,42" {
		t.Errorf("ids = %v, want 41,42", ids)
	}
	// The server closed the stream: the caller is told to resume.
	if !errors.Is(s.Err(), holdfast.ErrUnavailable) {
		t.Errorf("Err = %v, want ErrUnavailable", s.Err())
	}
}

func TestEventStreamRefused(t *testing.T) {
	t.Parallel()
	srv := newCannedServer(t, 401, nil, `{"error": {"code": "unauthenticated", "message": "no bearer token"}}`)
	_, err := newClient(t, srv.URL, "").Events(context.Background(), "", "")
	if !errors.Is(err, holdfast.ErrUnauthenticated) {
		t.Fatalf("err = %v, want ErrUnauthenticated", err)
	}
}

func TestNewValidatesBaseURL(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"", "127.0.0.1:7070", "ftp://host", "http://", "http://host/?x=1"} {
		if _, err := client.New(client.Config{BaseURL: u}); err == nil {
			t.Errorf("New(%q) succeeded", u)
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
