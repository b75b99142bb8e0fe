package adminui_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/adminui"
	"github.com/holdfast/holdfast/memstore"
)

func TestSignInSetsAStrictSessionCookie(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	b := e.browser()

	if p := b.get("/"); p.status != http.StatusSeeOther || p.header.Get("Location") != "/console/signin" {
		t.Fatalf("GET / signed out: %d %s", p.status, p.header.Get("Location"))
	}
	// A script that sends no Origin is told how to sign in.
	p := b.post("/console/signin", url.Values{"token": {adminToken}}, "Origin", "")
	if want := "send an Origin header naming this server, such as " + b.e.url; p.status != http.StatusForbidden || !strings.Contains(p.body, want) {
		t.Fatalf("sign-in without Origin: %d, want 403 saying %q\n%s", p.status, want, p.body)
	}
	p = b.post("/console/signin", url.Values{"token": {"not-a-token"}})
	if p.status != http.StatusUnauthorized || !strings.Contains(p.body, "not accepted") || p.header.Get("Set-Cookie") != "" {
		t.Fatalf("bad token: %d, cookie %q\n%s", p.status, p.header.Get("Set-Cookie"), p.body)
	}

	p = b.post("/console/signin", url.Values{"token": {adminToken}, "name": {"alice"}})
	if p.status != http.StatusSeeOther {
		t.Fatalf("sign-in: %d %s", p.status, p.body)
	}
	res := http.Response{Header: p.header}
	cookies := res.Cookies()
	if len(cookies) != 1 {
		t.Fatalf("cookies: %v", cookies)
	}
	ck := cookies[0]
	if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/" || ck.Secure {
		t.Errorf("cookie over plain HTTP: %+v; want HttpOnly, SameSite=Strict, Path=/, not Secure", ck)
	}
	if strings.Contains(ck.Value, adminToken) {
		t.Error("the cookie carries the token")
	}
	if p := b.get("/"); p.status != 200 || !strings.Contains(p.body, "console:alice") {
		t.Fatalf("locks page: %d %s", p.status, p.body)
	}
	if strings.Contains(e.logs.String(), adminToken) {
		t.Error("the token is in the logs")
	}

	// Signing out ends the console session on the server, not only in the
	// browser.
	old := ck.Value
	if p := b.post("/console/signout", url.Values{"csrf": {b.csrf}}); p.status != http.StatusSeeOther {
		t.Fatalf("sign-out: %d %s", p.status, p.body)
	}
	req, _ := http.NewRequest("GET", e.url+"/", nil)
	req.AddCookie(&http.Cookie{Name: ck.Name, Value: old})
	res2, err := e.hs.Client().Transport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	res2.Body.Close()
	if res2.StatusCode != http.StatusSeeOther {
		t.Errorf("old cookie after sign-out: %d, want a redirect to sign in", res2.StatusCode)
	}
}

func TestCookieIsSecureOverTLS(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{tls: true})
	b := e.browser()
	p := b.post("/console/signin", url.Values{"token": {readerToken}})
	res := http.Response{Header: p.header}
	if cookies := res.Cookies(); len(cookies) != 1 || !cookies[0].Secure || !cookies[0].HttpOnly {
		t.Fatalf("cookies over TLS: %v", cookies)
	}
}

func TestCrossSiteFormPostIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.acquire("s-bob", "bob", "Bob Smith", "", "policy/1")
	b := e.browser()
	b.signIn(adminToken, "alice")
	form := url.Values{"csrf": {b.csrf}, "key": {"policy/1"}, "session": {"s-bob"}, "reason": {"cleanup"}}

	for name, headers := range map[string][]string{
		"foreign origin":         {"Origin", "https://evil.example"},
		"cross-site fetch":       {"Sec-Fetch-Site", "cross-site", "Origin", ""},
		"foreign referer":        {"Origin", "", "Referer", "https://evil.example/page"},
		"no origin, no referer":  {"Origin", ""},
		"same site, other port":  {"Origin", "http://127.0.0.1:1"},
		"same-site subdomain ok": {"Sec-Fetch-Site", "same-site"},
	} {
		p := b.post("/console/release", form, headers...)
		if p.status != http.StatusForbidden || !strings.Contains(p.body, "another site") {
			t.Errorf("%s: %d, want 403 refused as cross-site\n%s", name, p.status, p.body)
		}
	}
	// The right origin without the session's CSRF token is refused too.
	bad := url.Values{"key": {"policy/1"}, "session": {"s-bob"}, "reason": {"cleanup"}, "csrf": {"forged"}}
	if p := b.post("/console/release", bad); p.status != http.StatusForbidden {
		t.Errorf("forged CSRF token: %d", p.status)
	}
	// And another browser's CSRF token is no good in this session.
	other := e.browser()
	other.signIn(adminToken, "mallory")
	if p := other.post("/console/release", form); p.status != http.StatusForbidden {
		t.Errorf("CSRF token of another session: %d", p.status)
	}
	if !e.held("policy/1", "s-bob") {
		t.Fatal("a refused post released the lock")
	}

	// From the console's own page it works.
	if p := b.post("/console/release", form, "Referer", e.url+"/console/release"); p.status != http.StatusSeeOther {
		t.Fatalf("release from the console: %d %s", p.status, p.body)
	}
	if e.held("policy/1", "s-bob") {
		t.Fatal("the lock is still held")
	}
}

func TestReaderSeesButCannotRelease(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.acquire("s-bob", "bob", "Bob Smith", "", "policy/1")
	for _, token := range []string{readerToken, clientToken} {
		b := e.browser()
		b.signIn(token, "")
		p := b.get("/")
		if !strings.Contains(p.body, "policy/1") || !strings.Contains(p.body, "Read-only") {
			t.Errorf("reader's locks page lacks the lock or the read-only banner:\n%s", p.body)
		}
		if strings.Contains(p.body, "Release…") || strings.Contains(p.body, `action="/console/release"`) {
			t.Error("a reader is offered release buttons")
		}
		if p := b.get("/console/audit"); p.status != 200 || !strings.Contains(p.body, "acquired") {
			t.Errorf("reader's audit view: %d", p.status)
		}
		if p := b.get("/console/release?key=policy/1"); p.status != http.StatusForbidden {
			t.Errorf("reader's release confirmation: %d", p.status)
		}
		form := url.Values{"csrf": {b.csrf}, "key": {"policy/1"}, "reason": {"because"}}
		if p := b.post("/console/release", form); p.status != http.StatusForbidden || !strings.Contains(p.body, "read-only") {
			t.Errorf("reader's release: %d %s", p.status, p.body)
		}
	}
	if !e.held("policy/1", "s-bob") {
		t.Fatal("a reader released a lock")
	}
}

func TestReleaseNeedsAReasonAndIsAudited(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.acquire("s-bob", "bob", "Bob Smith", "underwriting review", "policy/7")
	b := e.browser()
	b.signIn(adminToken, "alice")

	p := b.get("/console/release?key=policy/7&session=s-bob&return=/")
	if p.status != 200 || !strings.Contains(p.body, "Bob Smith") || !strings.Contains(p.body, "policy/7") {
		t.Fatalf("confirmation does not name the holder: %d\n%s", p.status, p.body)
	}
	form := url.Values{"csrf": {b.csrf}, "key": {"policy/7"}, "session": {"s-bob"}, "return": {"/"}, "reason": {"   "}}
	p = b.post("/console/release", form)
	if p.status != http.StatusUnprocessableEntity || !strings.Contains(p.body, "A reason is required") {
		t.Fatalf("blank reason: %d\n%s", p.status, p.body)
	}
	if !e.held("policy/7", "s-bob") {
		t.Fatal("released without a reason")
	}

	form.Set("reason", "Bob is on leave")
	form.Set("return", "https://evil.example/")
	p = b.post("/console/release", form)
	if p.status != http.StatusSeeOther || p.header.Get("Location") != "/" {
		t.Fatalf("release: %d to %q, want a redirect to / (never off-site)", p.status, p.header.Get("Location"))
	}
	if p := b.get("/"); !strings.Contains(p.body, "Released policy/7, held by Bob Smith") || strings.Contains(p.body, `data-key="policy/7"`) {
		t.Errorf("the list after the release:\n%s", p.body)
	}
	audit, err := e.mgr.Audit(context.Background(), holdfast.AuditQuery{Key: "policy/7", Event: holdfast.EventForceReleased})
	if err != nil {
		t.Fatal(err)
	}
	if len(audit.Entries) != 1 || audit.Entries[0].Actor != "console:alice" || audit.Entries[0].Reason != "Bob is on leave" {
		t.Fatalf("audit: %+v", audit.Entries)
	}
	if p := b.get("/console/audit?event=force_released"); !strings.Contains(p.body, "Bob is on leave") || !strings.Contains(p.body, "console:alice") {
		t.Errorf("the audit view lacks the release:\n%s", p.body)
	}
}

func TestReleaseEverythingOfASessionOrAUser(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.acquire("s-bob-1", "bob", "Bob Smith", "", "policy/1", "policy/2")
	e.acquire("s-bob-2", "bob", "Bob Smith", "", "claim/9")
	e.acquire("s-carol", "carol", "Carol Jones", "", "policy/3", "claim/10")
	b := e.browser()
	b.signIn(adminToken, "")

	p := b.get("/console/sessions?user=bob")
	if !strings.Contains(p.body, "s-bob-1") || !strings.Contains(p.body, "s-bob-2") || strings.Contains(p.body, "s-carol") {
		t.Fatalf("sessions of bob:\n%s", p.body)
	}
	if !strings.Contains(p.body, "Release every lock of user bob") {
		t.Fatal("no release-all for the user")
	}
	form := url.Values{"csrf": {b.csrf}, "session": {"s-carol"}, "reason": {"Carol left"}, "return": {"/console/sessions"}}
	if p := b.post("/console/release", form); p.status != http.StatusSeeOther {
		t.Fatalf("release session: %d %s", p.status, p.body)
	}
	if e.held("policy/3", "s-carol") || e.held("claim/10", "s-carol") || !e.held("policy/1", "s-bob-1") {
		t.Fatal("releasing a session released the wrong locks")
	}
	form = url.Values{"csrf": {b.csrf}, "user": {"bob"}, "reason": {"Bob left"}}
	if p := b.post("/console/release", form); p.status != http.StatusSeeOther {
		t.Fatalf("release user: %d %s", p.status, p.body)
	}
	if p := b.get("/"); !strings.Contains(p.body, "Released 3 locks") || !strings.Contains(p.body, "No locks are held") {
		t.Errorf("after releasing bob's locks:\n%s", p.body)
	}
}

func TestAnonymousConsoleNeedsNoSignIn(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{anonymous: true})
	e.acquire("s-1", "u-1", "Dana", "", "order/42")
	b := e.browser()
	p := b.get("/")
	if p.status != 200 || !strings.Contains(p.body, "no tokens configured") || !strings.Contains(p.body, "order/42") {
		t.Fatalf("anonymous console: %d\n%s", p.status, p.body)
	}
	if !strings.Contains(p.body, "Release…") || strings.Contains(p.body, "Sign out") {
		t.Error("an anonymous console is an admin's and has nobody to sign out")
	}
	// It still protects its forms.
	form := url.Values{"csrf": {b.csrf}, "key": {"order/42"}, "reason": {"test"}}
	if p := b.post("/console/release", form, "Origin", "http://evil.example"); p.status != http.StatusForbidden {
		t.Errorf("cross-site post to an anonymous console: %d", p.status)
	}
	if p := b.post("/console/release", url.Values{"key": {"order/42"}, "reason": {"test"}}); p.status != http.StatusForbidden {
		t.Errorf("post without CSRF token to an anonymous console: %d", p.status)
	}
	// A host name that is not loopback's means DNS rebinding.
	req, _ := http.NewRequest("GET", e.url+"/", nil)
	req.Host = "attacker.example"
	if p := b.do(req); p.status != http.StatusForbidden {
		t.Errorf("anonymous console under a foreign host name: %d", p.status)
	}
	if !e.held("order/42", "s-1") {
		t.Fatal("a refused post released the lock")
	}
}

func TestLocksPageReadsOnePageOf100000(t *testing.T) {
	if testing.Short() {
		t.Skip("fills 100,000 locks")
	}
	t.Parallel()
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	for s := range 100 {
		keys := make([]string, 1000)
		for i := range keys {
			keys[i] = fmt.Sprintf("doc/%03d/%04d", s, i)
		}
		_, err := e.mgr.Acquire(ctx, holdfast.AcquireRequest{
			Keys:  keys,
			Owner: holdfast.Owner{Session: fmt.Sprintf("s-%03d", s), User: fmt.Sprintf("u-%d", s%10)},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	b := e.browser()
	b.signIn(readerToken, "")

	rows := func(p page) int { return strings.Count(p.body, `<tr data-key=`) }
	first := b.get("/")
	if n := rows(first); n != adminui.DefaultPageSize {
		t.Fatalf("first page has %d rows, want %d", n, adminui.DefaultPageSize)
	}
	if !strings.Contains(first.body, `data-key="doc/000/0000"`) || !strings.Contains(first.body, `id="next-page"`) {
		t.Fatal("first page is not the start in key order, or has no next page")
	}
	next := b.get(nextHref(t, first.body))
	if rows(next) != adminui.DefaultPageSize || !strings.Contains(next.body, `data-key="doc/000/0050"`) || strings.Contains(next.body, `data-key="doc/000/0049"`) {
		t.Fatal("the second page does not continue after the first")
	}

	byPrefix := b.get("/?prefix=doc/077")
	if rows(byPrefix) != adminui.DefaultPageSize || strings.Count(byPrefix.body, `data-key="doc/077/`) != adminui.DefaultPageSize {
		t.Error("prefix filter")
	}
	byUser := b.get("/?user=u-3")
	if rows(byUser) != adminui.DefaultPageSize || !strings.Contains(byUser.body, `data-session="s-003"`) || strings.Contains(byUser.body, `data-session="s-000"`) {
		t.Error("user filter")
	}
	// No lock is an hour old: the age filter reads a bounded number of
	// locks, says so, and offers to continue rather than read them all.
	old := b.get("/?age=1h")
	if rows(old) != 0 || !strings.Contains(old.body, "Read 20,000 locks") || !strings.Contains(old.body, `id="next-page"`) {
		t.Errorf("age filter over 100,000 fresh locks:\n%s", old.body)
	}
	if p := b.get("/console/locks/rows?prefix=doc/099"); p.status != 200 || rows(p) != adminui.DefaultPageSize || strings.Contains(p.body, "<html") {
		t.Error("the live-update fragment is not the table alone")
	}
}

func nextHref(t *testing.T, body string) string {
	t.Helper()
	_, rest, ok := strings.Cut(body, `<a href="`)
	for ok && !strings.Contains(rest[:strings.Index(rest, ">")], `id="next-page"`) {
		_, rest, ok = strings.Cut(rest, `<a href="`)
	}
	if !ok {
		t.Fatal("no next page link")
	}
	href, _, _ := strings.Cut(rest, `"`)
	return strings.ReplaceAll(href, "&amp;", "&")
}

// The age filter uses the console's clock; here the console runs on its
// own, over a store whose clock the test moves.
func TestAgeFilterFindsOldLocks(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	st := memstore.New(memstore.Config{Now: func() time.Time { return clock() }})
	mgr, err := holdfast.New(st, holdfast.Config{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mgr.Close(); st.Close() })
	console, err := adminui.New(adminui.Config{Manager: mgr, Anonymous: true, Now: func() time.Time { return clock() }, PageSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	acquire := func(key string) {
		if _, err := mgr.Acquire(ctx, holdfast.AcquireRequest{Keys: []string{key}, Owner: holdfast.Owner{Session: "s-" + key}}); err != nil {
			t.Fatal(err)
		}
	}
	acquire("a/old")
	acquire("c/old")
	acquire("e/old")
	now = now.Add(90 * time.Minute)
	acquire("b/new")
	acquire("d/new")

	get := func(target string) string {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", target, nil)
		req.Host = "127.0.0.1"
		console.ServeHTTP(rec, req)
		if rec.Code != 200 {
			t.Fatalf("GET %s: %d %s", target, rec.Code, rec.Body)
		}
		return rec.Body.String()
	}
	first := get("/?age=1h")
	if !strings.Contains(first, `data-key="a/old"`) || !strings.Contains(first, `data-key="c/old"`) || strings.Contains(first, "/new") {
		t.Fatalf("first page of locks older than 1 h:\n%s", first)
	}
	second := get(nextHref(t, first))
	if !strings.Contains(second, `data-key="e/old"`) || strings.Contains(second, `data-key="c/old"`) || strings.Contains(second, "/new") {
		t.Fatalf("second page of locks older than 1 h:\n%s", second)
	}
	if all := get("/"); !strings.Contains(all, `data-key="a/old"`) || !strings.Contains(all, `data-key="b/new"`) {
		t.Fatalf("without the filter:\n%s", all)
	}
	if page := get("/?sort=since&dir=desc"); strings.Index(page, `data-key="b/new"`) > strings.Index(page, `data-key="a/old"`) {
		t.Error("sorting by since, newest first, does not put the newer lock first")
	}
}
