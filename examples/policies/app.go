package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/examples/policies/records"
	"github.com/holdfast/holdfast/httplock"
	"github.com/holdfast/holdfast/implicit"
)

// person is one of the example's fake users, chosen at sign-in.
type person struct {
	ID, Name, Role string
	Admin          bool
}

var people = []person{
	{ID: "ada", Name: "Ada Lovelace", Role: "Underwriter"},
	{ID: "ben", Name: "Ben Carter", Role: "Underwriter"},
	{ID: "carol", Name: "Carol Diaz", Role: "Administrator", Admin: true},
}

func personByID(id string) (person, bool) {
	for _, p := range people {
		if p.ID == id {
			return p, true
		}
	}
	return person{}, false
}

// appConfig is what the example needs to run.
type appConfig struct {
	// Locks is the lock service; Types its record types, the same the
	// Manager or the holdfast server runs with.
	Locks holdfast.Service
	Types holdfast.Config
	DB    *sql.DB
	// IdleTimeout and the page heartbeats tune httplock; zero means its
	// defaults.
	IdleTimeout              time.Duration
	PageHeartbeat            time.Duration
	HiddenPageHeartbeat      time.Duration
	ReleaseInactivePageAfter time.Duration
	// Now is the lock store's clock, for "last active 2 minutes ago".
	Now    func() time.Time
	Logger *slog.Logger
}

type app struct {
	svc   holdfast.Service
	repos *records.Repositories
	mw    *httplock.Middleware
	pages map[string]*template.Template
	now   func() time.Time
	log   *slog.Logger

	mu       sync.Mutex
	signedIn map[string]string // sign-in cookie → person id
}

//go:embed templates
var templateFS embed.FS

const cookieName = "policies_session"

func newApp(ctx context.Context, cfg appConfig) (http.Handler, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	reg, err := implicit.NewRegistry(cfg.Locks, cfg.Types)
	if err != nil {
		return nil, err
	}
	repos, err := records.Open(ctx, cfg.DB, reg)
	if err != nil {
		return nil, err
	}
	a := &app{svc: cfg.Locks, repos: repos, now: cfg.Now, log: cfg.Logger, signedIn: make(map[string]string)}
	a.mw, err = httplock.New(httplock.Config{
		Service:                  cfg.Locks,
		Owner:                    a.owner,
		IdleTimeout:              cfg.IdleTimeout,
		PageHeartbeat:            cfg.PageHeartbeat,
		HiddenPageHeartbeat:      cfg.HiddenPageHeartbeat,
		ReleaseInactivePageAfter: cfg.ReleaseInactivePageAfter,
		Logger:                   cfg.Logger,
	})
	if err != nil {
		return nil, err
	}
	if a.pages, err = parsePages(); err != nil {
		return nil, err
	}

	mux := http.NewServeMux()
	mux.Handle("/holdfast/", a.mw.Handler())
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/policies", http.StatusSeeOther)
	})
	mux.HandleFunc("GET /signin", a.signinPage)
	mux.HandleFunc("POST /signin", a.signin)
	mux.HandleFunc("POST /signout", a.signedInOnly(a.signout))
	mux.HandleFunc("GET /policies", a.signedInOnly(a.list))
	mux.HandleFunc("GET /policies/{id}", a.signedInOnly(a.viewPolicy))
	mux.HandleFunc("GET /policies/{id}/edit", a.signedInOnly(a.editPolicy))
	mux.HandleFunc("POST /policies/{id}/edit", a.signedInOnly(a.editPolicy)) // take over
	mux.HandleFunc("POST /policies/{id}/save", a.signedInOnly(a.savePolicy))
	mux.HandleFunc("POST /policies/{id}/cancel", a.signedInOnly(a.cancelPolicy))
	mux.HandleFunc("GET /coverages/{id}/edit", a.signedInOnly(a.editCoverage))
	mux.HandleFunc("POST /coverages/{id}/edit", a.signedInOnly(a.editCoverage)) // take over
	mux.HandleFunc("POST /coverages/{id}/save", a.signedInOnly(a.saveCoverage))
	mux.HandleFunc("POST /coverages/{id}/cancel", a.signedInOnly(a.cancelCoverage))
	mux.HandleFunc("GET /admin/locks", a.adminOnly(a.adminLocks))
	mux.HandleFunc("POST /admin/release", a.adminOnly(a.adminRelease))
	return http.NewCrossOriginProtection().Handler(a.mw.Wrap(mux)), nil
}

func parsePages() (map[string]*template.Template, error) {
	funcs := template.FuncMap{"join": strings.Join}
	pages := make(map[string]*template.Template)
	for _, name := range []string{"signin", "list", "policy", "policy_edit", "coverage_edit", "admin"} {
		t, err := template.New(name).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("template %s: %w", name, err)
		}
		pages[name] = t
	}
	return pages, nil
}

// owner tells httplock who is signed in: the application's session cookie,
// the user id and the name colleagues see.
func (a *app) owner(r *http.Request) (holdfast.Owner, bool) {
	p, sid, ok := a.current(r)
	if !ok {
		return holdfast.Owner{}, false
	}
	return holdfast.Owner{Session: sid, User: p.ID, Name: p.Name}, true
}

func (a *app) current(r *http.Request) (person, string, bool) {
	c, err := r.Cookie(cookieName)
	if err != nil {
		return person{}, "", false
	}
	a.mu.Lock()
	id, ok := a.signedIn[c.Value]
	a.mu.Unlock()
	if !ok {
		return person{}, "", false
	}
	p, ok := personByID(id)
	return p, c.Value, ok
}

func (a *app) signedInOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if _, _, ok := a.current(r); !ok {
			http.Redirect(w, r, "/signin", http.StatusSeeOther)
			return
		}
		h(w, r)
	}
}

func (a *app) adminOnly(h http.HandlerFunc) http.HandlerFunc {
	return a.signedInOnly(func(w http.ResponseWriter, r *http.Request) {
		if p, _, _ := a.current(r); !p.Admin {
			http.Error(w, "Only administrators may release other people's locks.", http.StatusForbidden)
			return
		}
		h(w, r)
	})
}

// pageData is what every template gets.
type pageData struct {
	Title string
	Me    *person
	Flash string
	Error string

	Policies []listRow
	Policy   records.Policy
	Coverage records.Coverage
	Holders  []holderView
	// Editing is the open edit page and the lock it holds.
	Editing *editing
	// TakeoverAction is where "take over" posts, when the holder is me.
	TakeoverAction string
	// Watch, on a read-only view of a held policy, tells the reader when
	// the policy is free again.
	Watch  template.HTML
	Locks  []adminRow
	People []person
}

type editing struct {
	Page   httplock.Page
	Lock   holdfast.Lock
	Until  string
	Script template.HTML
}

type listRow struct {
	records.Policy
	EditedBy *holderView
}

// holderView describes a lock for people.
type holderView struct {
	Name, Since, Until, LastActive string
	// Note says what the holder is doing ("editing coverage Fire").
	Note string
	Mine bool
	// Resume, on a page that offers to take over from the person's own
	// other tab, takes over at once when that tab is this one (a reload).
	Resume template.HTML
}

type adminRow struct {
	Key, Session string
	holderView
}

func (a *app) render(w http.ResponseWriter, r *http.Request, status int, name string, d pageData) {
	if p, _, ok := a.current(r); ok {
		d.Me = &p
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	if err := a.pages[name].ExecuteTemplate(w, "layout", d); err != nil {
		a.log.Error("render", "page", name, "error", err)
	}
}

func (a *app) fail(w http.ResponseWriter, r *http.Request, err error) {
	status := http.StatusInternalServerError
	msg := "Something went wrong: " + err.Error()
	switch {
	case errors.Is(err, records.ErrNotFound):
		status, msg = http.StatusNotFound, "There is no such record."
	case errors.Is(err, holdfast.ErrUnavailable):
		status, msg = http.StatusServiceUnavailable, "The lock service cannot be reached; nothing was changed. Try again in a moment."
	default:
		a.log.Error("request failed", "path", r.URL.Path, "error", err)
	}
	a.render(w, r, status, "list", pageData{Title: "Error", Error: msg})
}

func (a *app) signinPage(w http.ResponseWriter, r *http.Request) {
	a.render(w, r, http.StatusOK, "signin", pageData{Title: "Sign in", People: people})
}

func (a *app) signin(w http.ResponseWriter, r *http.Request) {
	p, ok := personByID(r.FormValue("person"))
	if !ok {
		http.Redirect(w, r, "/signin", http.StatusSeeOther)
		return
	}
	b := make([]byte, 16)
	rand.Read(b)
	sid := hex.EncodeToString(b)
	a.mu.Lock()
	a.signedIn[sid] = p.ID
	a.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: sid, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode})
	http.Redirect(w, r, "/policies", http.StatusSeeOther)
}

// signout ends the person's holdfast sessions, which releases every lock
// of every page they had open.
func (a *app) signout(w http.ResponseWriter, r *http.Request) {
	o, _ := a.owner(r)
	if err := a.mw.EndSession(r.Context(), o); err != nil {
		a.fail(w, r, err)
		return
	}
	a.mu.Lock()
	delete(a.signedIn, o.Session)
	a.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: cookieName, Path: "/", MaxAge: -1})
	http.Redirect(w, r, "/signin", http.StatusSeeOther)
}

func (a *app) list(w http.ResponseWriter, r *http.Request) {
	ps, err := a.repos.ListPolicies(r.Context())
	if err != nil {
		a.fail(w, r, err)
		return
	}
	locks, err := a.svc.Locks(r.Context(), holdfast.LockQuery{Prefix: "policy", Limit: 1000})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	me, _, _ := a.current(r)
	held := make(map[string]holdfast.Lock)
	for _, l := range locks.Locks {
		held[l.Key] = l
	}
	d := pageData{Title: "Policies", Flash: r.URL.Query().Get("flash")}
	for _, p := range ps {
		row := listRow{Policy: p}
		if l, ok := held[a.repos.Policies.Key(p.ID)]; ok {
			h := a.describe(r.Context(), l, me)
			row.EditedBy = &h
		}
		d.Policies = append(d.Policies, row)
	}
	a.render(w, r, http.StatusOK, "list", d)
}

// describe turns a lock into what people read about it.
func (a *app) describe(ctx context.Context, l holdfast.Lock, me person) holderView {
	now := a.now()
	h := holderView{
		Name:  l.Owner.Name,
		Since: clock(l.AcquiredAt, now),
		Until: clock(l.ExpiresAt, now),
		Mine:  l.Owner.User != "" && l.Owner.User == me.ID,
	}
	if h.Name == "" {
		h.Name = l.Owner.User
	}
	h.Note = l.Note
	if s, err := a.svc.Sessions(ctx, holdfast.SessionQuery{Session: l.Owner.Session}); err == nil && len(s.Sessions) == 1 {
		h.LastActive = ago(now.Sub(time.Time(s.Sessions[0].LastSeen)))
	}
	return h
}

func clock(t, now time.Time) string {
	t, now = t.UTC(), now.UTC()
	if t.Year() == now.Year() && t.YearDay() == now.YearDay() {
		return t.Format("15:04 UTC")
	}
	return t.Format("Jan 2, 15:04 UTC")
}

func ago(d time.Duration) string {
	switch {
	case d < 10*time.Second:
		return "just now"
	case d < time.Minute:
		return fmt.Sprintf("%d seconds ago", int(d.Seconds()))
	case d < 2*time.Minute:
		return "a minute ago"
	case d < time.Hour:
		return fmt.Sprintf("%d minutes ago", int(d.Minutes()))
	default:
		return fmt.Sprintf("%.0f hours ago", d.Hours())
	}
}

func pathID(r *http.Request) (int64, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		return 0, records.ErrNotFound
	}
	return id, nil
}

// viewPolicy shows a policy read-only, with who is editing it.
func (a *app) viewPolicy(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	d := pageData{Flash: r.URL.Query().Get("flash")}
	a.showPolicy(w, r, http.StatusOK, id, d)
}

// showPolicy renders the read-only view of a policy with its holders.
func (a *app) showPolicy(w http.ResponseWriter, r *http.Request, status int, id int64, d pageData) {
	p, err := a.repos.Policies.Find(r.Context(), id)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	locks, err := a.repos.Policies.Holders(r.Context(), id)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	me, _, _ := a.current(r)
	for _, l := range locks {
		h := a.describe(r.Context(), l, me)
		if h.Mine && d.TakeoverAction != "" {
			h.Resume = a.mw.ResumeScriptTag(l)
		}
		d.Holders = append(d.Holders, h)
	}
	d.Watch = a.mw.WatchScriptTag(a.repos.Policies.Key(id), locks)
	d.Policy = p
	d.Title = "Policy " + p.Number
	a.render(w, r, status, "policy", d)
}

// startEdit reads what every edit page starts with: the record's id, the
// page's own holdfast session, and whether the user asked to take over
// from their other tab. On failure it has answered already.
func (a *app) startEdit(w http.ResponseWriter, r *http.Request) (_ *http.Request, id int64, page httplock.Page, takeover, ok bool) {
	id, err := pathID(r)
	if err != nil {
		a.fail(w, r, err)
		return r, 0, page, false, false
	}
	r, page, err = a.mw.StartPage(r)
	if err != nil {
		a.fail(w, r, err)
		return r, 0, page, false, false
	}
	return r, id, page, r.Method == http.MethodPost && r.PostFormValue("takeover") == "1", true
}

// editPolicy acquires the policy's lock and only then loads it. Refused,
// it shows the policy read-only with who holds it; the holder's own other
// tab can be taken over (POST with takeover=1).
func (a *app) editPolicy(w http.ResponseWriter, r *http.Request) {
	r, id, page, takeover, ok := a.startEdit(w, r)
	if !ok {
		return
	}
	p, l, err := a.repos.Policies.Edit(r.Context(), id, implicit.EditOptions{Takeover: takeover})
	if errors.Is(err, holdfast.ErrLocked) {
		a.showPolicy(w, r, http.StatusLocked, id, pageData{TakeoverAction: fmt.Sprintf("/policies/%d/edit", id)})
		return
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.render(w, r, http.StatusOK, "policy_edit", pageData{Title: "Edit policy " + p.Number, Policy: p, Editing: a.editing(page, l)})
}

func (a *app) editing(page httplock.Page, l holdfast.Lock) *editing {
	return &editing{Page: page, Lock: l, Until: clock(l.ExpiresAt, a.now()), Script: a.mw.ScriptTag(page, l)}
}

// savePolicy writes through the decorated repository, which verifies that
// this page still holds the lock it was opened under, then releases it.
func (a *app) savePolicy(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	p := records.Policy{ID: id, Holder: r.PostFormValue("holder"), Premium: r.PostFormValue("premium"), Notes: r.PostFormValue("notes"), Number: r.PostFormValue("number")}
	ctx, ed, ok := a.pageContext(r)
	if !ok {
		http.Error(w, "Open the policy for editing first.", http.StatusBadRequest)
		return
	}
	if err := a.repos.Policies.Update(ctx, id, p); err != nil {
		if msg, refused := notSaved(err); refused {
			// Keep what the editor typed, and say why it was not saved.
			full, ferr := a.repos.Policies.Find(ctx, id)
			if ferr == nil {
				p.Coverages, p.Number = full.Coverages, full.Number
			}
			a.render(w, r, http.StatusConflict, "policy_edit", pageData{Title: "Edit policy " + p.Number, Policy: p, Editing: ed, Error: msg})
			return
		}
		a.fail(w, r, err)
		return
	}
	if err := a.repos.Policies.Release(ctx, id); err != nil {
		a.fail(w, r, err)
		return
	}
	http.Redirect(w, r, fmt.Sprintf("/policies/%d?flash=Saved.", id), http.StatusSeeOther)
}

func (a *app) cancelPolicy(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if err := a.repos.Policies.Release(r.Context(), id); err != nil {
		a.fail(w, r, err)
		return
	}
	http.Redirect(w, r, fmt.Sprintf("/policies/%d", id), http.StatusSeeOther)
}

// pageContext returns the context of a save from an edit page: the page's
// own session (set by the middleware) and the token of the grant the page
// was opened under.
func (a *app) pageContext(r *http.Request) (context.Context, *editing, bool) {
	page, ok := httplock.PageFrom(r.Context())
	if !ok {
		return nil, nil, false
	}
	token, _ := strconv.ParseUint(r.PostFormValue("lock_token"), 10, 64)
	return implicit.WithToken(r.Context(), token), &editing{Page: page, Lock: holdfast.Lock{Token: token}}, true
}

// notSaved explains a write the lock manager refused.
func notSaved(err error) (string, bool) {
	var (
		lost   *holdfast.LockLostError
		stale  *holdfast.StaleTokenError
		locked *holdfast.LockedError
	)
	switch {
	case errors.As(err, &lost):
		msg := "Not saved: this page no longer holds the lock. "
		switch lost.Reason {
		case holdfast.LostForceReleased:
			who := "An administrator"
			if lost.Actor != "" {
				who += ", " + lost.Actor + ","
			}
			return msg + who + " released it: \u201c" + lost.ForceReason + "\u201d.", true
		case holdfast.LostTakenOver:
			return msg + "You took over editing in another tab or window.", true
		case holdfast.LostSessionExpired:
			return msg + "You were away longer than the idle timeout, so it was released.", true
		default:
			return msg + lost.Message, true
		}
	case errors.As(err, &stale):
		return "Not saved: the record was opened for editing again elsewhere since this page was opened.", true
	case errors.As(err, &locked):
		return "Not saved: " + locked.Message, true
	case errors.Is(err, records.ErrStaleWrite):
		return "Not saved: the record was changed under a newer lock.", true
	}
	return "", false
}

// editCoverage locks the coverage, which is a member of its policy's
// aggregate: the lock is taken on the whole policy.
func (a *app) editCoverage(w http.ResponseWriter, r *http.Request) {
	r, id, page, takeover, ok := a.startEdit(w, r)
	if !ok {
		return
	}
	// The note tells colleagues, who see the policy locked, why. Reading
	// takes no lock under exclusive-write.
	c, err := a.repos.Coverages.Find(r.Context(), id)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	policyID := c.PolicyID
	c, l, err := a.repos.Coverages.Edit(r.Context(), id, implicit.EditOptions{Takeover: takeover, Note: "editing coverage " + c.Kind})
	if errors.Is(err, holdfast.ErrLocked) {
		a.showPolicy(w, r, http.StatusLocked, policyID, pageData{TakeoverAction: fmt.Sprintf("/coverages/%d/edit", id)})
		return
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	p, err := a.repos.Policies.Find(r.Context(), c.PolicyID)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.render(w, r, http.StatusOK, "coverage_edit", pageData{Title: "Edit coverage " + c.Kind, Policy: p, Coverage: c, Editing: a.editing(page, l)})
}

func (a *app) saveCoverage(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	c, err := a.repos.Coverages.Find(r.Context(), id)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	c.Kind, c.Limit, c.Deductible = r.PostFormValue("kind"), r.PostFormValue("limit"), r.PostFormValue("deductible")
	ctx, ed, ok := a.pageContext(r)
	if !ok {
		http.Error(w, "Open the coverage for editing first.", http.StatusBadRequest)
		return
	}
	if err := a.repos.Coverages.Update(ctx, id, c); err != nil {
		if msg, refused := notSaved(err); refused {
			p, _ := a.repos.Policies.Find(ctx, c.PolicyID)
			a.render(w, r, http.StatusConflict, "coverage_edit", pageData{Title: "Edit coverage " + c.Kind, Policy: p, Coverage: c, Editing: ed, Error: msg})
			return
		}
		a.fail(w, r, err)
		return
	}
	if err := a.repos.Coverages.Release(ctx, id); err != nil {
		a.fail(w, r, err)
		return
	}
	http.Redirect(w, r, fmt.Sprintf("/policies/%d?flash=Coverage+saved.", c.PolicyID), http.StatusSeeOther)
}

func (a *app) cancelCoverage(w http.ResponseWriter, r *http.Request) {
	id, err := pathID(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	c, err := a.repos.Coverages.Find(r.Context(), id)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if err := a.repos.Coverages.Release(r.Context(), id); err != nil {
		a.fail(w, r, err)
		return
	}
	http.Redirect(w, r, fmt.Sprintf("/policies/%d", c.PolicyID), http.StatusSeeOther)
}

// adminLocks lists every lock with a force-release form. A real
// deployment uses the holdfast admin console; the example keeps one page
// so that the whole story runs in one process.
func (a *app) adminLocks(w http.ResponseWriter, r *http.Request) {
	page, err := a.svc.Locks(r.Context(), holdfast.LockQuery{Limit: 1000})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	me, _, _ := a.current(r)
	d := pageData{Title: "Locks", Flash: r.URL.Query().Get("flash")}
	for _, l := range page.Locks {
		d.Locks = append(d.Locks, adminRow{Key: l.Key, Session: l.Owner.Session, holderView: a.describe(r.Context(), l, me)})
	}
	a.render(w, r, http.StatusOK, "admin", d)
}

func (a *app) adminRelease(w http.ResponseWriter, r *http.Request) {
	me, _, _ := a.current(r)
	reason := strings.TrimSpace(r.PostFormValue("reason"))
	if reason == "" {
		http.Redirect(w, r, "/admin/locks?flash=A+reason+is+required.", http.StatusSeeOther)
		return
	}
	_, err := a.svc.ForceRelease(r.Context(), holdfast.ForceReleaseRequest{
		Keys: []string{r.PostFormValue("key")}, Session: r.PostFormValue("session"),
		Reason: reason, Actor: me.Name,
	})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	http.Redirect(w, r, "/admin/locks?flash=Released.", http.StatusSeeOther)
}
