package adminui_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/memstore"
	"github.com/holdfast/holdfast/store"
)

var expiresInTwoHours = regexp.MustCompile(`in (2 h|1 h 59 min)`)

// One headless Chromium serves every browser test of this binary; each
// test gets its own browser context (its own cookies) in it.
var (
	browserCtx  context.Context
	browserSkip string // why browser tests cannot run here
)

func TestMain(m *testing.M) {
	stop, err := startBrowser()
	if err != nil {
		browserSkip = err.Error()
	}
	code := m.Run()
	stop()
	os.Exit(code)
}

func startBrowser() (stop func(), err error) {
	stop = func() {}
	path := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		return stop, errors.New("no Chromium found (install Debian's chromium package)")
	}
	dir, err := os.MkdirTemp("", "holdfast-console-chromium-")
	if err != nil {
		return stop, err
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.UserDataDir(dir),
		chromedp.WindowSize(1440, 1000),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelBrowser := chromedp.NewContext(allocCtx)
	stop = func() {
		cancelBrowser()
		cancelAlloc()
		os.RemoveAll(dir)
	}
	if err := chromedp.Do(ctx); err != nil {
		stop()
		return func() {}, fmt.Errorf("starting %s: %w", path, err)
	}
	browserCtx = ctx
	return stop, nil
}

// tab is a fresh browser context for one test, with a deadline for all of
// its steps.
type tab struct {
	t   *testing.T
	ctx context.Context
	dir string
}

func newTab(t *testing.T) *tab {
	t.Helper()
	if browserSkip != "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("browser tests must run in CI: %s", browserSkip)
		}
		t.Skipf("browser test skipped: %s", browserSkip)
	}
	ctx, cancel := chromedp.NewContext(browserCtx, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatal(err)
	}
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(cancelTimeout)
	dir := os.Getenv("HOLDFAST_CONSOLE_SCREENSHOTS")
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return &tab{t: t, ctx: ctx, dir: dir}
}

func (b *tab) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, steps...); err != nil {
		b.t.Fatal(err)
	}
}

func (b *tab) text(sel string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		b.t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

func (b *tab) count(sel string) int {
	b.t.Helper()
	n, err := chromedp.Run(b.ctx, chromedp.Evaluate[int](fmt.Sprintf("document.querySelectorAll(%q).length", sel)))
	if err != nil {
		b.t.Fatal(err)
	}
	return n
}

// screenshot saves the whole page as NAME.png, to be looked at.
func (b *tab) screenshot(name string) {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatal(err)
	}
	path := filepath.Join(b.dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot %s", path)
}

func (b *tab) signIn(e *env, token, name string) {
	b.t.Helper()
	b.do(
		chromedp.Navigate(e.url+"/"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
	)
	b.screenshot("signin")
	b.do(
		chromedp.SendKeys(chromedp.CSS("#token"), token),
		chromedp.SendKeys(chromedp.CSS("#name"), name),
		chromedp.Click(chromedp.CSS("#signin")),
		chromedp.WaitVisible(chromedp.CSS(`#live-status[data-state="live"]`)),
	)
}

func TestBrowserLiveListFilterAndRelease(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	b := newTab(t)
	ctx := context.Background()

	e.acquire("s-carol-3f9a2c41d7", "carol", "Carol Jones", "claims intake", "claim/77")
	b.signIn(e, adminToken, "Alice Admin")
	if got := b.text("#actor"); got != "console:Alice Admin" {
		t.Errorf("signed in as %q", got)
	}
	// Locks acquired through the API appear without a reload.
	b.do(chromedp.Evaluate[chromedp.Void]("window.sameDocument = true"))
	e.acquire("s-bob-81c0ffee99", "bob", "Bob Smith", "underwriting review", "policy/12345", "policy/12345/coverage/2")
	e.acquire("s-erin-5d1e", "erin", "Erin Wu", "", "policy/12399")
	b.do(chromedp.WaitVisible(chromedp.CSS(`tr[data-key="policy/12345"]`)))
	b.do(chromedp.WaitVisible(chromedp.CSS(`tr[data-key="policy/12399"]`)))
	if same, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool]("window.sameDocument === true")); err != nil || !same {
		t.Fatalf("the page reloaded to show the new lock (%v)", err)
	}
	row := b.text(`tr[data-key="policy/12345"]`)
	for _, want := range []string{"Bob Smith", "bob", "s-bob-81c0", "exclusive", "underwriting review", "UTC"} {
		if !strings.Contains(row, want) {
			t.Errorf("the row of policy/12345 lacks %q: %s", want, row)
		}
	}
	if !expiresInTwoHours.MatchString(row) {
		t.Errorf("the row of policy/12345 does not say it expires in about 2 h: %s", row)
	}
	b.screenshot("locks")

	// The live indicator shows a dropped connection and its return.
	e.hs.CloseClientConnections()
	b.do(chromedp.WaitVisible(chromedp.CSS(`#live-status[data-drops="1"][data-state="live"]`)))
	if got := b.text("#live-status"); !strings.Contains(got, "reconnected") {
		t.Errorf("live status after a drop: %q", got)
	}
	b.screenshot("locks-reconnected")
	e.acquire("s-dan", "dan", "Dan Hall", "", "invoice/5")
	b.do(chromedp.WaitVisible(chromedp.CSS(`tr[data-key="invoice/5"]`)))

	// Filter by key prefix, then by user.
	b.do(
		chromedp.SendKeys(chromedp.CSS("#f-prefix"), "policy"),
		chromedp.Click(chromedp.CSS("#apply-filter")),
		chromedp.WaitVisible(chromedp.CSS("#clear-filter")),
		chromedp.WaitVisible(chromedp.CSS(`#live-status[data-state="live"]`)),
	)
	if n := b.count(`#locks-table tbody tr`); n != 3 || b.count(`tr[data-key="claim/77"]`)+b.count(`tr[data-key="invoice/5"]`) != 0 {
		t.Errorf("prefix policy shows %d rows", n)
	}
	b.screenshot("locks-filtered-prefix")
	b.do(
		chromedp.Click(chromedp.CSS("#clear-filter")),
		chromedp.WaitNotPresent(chromedp.CSS("#clear-filter")),
		chromedp.SendKeys(chromedp.CSS("#f-user"), "carol"),
		chromedp.Click(chromedp.CSS("#apply-filter")),
		chromedp.WaitVisible(chromedp.CSS("#clear-filter")),
	)
	if n := b.count(`#locks-table tbody tr`); n != 1 || b.count(`tr[data-key="claim/77"]`) != 1 {
		t.Errorf("user carol shows %d rows", n)
	}

	// Force release from the list: the confirmation names the holder; an
	// empty reason is refused; a reason releases.
	b.do(
		chromedp.Navigate(e.url+"/"),
		chromedp.Click(chromedp.CSS(`tr[data-key="policy/12345"] button.danger`)),
		chromedp.WaitVisible(chromedp.CSS("#confirm-release")),
	)
	if got := b.text("#release-holders"); !strings.Contains(got, "Bob Smith") || !strings.Contains(got, "policy/12345") {
		t.Errorf("the confirmation does not name the holder: %q", got)
	}
	b.screenshot("release-confirm")
	b.do(
		chromedp.Click(chromedp.CSS("#confirm-release")),
		chromedp.WaitVisible(chromedp.CSS("#reason-error")),
	)
	if got := b.text("#reason-error"); !strings.Contains(got, "reason is required") {
		t.Errorf("empty reason: %q", got)
	}
	if !e.held("policy/12345", "s-bob-81c0ffee99") {
		t.Fatal("released without a reason")
	}
	b.screenshot("release-reason-required")
	b.do(
		chromedp.SendKeys(chromedp.CSS("#reason"), "Bob is on leave until Monday; renewal due today"),
		chromedp.Click(chromedp.CSS("#confirm-release")),
		chromedp.WaitVisible(chromedp.CSS("#flash")),
		chromedp.WaitVisible(chromedp.CSS(`#live-status[data-state="live"]`)),
	)
	if got := b.text("#flash"); !strings.Contains(got, "Released policy/12345, held by Bob Smith") {
		t.Errorf("after the release: %q", got)
	}
	if b.count(`tr[data-key="policy/12345"]`) != 0 || e.held("policy/12345", "s-bob-81c0ffee99") {
		t.Fatal("the lock is still there")
	}
	b.screenshot("locks-after-release")

	// The release is in the audit view, with who and why.
	b.do(
		chromedp.Navigate(e.url+"/console/audit"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-event="force_released"]`)),
	)
	entry := b.text(`tr[data-event="force_released"]`)
	for _, want := range []string{"policy/12345", "Bob Smith", "console:Alice Admin", "Bob is on leave"} {
		if !strings.Contains(entry, want) {
			t.Errorf("the audit entry lacks %q: %s", want, entry)
		}
	}
	b.screenshot("audit")

	// The detail of a key: holders, what it covers, aggregate members and
	// history.
	if _, err := e.mgr.SetAggregate(ctx, holdfast.Aggregate{Member: "asset/9", Root: "policy/12399"}); err != nil {
		t.Fatal(err)
	}
	b.do(
		chromedp.Navigate(e.url+"/console/lock?key=policy/12399"),
		chromedp.WaitVisible(chromedp.CSS("#h-history")),
	)
	page := b.text("main")
	for _, want := range []string{"Erin Wu", "asset/9", "acquired"} {
		if !strings.Contains(page, want) {
			t.Errorf("the detail of policy/12399 lacks %q", want)
		}
	}
	b.screenshot("lock-detail")

	b.do(
		chromedp.Navigate(e.url+"/console/sessions"),
		chromedp.WaitVisible(chromedp.CSS("#sessions-table")),
	)
	if b.count(`#sessions-table tbody tr`) != 4 {
		t.Errorf("sessions: %d rows, want carol's, bob's, erin's and dan's", b.count(`#sessions-table tbody tr`))
	}
	b.screenshot("sessions")
}

func TestBrowserReaderCannotRelease(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	b := newTab(t)
	e.acquire("s-bob", "bob", "Bob Smith", "underwriting review", "policy/12345")
	b.dir = filepath.Join(b.dir, "reader")
	if err := os.MkdirAll(b.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b.signIn(e, readerToken, "")
	b.do(chromedp.WaitVisible(chromedp.CSS(`tr[data-key="policy/12345"]`)))
	if b.count("button.danger") != 0 {
		t.Error("a reader sees release buttons")
	}
	if got := b.text("#readonly-banner"); !strings.Contains(got, "Read-only") {
		t.Errorf("banner: %q", got)
	}
	b.screenshot("locks-reader")
	b.do(
		chromedp.Navigate(e.url+"/console/release?key=policy/12345"),
		chromedp.WaitVisible(chromedp.CSS("#error")),
	)
	if got := b.text("#error"); !strings.Contains(got, "read-only") {
		t.Errorf("reader at the release form: %q", got)
	}
	if !e.held("policy/12345", "s-bob") {
		t.Fatal("the reader released the lock")
	}
}

// outageStore, while down, fails every read, and every commit after
// making it, as a store that stops answering does when a commit's answer
// is lost.
type outageStore struct {
	store.Store
	down atomic.Bool
}

func (s *outageStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	err := s.Store.Update(ctx, fn)
	if err == nil && s.down.Load() {
		return fmt.Errorf("outage, after the commit: %w", store.ErrUnavailable)
	}
	return err
}

func (s *outageStore) View(ctx context.Context, fn func(store.ReadTx) error) error {
	if s.down.Load() {
		return fmt.Errorf("outage: %w", store.ErrUnavailable)
	}
	return s.Store.View(ctx, fn)
}

// A page that cannot re-read the list when told it changed says it is not
// up to date, and shows the change once the store answers again, without
// waiting for another event: here the lock of a commit whose answer was
// lost, which no event will announce again.
func TestBrowserCatchesUpAfterAnOutage(t *testing.T) {
	t.Parallel()
	st := &outageStore{Store: memstore.New(memstore.Config{})}
	e := newEnv(t, envOptions{store: st})
	b := newTab(t)
	b.signIn(e, adminToken, "Alice Admin")

	st.down.Store(true)
	_, err := e.mgr.Acquire(t.Context(), holdfast.AcquireRequest{Keys: []string{"policy/7"},
		Owner: holdfast.Owner{Session: "s-bob", User: "bob", Name: "Bob Smith"}})
	if !errors.Is(err, holdfast.ErrUnavailable) {
		t.Fatalf("acquire during the outage = %v, want unavailable", err)
	}
	within := func(d time.Duration, steps ...chromedp.Action[chromedp.Void]) error {
		ctx, cancel := context.WithTimeout(b.ctx, d)
		defer cancel()
		return chromedp.Do(ctx, steps...)
	}
	if err := within(30*time.Second, chromedp.WaitVisible(chromedp.CSS(`#live-status[data-state="lost"]`))); err != nil {
		t.Fatalf("the page did not say it could not re-read the list: %v", err)
	}
	if got := b.text("#live-status"); !strings.Contains(got, "Not up to date") {
		t.Errorf("live status while the list cannot be read: %q", got)
	}
	b.screenshot("locks-not-up-to-date")

	st.down.Store(false)
	// Well within the 30 s after which the page re-reads the list anyway.
	if err := within(15*time.Second,
		chromedp.WaitVisible(chromedp.CSS(`tr[data-key="policy/7"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#live-status[data-state="live"]`)),
	); err != nil {
		t.Fatalf("the page did not show the lock committed during the outage once the store answered again: %v", err)
	}
}
