package httplock_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/client"
	"github.com/holdfast/holdfast/httplock"
	"github.com/holdfast/holdfast/implicit"
	"github.com/holdfast/holdfast/memstore"
	"github.com/holdfast/holdfast/server"
)

// opCounter counts the Manager's operations by name.
type opCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *opCounter) Observe(op string, _ time.Duration, _ error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[op]++
}

func (c *opCounter) count(op string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[op]
}

// app is a small application behind the middleware: sign-in comes from
// headers, GET /edit opens an edit page on doc/1, GET /whoami shows the
// request's owner.
type app struct {
	mw   *httplock.Middleware
	svc  holdfast.Service
	ops  *opCounter
	url  string
	now  *time.Time
	nowM *sync.Mutex
}

func services(t *testing.T, f func(t *testing.T, a *app)) {
	for _, remote := range []bool{false, true} {
		name := "manager"
		if remote {
			name = "client"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ops := &opCounter{n: map[string]int{}}
			m, err := holdfast.New(memstore.New(memstore.Config{}), holdfast.Config{SweepInterval: -1, Observer: ops})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { m.Close() })
			var svc holdfast.Service = m
			if remote {
				srv, err := server.New(server.Config{Manager: m, Anonymous: true, Logger: slog.New(slog.DiscardHandler)})
				if err != nil {
					t.Fatal(err)
				}
				ts := httptest.NewServer(srv)
				t.Cleanup(ts.Close)
				if svc, err = client.New(client.Config{BaseURL: ts.URL}); err != nil {
					t.Fatal(err)
				}
			}
			f(t, newApp(t, svc, ops))
		})
	}
}

func newApp(t *testing.T, svc holdfast.Service, ops *opCounter) *app {
	a := &app{svc: svc, ops: ops, now: new(time.Time), nowM: new(sync.Mutex)}
	*a.now = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	mw, err := httplock.New(httplock.Config{
		Service: svc,
		Owner: func(r *http.Request) (holdfast.Owner, bool) {
			sid := r.Header.Get("X-Session")
			return holdfast.Owner{Session: sid, User: r.Header.Get("X-User"), Name: r.Header.Get("X-User") + " (name)"}, sid != ""
		},
		IdleTimeout:    5 * time.Minute,
		KeepAliveEvery: time.Minute,
		Now: func() time.Time {
			a.nowM.Lock()
			defer a.nowM.Unlock()
			return *a.now
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	a.mw = mw
	mux := http.NewServeMux()
	mux.Handle("/holdfast/", mw.Handler())
	mux.HandleFunc("GET /edit", func(w http.ResponseWriter, r *http.Request) {
		r, page, err := mw.StartPage(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		o, _ := implicit.OwnerFrom(r.Context())
		res, err := svc.Acquire(r.Context(), holdfast.AcquireRequest{Keys: []string{"doc/1"}, Owner: o, Takeover: r.URL.Query().Has("takeover")})
		if err != nil {
			http.Error(w, err.Error(), http.StatusLocked)
			return
		}
		json.NewEncoder(w).Encode(editPage{Page: page, Lock: res.Locks[0]})
	})
	mux.HandleFunc("/whoami", func(w http.ResponseWriter, r *http.Request) {
		o, _ := implicit.OwnerFrom(r.Context())
		json.NewEncoder(w).Encode(o)
	})
	ts := httptest.NewServer(mw.Wrap(mux))
	t.Cleanup(ts.Close)
	a.url = ts.URL
	return a
}

type editPage struct {
	Page httplock.Page
	Lock holdfast.Lock
}

func (a *app) advance(d time.Duration) {
	a.nowM.Lock()
	defer a.nowM.Unlock()
	*a.now = a.now.Add(d)
}

// do sends a request as the person with session sid and user.
func (a *app) do(t *testing.T, sid, user, method, path, contentType, body string, header map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, a.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if sid != "" {
		req.Header.Set("X-Session", sid)
		req.Header.Set("X-User", user)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	return res
}

func (a *app) edit(t *testing.T, sid, user string, takeover bool) editPage {
	t.Helper()
	path := "/edit"
	if takeover {
		path += "?takeover=1"
	}
	res := a.do(t, sid, user, "GET", path, "", "", nil)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", path, res.Status)
	}
	var p editPage
	if err := json.NewDecoder(res.Body).Decode(&p); err != nil {
		t.Fatal(err)
	}
	return p
}

func (a *app) heartbeat(t *testing.T, sid, user string, p editPage) httplock.Status {
	t.Helper()
	form := url.Values{httplock.PageField: {p.Page.ID}, httplock.TokenField: {p.Page.Token},
		"key": {p.Lock.Key}, "lock_token": {strconv.FormatUint(p.Lock.Token, 10)}}
	res := a.do(t, sid, user, "POST", "/holdfast/heartbeat", "application/x-www-form-urlencoded", form.Encode(), nil)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("heartbeat: %s", res.Status)
	}
	var st httplock.Status
	if err := json.NewDecoder(res.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

func (a *app) holders(t *testing.T) []holdfast.Lock {
	t.Helper()
	page, err := a.svc.Locks(context.Background(), holdfast.LockQuery{Key: "doc/1"})
	if err != nil {
		t.Fatal(err)
	}
	return page.Locks
}

func TestOwnerInContextAndKeepAliveThrottled(t *testing.T) {
	t.Parallel()
	services(t, func(t *testing.T, a *app) {
		var o holdfast.Owner
		for range 3 {
			res := a.do(t, "app-secret-session", "bob", "GET", "/whoami", "", "", nil)
			if err := json.NewDecoder(res.Body).Decode(&o); err != nil {
				t.Fatal(err)
			}
		}
		if o.User != "bob" || o.Name != "bob (name)" || o.Session == "" || strings.Contains(o.Session, "app-secret-session") {
			t.Fatalf("owner = %+v: want bob with a session that does not show the application's session id", o)
		}
		if n := a.ops.count("heartbeat"); n != 1 {
			t.Fatalf("3 requests within KeepAliveEvery made %d heartbeats, want 1", n)
		}
		a.advance(time.Minute)
		a.do(t, "app-secret-session", "bob", "GET", "/whoami", "", "", nil)
		if n := a.ops.count("heartbeat"); n != 2 {
			t.Fatalf("after KeepAliveEvery: %d heartbeats, want 2", n)
		}
		s, err := a.svc.Sessions(context.Background(), holdfast.SessionQuery{Session: o.Session})
		if err != nil || len(s.Sessions) != 1 || time.Duration(s.Sessions[0].IdleTimeout) != 5*time.Minute {
			t.Fatalf("session = %+v, %v; want it alive with the 5m idle timeout", s, err)
		}
		// Nobody signed in: no owner.
		res := a.do(t, "", "", "GET", "/whoami", "", "", nil)
		if err := json.NewDecoder(res.Body).Decode(&o); err != nil || o.Session != "" {
			t.Fatalf("anonymous owner = %+v, %v", o, err)
		}
	})
}

func TestPageTokenIsCheckedAndBoundToTheSession(t *testing.T) {
	t.Parallel()
	services(t, func(t *testing.T, a *app) {
		p := a.edit(t, "s1", "bob", false)
		bad := url.Values{httplock.PageField: {p.Page.ID}, httplock.TokenField: {"forged"}}
		if res := a.do(t, "s1", "bob", "POST", "/holdfast/release", "application/x-www-form-urlencoded", bad.Encode(), nil); res.StatusCode != http.StatusForbidden {
			t.Fatalf("forged token: %s, want 403", res.Status)
		}
		// Another person replaying the page's fields is refused too.
		good := url.Values{httplock.PageField: {p.Page.ID}, httplock.TokenField: {p.Page.Token}}
		if res := a.do(t, "s2", "eve", "POST", "/holdfast/release", "application/x-www-form-urlencoded", good.Encode(), nil); res.StatusCode != http.StatusForbidden {
			t.Fatalf("other session: %s, want 403", res.Status)
		}
		// The same person signed in again: the page's script is told why,
		// in JSON it can explain.
		res := a.do(t, "s1-again", "bob", "POST", "/holdfast/heartbeat", "application/x-www-form-urlencoded", good.Encode(), nil)
		var st httplock.Status
		if err := json.NewDecoder(res.Body).Decode(&st); err != nil || res.StatusCode != http.StatusForbidden ||
			st.Reason != "other_session" || !strings.Contains(st.Message, "before you last signed in") {
			t.Fatalf("heartbeat of a page of an earlier sign-in: %s %+v (%v), want 403 other_session", res.Status, st, err)
		}
		// No page at all.
		if res := a.do(t, "s1", "bob", "POST", "/holdfast/release", "application/x-www-form-urlencoded", "", nil); res.StatusCode != http.StatusForbidden {
			t.Fatalf("no page: %s, want 403", res.Status)
		}
		if hs := a.holders(t); len(hs) != 1 {
			t.Fatalf("a refused release released: %v", hs)
		}
		// The page's session has the idle timeout before its first heartbeat.
		ss, err := a.svc.Sessions(context.Background(), holdfast.SessionQuery{Session: p.Lock.Owner.Session})
		if err != nil || len(ss.Sessions) != 1 || time.Duration(ss.Sessions[0].IdleTimeout) != 5*time.Minute {
			t.Fatalf("page session = %+v, %v; want the 5m idle timeout", ss, err)
		}
		if st := a.heartbeat(t, "s1", "bob", p); !st.Held || st.ExpiresAt == nil {
			t.Fatalf("heartbeat = %+v, want held with its expiry", st)
		}
	})
}

func TestReleaseBeaconBodies(t *testing.T) {
	t.Parallel()
	services(t, func(t *testing.T, a *app) {
		for _, beacon := range []struct{ contentType, body func(httplock.Page) string }{
			{func(httplock.Page) string { return "text/plain;charset=UTF-8" }, func(p httplock.Page) string {
				return url.Values{httplock.PageField: {p.ID}, httplock.TokenField: {p.Token}}.Encode()
			}},
			{func(httplock.Page) string { return "application/x-www-form-urlencoded;charset=UTF-8" }, func(p httplock.Page) string {
				return url.Values{httplock.PageField: {p.ID}, httplock.TokenField: {p.Token}}.Encode()
			}},
			{func(httplock.Page) string { return "multipart/form-data; boundary=XX" }, func(p httplock.Page) string {
				return "--XX\r\nContent-Disposition: form-data; name=\"holdfast_page\"\r\n\r\n" + p.ID +
					"\r\n--XX\r\nContent-Disposition: form-data; name=\"holdfast_token\"\r\n\r\n" + p.Token + "\r\n--XX--\r\n"
			}},
		} {
			p := a.edit(t, "s1", "bob", false)
			res := a.do(t, "s1", "bob", "POST", "/holdfast/release", beacon.contentType(p.Page), beacon.body(p.Page), nil)
			if res.StatusCode != http.StatusNoContent {
				t.Fatalf("%s beacon: %s", beacon.contentType(p.Page), res.Status)
			}
			if hs := a.holders(t); len(hs) != 0 {
				t.Fatalf("%s beacon left %v", beacon.contentType(p.Page), hs)
			}
			if st := a.heartbeat(t, "s1", "bob", p); st.Held || st.Reason != string(holdfast.LostSessionEnded) {
				t.Fatalf("heartbeat of a released page = %+v", st)
			}
		}
	})
}

func TestHeartbeatSaysWhyTheLockIsGone(t *testing.T) {
	t.Parallel()
	services(t, func(t *testing.T, a *app) {
		ctx := context.Background()
		p := a.edit(t, "s1", "bob", false)
		if _, err := a.svc.ForceRelease(ctx, holdfast.ForceReleaseRequest{Keys: []string{"doc/1"}, Reason: "month-end close", Actor: "Carol"}); err != nil {
			t.Fatal(err)
		}
		st := a.heartbeat(t, "s1", "bob", p)
		if st.Held || st.Reason != "force_released" || st.Actor != "Carol" || st.ForceReason != "month-end close" {
			t.Fatalf("after force release: %+v", st)
		}

		// The same person's second tab takes over; the first tab learns it.
		tab1 := a.edit(t, "s1", "bob", false)
		if res := a.do(t, "s1", "bob", "GET", "/edit", "", "", nil); res.StatusCode != http.StatusLocked {
			t.Fatalf("second tab without takeover: %s, want refused", res.Status)
		}
		tab2 := a.edit(t, "s1", "bob", true)
		if st := a.heartbeat(t, "s1", "bob", tab1); st.Held || st.Reason != "taken_over" {
			t.Fatalf("tab 1 after takeover: %+v", st)
		}
		if st := a.heartbeat(t, "s1", "bob", tab2); !st.Held {
			t.Fatalf("tab 2: %+v", st)
		}
	})
}

func TestEndSessionReleasesEveryPage(t *testing.T) {
	t.Parallel()
	services(t, func(t *testing.T, a *app) {
		ctx := context.Background()
		p := a.edit(t, "s1", "bob", false)
		if err := a.mw.EndSession(ctx, holdfast.Owner{Session: "s1", User: "bob"}); err != nil {
			t.Fatal(err)
		}
		if hs := a.holders(t); len(hs) != 0 {
			t.Fatalf("after logout: %v", hs)
		}
		if st := a.heartbeat(t, "s1", "bob", p); st.Held || st.Reason != "session_ended" {
			t.Fatalf("page after logout: %+v", st)
		}
		// Another person's pages are untouched by bob's logout.
		a.edit(t, "s2", "alice", false)
		if err := a.mw.EndSession(ctx, holdfast.Owner{Session: "s1", User: "bob"}); err != nil {
			t.Fatal(err)
		}
		if hs := a.holders(t); len(hs) != 1 || hs[0].Owner.User != "alice" {
			t.Fatalf("alice's lock after bob's logout: %v", hs)
		}
	})
}

func TestScriptIsServed(t *testing.T) {
	t.Parallel()
	services(t, func(t *testing.T, a *app) {
		res := a.do(t, "", "", "GET", "/holdfast/holdfast-edit.js", "", "", nil)
		if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/javascript") {
			t.Fatalf("script: %s %s", res.Status, res.Header.Get("Content-Type"))
		}
		p := a.edit(t, "s1", "bob", false)
		tag := string(a.mw.ScriptTag(p.Page, p.Lock))
		for _, want := range []string{`src="/holdfast/holdfast-edit.js"`, `data-page="` + p.Page.ID + `"`, `data-key="doc/1"`, `data-heartbeat="20000"`, `data-hidden-heartbeat="100000"`} {
			if !strings.Contains(tag, want) {
				t.Errorf("script tag %s lacks %s", tag, want)
			}
		}
	})
}

func TestConfigRejectsHeartbeatsOutsideTheIdleTimeout(t *testing.T) {
	t.Parallel()
	cfg := httplock.Config{
		Service:       &holdfast.Manager{},
		Owner:         func(*http.Request) (holdfast.Owner, bool) { return holdfast.Owner{}, false },
		IdleTimeout:   time.Minute,
		PageHeartbeat: 2 * time.Minute,
	}
	if _, err := httplock.New(cfg); err == nil || !strings.Contains(err.Error(), "idle timeout") {
		t.Fatalf("err = %v", err)
	}
	if _, err := httplock.New(httplock.Config{Owner: cfg.Owner}); err == nil {
		t.Fatal("no service accepted")
	}
	cfg.PageHeartbeat, cfg.ReleaseInactivePageAfter = 10*time.Second, 10*time.Second
	if _, err := httplock.New(cfg); err == nil || !strings.Contains(err.Error(), "ReleaseInactivePageAfter 10s must be longer than PageHeartbeat 10s") {
		t.Fatalf("a page released before its first check: err = %v", err)
	}
}

func TestScriptTagCarriesTheInactivePageLimit(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		set  time.Duration
		want string
	}{
		{0, `data-release-inactive="3600000"`}, // an hour by default
		{90 * time.Second, `data-release-inactive="90000"`},
		{-1, `data-release-inactive="0"`}, // never
	} {
		mw, err := httplock.New(httplock.Config{
			Service:                  &holdfast.Manager{},
			Owner:                    func(*http.Request) (holdfast.Owner, bool) { return holdfast.Owner{}, false },
			ReleaseInactivePageAfter: c.set,
		})
		if err != nil {
			t.Fatal(err)
		}
		if tag := string(mw.ScriptTag(httplock.Page{ID: "p", Token: "t"}, holdfast.Lock{Key: "doc/1"})); !strings.Contains(tag, c.want) {
			t.Errorf("ReleaseInactivePageAfter %s: %s lacks %s", c.set, tag, c.want)
		}
	}
}

func TestHoldersTellAReadOnlyPageWhoHoldsTheKey(t *testing.T) {
	t.Parallel()
	services(t, func(t *testing.T, a *app) {
		holders := func(sid, user, key string) (int, httplock.Holders) {
			t.Helper()
			res := a.do(t, sid, user, "GET", "/holdfast/holders?key="+url.QueryEscape(key), "", "", nil)
			var hs httplock.Holders
			if res.StatusCode == http.StatusOK {
				if err := json.NewDecoder(res.Body).Decode(&hs); err != nil {
					t.Fatal(err)
				}
			}
			return res.StatusCode, hs
		}
		p := a.edit(t, "s1", "bob", false)
		code, hs := holders("s2", "ann", "doc/1")
		if code != http.StatusOK || len(hs.Locks) != 1 || hs.More {
			t.Fatalf("held: %d %+v", code, hs)
		}
		h := hs.Locks[0]
		if h.Key != "doc/1" || h.Token != p.Lock.Token || h.Name != "bob (name)" || h.Mine ||
			!time.Time(h.AcquiredAt).Equal(p.Lock.AcquiredAt) || !time.Time(h.ExpiresAt).Equal(p.Lock.ExpiresAt) {
			t.Fatalf("holder %+v, want the lock of %+v", h, p.Lock)
		}
		// Locks above and below the key stand in the way too.
		if _, hs := holders("s2", "ann", "doc"); len(hs.Locks) != 1 {
			t.Fatalf("the parent of a held key: %+v", hs)
		}
		if _, hs := holders("s1", "bob", "doc/1/part"); len(hs.Locks) != 1 || !hs.Locks[0].Mine {
			t.Fatalf("a child of the holder's own key: %+v", hs)
		}
		if _, hs := holders("s2", "ann", "doc/2"); len(hs.Locks) != 0 {
			t.Fatalf("another key: %+v", hs)
		}
		// Asking is not activity: it heartbeats nobody's session.
		before := a.ops.count("heartbeat")
		holders("s3", "cid", "doc/1")
		holders("s3", "cid", "doc/1")
		if n := a.ops.count("heartbeat") - before; n != 0 {
			t.Fatalf("asking who holds a key made %d heartbeats", n)
		}

		a.do(t, "s1", "bob", "POST", "/holdfast/release", "application/x-www-form-urlencoded",
			url.Values{httplock.PageField: {p.Page.ID}, httplock.TokenField: {p.Page.Token}}.Encode(), nil)
		if _, hs := holders("s2", "ann", "doc/1"); len(hs.Locks) != 0 {
			t.Fatalf("after the release: %+v", hs)
		}

		for _, c := range []struct {
			sid, key string
			want     int
		}{
			{"", "doc/1", http.StatusForbidden},     // nobody signed in
			{"s2", "", http.StatusBadRequest},       // no key would list every lock
			{"s2", "doc//1", http.StatusBadRequest}, // not a key
		} {
			if code, _ := holders(c.sid, "ann", c.key); code != c.want {
				t.Errorf("sid %q key %q: %d, want %d", c.sid, c.key, code, c.want)
			}
		}
	})
}

func TestWatchScriptTag(t *testing.T) {
	t.Parallel()
	services(t, func(t *testing.T, a *app) {
		if tag := a.mw.WatchScriptTag("doc/1", nil); tag != "" {
			t.Fatalf("nothing held: %s", tag)
		}
		p := a.edit(t, "s1", "bob", false)
		tag := string(a.mw.WatchScriptTag("doc/1", a.holders(t)))
		for _, want := range []string{
			`data-watch="doc/1"`,
			`data-locks="doc/1@` + strconv.FormatUint(p.Lock.Token, 10) + `"`,
			`data-names="[&#34;bob (name)&#34;]"`,
			`data-prefix="/holdfast/"`,
		} {
			if !strings.Contains(tag, want) {
				t.Errorf("%s lacks %s", tag, want)
			}
		}
	})
}
