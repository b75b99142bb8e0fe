package adminui_test

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/adminui"
	"github.com/holdfast/holdfast/memstore"
)

func TestLiveStreamNeedsASessionAndTellsOfChanges(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	b := e.browser()
	if p := b.get("/console/events"); p.status != http.StatusUnauthorized {
		t.Fatalf("stream without a console session: %d", p.status)
	}
	// A bearer token is not a console session.
	req, _ := http.NewRequest("GET", e.url+"/console/events", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	if p := b.do(req); p.status != http.StatusUnauthorized {
		t.Fatalf("stream with a bearer token: %d", p.status)
	}

	b.signIn(readerToken, "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ = http.NewRequestWithContext(ctx, "GET", e.url+"/console/events", nil)
	res, err := b.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	lines := bufio.NewScanner(res.Body)
	next := func(prefix string) string {
		t.Helper()
		for lines.Scan() {
			if strings.HasPrefix(lines.Text(), prefix) {
				return lines.Text()
			}
		}
		t.Fatalf("stream ended before %q: %v", prefix, lines.Err())
		return ""
	}
	next("event: hello")
	e.acquire("s-1", "u-1", "", "", "policy/5")
	if got := next("event: "); got != "event: lock" {
		t.Fatalf("after an acquire: %q", got)
	}
	if got := next("data: "); !strings.Contains(got, `"key":"policy/5"`) || !strings.Contains(got, `"event":"acquired"`) {
		t.Fatalf("event data: %q", got)
	}

	// Shutting down ends the stream, so a graceful shutdown need not wait.
	e.srv.CloseStreams()
	for lines.Scan() {
	}
	if ctx.Err() != nil {
		t.Fatal("the stream outlived CloseStreams")
	}
}

func TestConsoleSessionsExpire(t *testing.T) {
	t.Parallel()
	var clock atomic.Int64 // the console's clock, in Unix nanoseconds
	clock.Store(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC).UnixNano())
	st := memstore.New(memstore.Config{})
	mgr, err := holdfast.New(st, holdfast.Config{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mgr.Close(); st.Close() })
	console, err := adminui.New(adminui.Config{
		Manager:      mgr,
		Authenticate: func(token string) adminui.Access { return map[string]adminui.Access{"a": adminui.FullAccess}[token] },
		SessionTTL:   time.Hour,
		Now:          func() time.Time { return time.Unix(0, clock.Load()) },
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(console)
	t.Cleanup(hs.Close)

	req, _ := http.NewRequest("POST", hs.URL+"/console/signin", strings.NewReader(url.Values{"token": {"a"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", hs.URL)
	res, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	cookies := res.Cookies()
	if res.StatusCode != http.StatusSeeOther || len(cookies) != 1 {
		t.Fatalf("sign-in: %d %v", res.StatusCode, cookies)
	}
	status := func() int {
		req, _ := http.NewRequest("GET", hs.URL+"/", nil)
		req.AddCookie(cookies[0])
		res, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if got := status(); got != 200 {
		t.Fatalf("signed in: %d", got)
	}
	clock.Add(int64(time.Hour))
	if got := status(); got != http.StatusSeeOther {
		t.Fatalf("after the session's lifetime: %d, want a redirect to sign in", got)
	}
}
