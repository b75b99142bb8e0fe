package main

import (
	"context"
	"database/sql"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/memstore"
)

const chromiumPath = "/usr/bin/chromium"

// browser is one headless Chromium shared by the tests; every person gets
// a browser context of their own (separate cookies), like a second browser.
var browser struct {
	once sync.Once
	ctx  context.Context
	err  error
	stop func()
}

func TestMain(m *testing.M) {
	code := m.Run()
	if browser.stop != nil {
		browser.stop()
	}
	os.Exit(code)
}

func chromium(t *testing.T) context.Context {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("chromium is required under CI: %v", err)
		}
		t.Skipf("browser tests need Chromium at %s (apt-get install chromium): %v", chromiumPath, err)
	}
	browser.once.Do(func() {
		dir, err := os.MkdirTemp("", "policies-chromium-")
		if err != nil {
			browser.err = err
			return
		}
		alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
			chromedp.ExecPath(chromiumPath),
			chromedp.Flag("headless", true),
			chromedp.NoSandbox,
			chromedp.DisableGPU,
			chromedp.Flag("disable-background-networking", true),
			chromedp.NoFirstRun,
			chromedp.NoDefaultBrowserCheck,
			chromedp.UserDataDir(dir),
			chromedp.WindowSize(1100, 900),
		)
		ctx, cancel := chromedp.NewContext(alloc)
		browser.err = chromedp.Do(ctx)
		browser.ctx = ctx
		browser.stop = func() {
			cancel()
			cancelAlloc()
			os.RemoveAll(dir)
		}
	})
	if browser.err != nil {
		t.Fatalf("start chromium: %v", browser.err)
	}
	return browser.ctx
}

// fakeClock is the lock store's clock: tests move it past the idle timeout
// instead of waiting.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

const idleTimeout = 5 * time.Minute

// site is one running example application with its own lock store.
type site struct {
	url   string
	locks holdfast.Service
	clock *fakeClock
	db    *sql.DB
	t     *testing.T
}

func startSite(t *testing.T) *site {
	t.Helper()
	return startSiteWith(t, testLockTypes())
}

// startSiteWith starts the site with the lock types of types, and with
// its settings changed by each of tune.
func startSiteWith(t *testing.T, types holdfast.Config, tune ...func(*appConfig)) *site {
	t.Helper()
	clock := &fakeClock{now: time.Now().UTC().Truncate(time.Second)}
	mgr, err := holdfast.New(memstore.New(memstore.Config{Now: clock.Now}), types)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mgr.Close() })
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "policies.db")+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	cfg := appConfig{
		Locks: mgr, Types: types, DB: db, Now: clock.Now,
		// The store's clock moves for idleness; heartbeats run on the
		// browser's clock, fast, so that a page learns within a second.
		IdleTimeout: idleTimeout, PageHeartbeat: 200 * time.Millisecond, HiddenPageHeartbeat: 400 * time.Millisecond,
	}
	for _, f := range tune {
		f(&cfg)
	}
	h, err := newApp(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return &site{url: ts.URL, locks: mgr, clock: clock, db: db, t: t}
}

func testLockTypes() holdfast.Config {
	c := lockTypes()
	c.SweepInterval = -1 // expiry is decided on every request; the sweep only tidies
	return c
}

// tab is one browser tab of one person.
type tab struct {
	ctx  context.Context
	site *site
	t    *testing.T
	name string
}

// signIn opens a new browser context (a separate cookie jar) and signs in.
func (s *site) signIn(t *testing.T, personID string) *tab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(chromium(t), chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	tb := &tab{ctx: ctx, site: s, t: t, name: personID}
	tb.start()
	tb.run(chromedp.Navigate(s.url + "/signin"))
	tb.click(`button[value="` + personID + `"]`)
	tb.waitText("Signed in as")
	return tb
}

// newTab opens another tab of the same person (same cookies).
func (tb *tab) newTab(t *testing.T) (*tab, context.CancelFunc) {
	ctx, cancel := chromedp.NewContext(tb.ctx)
	t.Cleanup(cancel)
	n := &tab{ctx: ctx, site: tb.site, t: t, name: tb.name + "-2"}
	n.start()
	return n, cancel
}

// start opens the tab. The context of a tab's first run decides how long
// the tab lives, so it is the tab's own context, without a timeout.
func (tb *tab) start() {
	tb.t.Helper()
	if err := chromedp.Do(tb.ctx); err != nil {
		tb.t.Fatalf("%s: open a tab: %v", tb.name, err)
	}
}

func (tb *tab) run(steps ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		tb.t.Fatalf("%s: %v", tb.name, err)
	}
}

// get runs one action that returns a value.
func get[T any](tb *tab, a chromedp.Action[T]) T {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 20*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		tb.t.Fatalf("%s: %v", tb.name, err)
	}
	return v
}

// open loads path in the tab.
func (tb *tab) open(path string) {
	tb.t.Helper()
	tb.navigate(fmt.Sprintf("location.assign(%q)", tb.site.url+path))
}

// click clicks a button or link that loads another page.
func (tb *tab) click(sel string) {
	tb.t.Helper()
	tb.navigate(fmt.Sprintf("document.querySelector(%q).click()", sel))
}

// navigate runs js, which leaves the page, and waits until the next page
// has loaded. chromedp's own Navigate waits for the events of the frame it
// knows, which a tab in its own browser context replaces on its first
// cross-document navigation; a marker on the old window is simpler.
func (tb *tab) navigate(js string) {
	tb.t.Helper()
	get(tb, chromedp.Evaluate[bool]("window.__leaving = true; "+js+"; true"))
	deadline := time.Now().Add(15 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(tb.ctx, 2*time.Second)
		loaded, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`!window.__leaving && document.readyState === "complete"`))
		cancel()
		if err == nil && loaded {
			return
		}
		if time.Now().After(deadline) {
			tb.t.Fatalf("%s: the page did not load after %s (last error %v)", tb.name, js, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// text returns the visible text of the page.
func (tb *tab) text() string {
	tb.t.Helper()
	return get(tb, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
}

// waitText polls until the page's main text contains every want.
func (tb *tab) waitText(want ...string) string {
	tb.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		got := tb.text()
		missing := ""
		for _, w := range want {
			if !strings.Contains(got, w) {
				missing = w
				break
			}
		}
		if missing == "" {
			return got
		}
		if time.Now().After(deadline) {
			tb.t.Fatalf("%s: page never showed %q; it shows:\n%s", tb.name, missing, got)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (tb *tab) value(sel string) string {
	tb.t.Helper()
	return get(tb, chromedp.Value(chromedp.CSS(sel)))
}

func (tb *tab) disabled(sel string) bool {
	tb.t.Helper()
	return get(tb, chromedp.Evaluate[bool](fmt.Sprintf(`document.querySelector(%q).disabled`, sel)))
}

// screenshot saves the tab under the test's artifact directory (kept with
// go test -artifacts).
func (tb *tab) screenshot(name string) {
	tb.t.Helper()
	png := get(tb, chromedp.FullScreenshot(100))
	path := filepath.Join(tb.t.ArtifactDir(), name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		tb.t.Fatal(err)
	}
	tb.t.Logf("screenshot %s", path)
}

// waitLocks polls the lock manager until the policy has n holders.
func (s *site) waitLocks(key string, n int) []holdfast.Lock {
	s.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		page, err := s.locks.Locks(context.Background(), holdfast.LockQuery{Key: key})
		if err != nil {
			s.t.Fatal(err)
		}
		if len(page.Locks) == n {
			return page.Locks
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%s has %d locks, want %d: %+v", key, len(page.Locks), n, page.Locks)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestColleagueSeesTheLockAndClosingTheTabReleasesIt(t *testing.T) {
	t.Parallel()
	s := startSite(t)
	ada := s.signIn(t, "ada")
	ben := s.signIn(t, "ben")

	editor, _ := ada.newTab(t)
	editor.open("/policies/1/edit")
	editor.waitText("Edit policy P-10041", "You are editing this policy.")
	editor.screenshot("1-editor-holds-the-lock")
	l := s.waitLocks("policy/1", 1)[0]
	// As the pages write them: with the date when it is not today's (a
	// lock taken after 22:00 UTC ends tomorrow).
	now := time.Now()
	since, until := clock(l.AcquiredAt, now), clock(l.ExpiresAt, now)

	ben.open("/policies")
	ben.waitText("Being edited by Ada Lovelace since " + since)
	ben.screenshot("2-list-shows-who-edits")

	ben.open("/policies/1/edit")
	got := ben.waitText("Being edited by Ada Lovelace since "+since, "at "+until+" at the latest",
		"Last active just now", "ask an administrator to release the lock", "Harbour Bakery Ltd")
	if strings.Contains(got, "Edit policy") || strings.Contains(got, "Edit coverage") {
		t.Fatalf("the read-only view offers to edit:\n%s", got)
	}
	ben.screenshot("3-colleague-read-only-view")

	// Ada closes the tab: the page's release beacon frees the policy now,
	// not after the idle timeout.
	editor.navigate(`location.assign("about:blank")`)
	s.waitLocks("policy/1", 0)

	// Ben's page, left open, says so by itself and offers to edit.
	got = ben.waitText("Free to edit now", "Ada Lovelace no longer holds the edit lock, so you can edit this now.")
	if strings.Contains(got, "Being edited by") {
		t.Fatalf("the page still says who edited it:\n%s", got)
	}
	ben.screenshot("4-colleague-told-it-is-free")
	ben.click("#edit")
	ben.waitText("You are editing this policy.")
	// Cancel releases.
	ben.click("#cancel")
	ben.waitText("Policy P-10041", "Edit policy")
	s.waitLocks("policy/1", 0)
}

func TestClosingTheTabSendsTheBeacon(t *testing.T) {
	t.Parallel()
	s := startSite(t)
	ada := s.signIn(t, "ada")
	editor, closeTab := ada.newTab(t)
	editor.open("/policies/3/edit")
	editor.waitText("You are editing this policy.")
	s.waitLocks("policy/3", 1)
	closeTab()
	s.waitLocks("policy/3", 0)
}

func TestIdleEditorIsToldAndKeepsTheirInput(t *testing.T) {
	t.Parallel()
	s := startSite(t)
	ada := s.signIn(t, "ada")
	ben := s.signIn(t, "ben")

	ada.open("/policies/2/edit")
	ada.waitText("You are editing this policy.")
	typed := "Call the broker about the cargo limit before renewal"
	ada.run(chromedp.SendKeys(chromedp.ID("notes"), typed))

	// Ada's laptop sleeps: no heartbeat for longer than the idle timeout.
	s.clock.Advance(idleTimeout + time.Minute)

	ben.open("/policies/2/edit")
	ben.waitText("You are editing this policy.")

	got := ada.waitText("Your edit lock is gone", "away longer than the idle timeout", "unsaved changes are still in the form")
	if strings.Contains(got, "Ben") {
		t.Logf("page: %s", got)
	}
	if v := ada.value("#notes"); v != typed {
		t.Fatalf("Ada's notes = %q, want her unsaved input %q", v, typed)
	}
	if !ada.disabled("#save") {
		t.Fatal("Save is still enabled on a page that lost its lock")
	}
	ada.screenshot("idle-editor-told-input-kept")
}

func TestAdministratorForceReleaseShowsWhoAndWhy(t *testing.T) {
	t.Parallel()
	s := startSite(t)
	ada := s.signIn(t, "ada")
	carol := s.signIn(t, "carol")

	ada.open("/policies/3/edit")
	ada.waitText("You are editing this policy.")
	get(ada, chromedp.Evaluate[string](`document.querySelector("#premium").value = ""`))
	ada.run(chromedp.SendKeys(chromedp.ID("premium"), "350.00 EUR"))

	carol.open("/admin/locks")
	carol.waitText("policy/3", "Ada Lovelace")
	// Each row's button says which lock it releases, to a screen reader too.
	if name := get(carol, chromedp.Evaluate[string](`document.querySelector("#locks button").getAttribute("aria-label")`)); name != "Force release policy/3, held by Ada Lovelace" {
		t.Fatalf("the button's accessible name is %q", name)
	}
	carol.screenshot("admin-locks")
	carol.run(chromedp.SetValue(chromedp.CSS(`input[name="reason"]`), "Month-end close, Ada is out today"))
	carol.click(`#locks button`)
	carol.waitText("Released.")
	s.waitLocks("policy/3", 0)

	ada.waitText("An administrator, Carol Diaz, released your edit lock: \u201cMonth-end close, Ada is out today\u201d")
	if v := ada.value("#premium"); v != "350.00 EUR" {
		t.Fatalf("premium = %q, want Ada's unsaved input", v)
	}
	ada.screenshot("editor-told-admin-released")

	// A late save (the button forced back on) is refused by the server,
	// with the same explanation, and the input is still there.
	get(ada, chromedp.Evaluate[bool](`document.querySelector("#save").disabled = false`))
	ada.click("#save")
	ada.waitText("Not saved", "Carol Diaz", "Month-end close, Ada is out today", "Open the policy again")
	if v := ada.value("#premium"); v != "350.00 EUR" {
		t.Fatalf("premium after refused save = %q", v)
	}
	var premium string
	if err := s.db.QueryRow(`SELECT premium FROM policies WHERE id = 3`).Scan(&premium); err != nil || premium != "312.50 EUR" {
		t.Fatalf("stored premium = %q, %v; the late save landed", premium, err)
	}
}

func TestSecondTabOfTheSamePersonTakesOver(t *testing.T) {
	t.Parallel()
	s := startSite(t)
	ada := s.signIn(t, "ada")

	ada.open("/policies/2/edit")
	ada.waitText("You are editing this policy.")
	ada.run(chromedp.SendKeys(chromedp.ID("notes"), "typed in the first tab"))

	second, _ := ada.newTab(t)
	second.open("/policies/2/edit")
	second.waitText("You are already editing this policy in another tab or window", "Take over from your other tab")
	second.screenshot("second-tab-offers-take-over")
	second.click("#takeover")
	second.waitText("You are editing this policy.")

	ada.waitText("You took over editing of this record in another tab or window")
	if v := ada.value("#notes"); v != "typed in the first tab" {
		t.Fatalf("first tab's notes = %q", v)
	}
	ada.screenshot("first-tab-taken-over")

	second.run(chromedp.SetValue(chromedp.ID("notes"), "saved from the second tab"))
	second.click("#save")
	second.waitText("Saved.", "saved from the second tab")
	s.waitLocks("policy/2", 0)
}

// Reloading the edit page reaches the server before the old page's
// release does, so the lock is still held by that page, of this very
// tab: the new page takes over from it by itself rather than offer Ada to
// take over from herself. Another tab of hers is still asked.
func TestReloadingTheEditPageKeepsEditing(t *testing.T) {
	t.Parallel()
	s := startSite(t)
	ada := s.signIn(t, "ada")
	ada.open("/policies/2/edit")
	ada.waitText("You are editing this policy.")
	first := s.waitLocks("policy/2", 1)[0]

	ada.navigate("location.reload()")
	// The reload may load the refused page first, which then takes over.
	deadline := time.Now().Add(15 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(ada.ctx, 2*time.Second)
		text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.readyState === "complete" && document.body ? document.body.innerText : ""`))
		cancel()
		if err == nil && strings.Contains(text, "You are editing this policy.") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a reload the page never showed the edit form; it shows:\n%s", text)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if locks := s.waitLocks("policy/2", 1); locks[0].Owner.Session == first.Owner.Session {
		t.Fatalf("after the reload the lock is still the old page's (%s)", first.Owner.Session)
	}

	second, _ := ada.newTab(t)
	second.open("/policies/2/edit")
	second.waitText("You are already editing this policy in another tab or window", "Take over from your other tab")
}

// In the last ten minutes of its lock's lifetime an edit page says when
// the lock ends and that saving will then be refused: heartbeats keep the
// page's session alive, not the lock past its expiry.
func TestEditPageWarnsBeforeTheLockEnds(t *testing.T) {
	t.Parallel()
	types := testLockTypes()
	policy := types.Types["policy"]
	policy.DefaultTTL = 15 * time.Minute
	types.Types["policy"] = policy
	s := startSiteWith(t, types)
	ada := s.signIn(t, "ada")
	ada.open("/policies/2/edit")
	ada.waitText("You are editing this policy.")
	page := s.waitLocks("policy/2", 1)[0].Owner.Session
	if strings.Contains(ada.text(), "ends soon") {
		t.Fatal("a lock with 15 minutes left is said to end soon")
	}
	// Move the lock service's clock 11 minutes on, a heartbeat at a time,
	// so that the page's session stays within its idle timeout.
	for range 11 {
		s.clock.Advance(time.Minute)
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			res, err := s.locks.Sessions(context.Background(), holdfast.SessionQuery{Session: page})
			if err == nil && len(res.Sessions) == 1 && !time.Time(res.Sessions[0].LastSeen).Before(s.clock.Now()) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the page's session has not heartbeaten for 10s (%v, %v)", res, err)
			}
		}
	}
	ends := s.waitLocks("policy/2", 1)[0].ExpiresAt.UTC().Format("15:04 UTC")
	ada.waitText("Your edit lock ends soon", "ends at "+ends+", in 4 minutes", "saving from this page is refused")
	ada.screenshot("edit-lock-ends-soon")
	if ada.disabled("#save") {
		t.Fatal("the warning turned Save off while the lock is still held")
	}
}

func TestEditingACoverageLocksThePolicy(t *testing.T) {
	t.Parallel()
	s := startSite(t)
	ada := s.signIn(t, "ada")
	ben := s.signIn(t, "ben")

	ben.open("/policies/1")
	ben.click("#edit-coverage-1")
	ben.waitText("Edit coverage Fire of policy P-10041", "locks the whole policy")
	ben.screenshot("coverage-edit")
	l := s.waitLocks("policy/1", 1)[0]
	if l.Key != "policy/1" || l.Note != "editing coverage Fire" {
		t.Fatalf("lock = %+v, want the policy's lock, noting the coverage", l)
	}

	ada.open("/policies/1/edit")
	ada.waitText("Being edited by Ben Carter", "They are editing coverage Fire, which locks the whole policy")
	ada.screenshot("policy-locked-through-coverage")
	ada.open("/coverages/2/edit")
	ada.waitText("Being edited by Ben Carter")

	ben.run(chromedp.SetValue(chromedp.ID("limit"), "750,000 EUR"))
	ben.click("#save")
	ben.waitText("Coverage saved.", "750,000 EUR")
	s.waitLocks("policy/1", 0)
	ada.open("/policies/1/edit")
	ada.waitText("You are editing this policy.")
}

// A colleague's read-only page follows the lock: when its holder changes
// without the policy ever being free to them, it says who holds it now,
// and never offers to edit.
func TestReadOnlyPageFollowsANewHolder(t *testing.T) {
	t.Parallel()
	s := startSite(t)
	ada := s.signIn(t, "ada")
	ben := s.signIn(t, "ben")

	ada.open("/policies/2/edit")
	ada.waitText("You are editing this policy.")
	ben.open("/policies/2")
	ben.waitText("Being edited by Ada Lovelace")

	// Within one poll of Ben's page, or between two: Ben's page may see
	// the policy free for a moment, and then held again; either way it
	// ends by naming the new holder.
	ctx := context.Background()
	if _, err := s.locks.ForceRelease(ctx, holdfast.ForceReleaseRequest{Keys: []string{"policy/2"}, Reason: "handover", Actor: "Carol Diaz"}); err != nil {
		t.Fatal(err)
	}
	res, err := s.locks.Acquire(ctx, holdfast.AcquireRequest{Keys: []string{"policy/2"},
		Owner: holdfast.Owner{Session: "desk-7", User: "dan", Name: "Dan Ito"}})
	if err != nil {
		t.Fatal(err)
	}
	since := res.Locks[0].AcquiredAt.UTC().Format("15:04") + " UTC"
	got := ben.waitText("Someone is editing this now", "held again now: by Dan Ito, since "+since)
	if strings.Contains(got, "Being edited by Ada Lovelace") || strings.Contains(got, "Edit policy") {
		t.Fatalf("the page still shows the old holder, or offers to edit:\n%s", got)
	}
	ben.screenshot("read-only-page-names-the-new-holder")
}

// An edit page nobody uses warns, then releases its lock, though its
// heartbeats would keep it; using the page clears the warning.
func TestUnusedEditPageReleasesItsLock(t *testing.T) {
	t.Parallel()
	const after = 8 * time.Second // the warning comes in its last 2 seconds
	s := startSiteWith(t, testLockTypes(), func(c *appConfig) { c.ReleaseInactivePageAfter = after })
	ada := s.signIn(t, "ada")
	ben := s.signIn(t, "ben")

	ada.open("/policies/3/edit")
	ada.waitText("You are editing this policy.")
	get(ada, chromedp.Evaluate[string](`document.querySelector("#premium").value = ""`))
	ada.run(chromedp.SendKeys(chromedp.ID("premium"), "99.00 EUR"))
	ada.waitText("Are you still editing?", "unless you type or click here")
	// Typing is use: the warning goes, and the lock stays.
	ada.run(chromedp.SendKeys(chromedp.ID("premium"), " "))
	if got := ada.text(); strings.Contains(got, "Are you still editing?") {
		t.Fatalf("the warning stayed after typing:\n%s", got)
	}
	s.waitLocks("policy/3", 1)

	ada.waitText("Your edit lock was released", "Nobody typed or clicked on this page for 8 seconds")
	s.waitLocks("policy/3", 0)
	if !ada.disabled("#save") {
		t.Fatal("Save is still enabled on a page whose lock was released")
	}
	if v := ada.value("#premium"); v != "99.00 EUR " {
		t.Fatalf("premium = %q, want Ada's unsaved input", v)
	}
	ada.screenshot("unused-page-released")
	// The banner offers the way back in.
	if href := get(ada, chromedp.Evaluate[string](`(document.querySelector("#holdfast-notice a") || {}).href || ""`)); !strings.HasSuffix(href, "/policies/3/edit") {
		t.Fatalf("the banner's link goes to %q, want the edit page", href)
	}

	ben.open("/policies/3/edit")
	ben.waitText("You are editing this policy.")
}
