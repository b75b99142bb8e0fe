// Package httplock connects holdfast to net/http applications: middleware
// that binds each request to the signed-in person's lock owner and keeps
// their holdfast session alive, per-page editing sessions for edit pages,
// and the endpoints and script (holdfast-edit.js) that keep an open edit
// page's lock alive, release it when the page is left, and tell the editor
// when and why it was lost.
//
// Every edit page is its own holdfast session below the person's session,
// so that a second tab of the same person is a different session: it is
// refused with the holder named, and can take the lock over (same user)
// instead of silently sharing it.
package httplock

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/implicit"
)

// Config configures a Middleware.
type Config struct {
	// Service is the lock service. Required.
	Service holdfast.Service
	// Owner returns the signed-in person of a request from the
	// application's own session: Session is the application's session id
	// (it is hashed, never shown), User the stable user id, Name what
	// colleagues see. False means nobody is signed in. Required.
	Owner func(*http.Request) (holdfast.Owner, bool)
	// Secret signs page tokens (CSRF protection of the page endpoints); at
	// least 32 bytes, the same on every node of the application. Default:
	// random, so page tokens do not survive a restart.
	Secret []byte
	// IdleTimeout is set on every holdfast session on each heartbeat: a
	// session (a closed tab, a sleeping laptop) that sends nothing for this
	// long ends and its locks are released. Default 5 minutes.
	IdleTimeout time.Duration
	// KeepAliveEvery limits the middleware to one heartbeat per session
	// per interval, so ordinary page views cost almost nothing. Default a
	// quarter of IdleTimeout.
	KeepAliveEvery time.Duration
	// PageHeartbeat is how often an open edit page heartbeats; default 20
	// seconds, at most a sixth of IdleTimeout.
	PageHeartbeat time.Duration
	// HiddenPageHeartbeat is the slower pace of a hidden tab; default a
	// third of IdleTimeout. Browsers may delay timers of hidden tabs to
	// once a minute, so keep IdleTimeout at 3 minutes or more.
	HiddenPageHeartbeat time.Duration
	// ReleaseInactivePageAfter is how long an open edit page may go
	// without its person typing, clicking or scrolling in it before the
	// page releases its lock, as if it had been left: heartbeats keep a
	// forgotten tab's lock alive, so without this bound a record left open
	// over lunch stays locked until the lock itself expires. The page
	// warns in the last quarter of it (at most the last 5 minutes), and
	// any use clears the warning. Default 60 minutes; negative turns it
	// off. It must be longer than PageHeartbeat, the pace of the page's
	// checks.
	ReleaseInactivePageAfter time.Duration
	// Prefix is the path where Handler is mounted; default "/holdfast/".
	Prefix string
	// Logger receives keep-alive failures; default slog.Default().
	Logger *slog.Logger
	// Now is the clock of the keep-alive throttle; default time.Now.
	Now func() time.Time
}

// Validate fills defaults and reports the first problem.
func (c *Config) Validate() error {
	switch {
	case c.Service == nil:
		return errors.New("httplock: a holdfast.Service is required")
	case c.Owner == nil:
		return errors.New("httplock: an Owner function is required")
	case c.Secret != nil && len(c.Secret) < 32:
		return errors.New("httplock: Secret must be at least 32 bytes")
	case c.IdleTimeout < 0 || c.KeepAliveEvery < 0 || c.PageHeartbeat < 0 || c.HiddenPageHeartbeat < 0:
		return errors.New("httplock: durations must not be negative")
	}
	if c.Secret == nil {
		c.Secret = make([]byte, 32)
		rand.Read(c.Secret)
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = 5 * time.Minute
	}
	if c.KeepAliveEvery == 0 {
		c.KeepAliveEvery = c.IdleTimeout / 4
	}
	if c.PageHeartbeat == 0 {
		c.PageHeartbeat = min(20*time.Second, c.IdleTimeout/6)
	}
	if c.HiddenPageHeartbeat == 0 {
		c.HiddenPageHeartbeat = max(c.PageHeartbeat, c.IdleTimeout/3)
	}
	if c.PageHeartbeat >= c.IdleTimeout || c.HiddenPageHeartbeat >= c.IdleTimeout {
		return fmt.Errorf("httplock: page heartbeats (%s, hidden %s) must come well within the idle timeout %s",
			c.PageHeartbeat, c.HiddenPageHeartbeat, c.IdleTimeout)
	}
	if c.ReleaseInactivePageAfter == 0 {
		c.ReleaseInactivePageAfter = 60 * time.Minute
	}
	if c.ReleaseInactivePageAfter > 0 && c.ReleaseInactivePageAfter <= c.PageHeartbeat {
		return fmt.Errorf("httplock: ReleaseInactivePageAfter %s must be longer than PageHeartbeat %s, the pace at which a page checks it (negative turns it off)",
			c.ReleaseInactivePageAfter, c.PageHeartbeat)
	}
	if c.Prefix == "" {
		c.Prefix = "/holdfast/"
	}
	if !strings.HasPrefix(c.Prefix, "/") || !strings.HasSuffix(c.Prefix, "/") {
		return fmt.Errorf("httplock: Prefix %q must start and end with /", c.Prefix)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return nil
}

// Middleware binds requests to lock owners. Create it with New.
type Middleware struct {
	cfg Config
	svc holdfast.Service
	log *slog.Logger

	mu       sync.Mutex
	lastBeat map[string]time.Time // session → last keep-alive
	pruned   time.Time
}

// New returns a Middleware for cfg.
func New(cfg Config) (*Middleware, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Middleware{cfg: cfg, svc: cfg.Service, log: cfg.Logger, lastBeat: make(map[string]time.Time)}, nil
}

// Page identifies one open edit page: its own holdfast session below the
// person's session, and the token that proves a request comes from that
// page (CSRF protection of the heartbeat and release endpoints, and of the
// page's own forms).
type Page struct {
	ID    string
	Token string
}

// Form field and header names that carry a Page.
const (
	PageField   = "holdfast_page"
	TokenField  = "holdfast_token"
	PageHeader  = "X-Holdfast-Page"
	TokenHeader = "X-Holdfast-Token"
)

type ctxKey int

const pageKey ctxKey = iota

// PageFrom returns the page the request came from (or StartPage began).
func PageFrom(ctx context.Context) (Page, bool) {
	p, ok := ctx.Value(pageKey).(Page)
	return p, ok
}

// otherSession is why a page whose token is not of the person's current
// session is refused: they signed out and in again since it was opened
// (or the server's Secret changed).
const otherSession = "This page was opened before you last signed in, so it no longer holds its edit lock. Open the record again."

// Wrap returns next behind the middleware. For a signed-in person it puts
// the lock owner in the request context (implicit.OwnerFrom), keeps the
// holdfast session alive, and for a request that names a page, checks the
// page's token (403 otherwise) and uses the page's session.
func (m *Middleware) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o, ok := m.cfg.Owner(r)
		if !ok || o.Session == "" {
			next.ServeHTTP(w, r)
			return
		}
		o.Session = m.personSession(o.Session)
		ctx := r.Context()
		if p, named := m.pageParams(r); named {
			if !m.validToken(o.Session, p) {
				if strings.HasPrefix(r.URL.Path, m.cfg.Prefix) {
					// The page's own script: a reason it can explain.
					writeJSON(w, http.StatusForbidden, Status{Reason: "other_session", Message: otherSession})
					return
				}
				http.Error(w, otherSession, http.StatusForbidden)
				return
			}
			o.Session = pageSession(o.Session, p.ID)
			ctx = context.WithValue(ctx, pageKey, p)
		}
		if !strings.HasPrefix(r.URL.Path, m.cfg.Prefix) {
			// The page endpoints heartbeat themselves.
			m.keepAlive(ctx, o.Session)
		}
		next.ServeHTTP(w, r.WithContext(implicit.WithOwner(ctx, o)))
	})
}

// StartPage begins a new edit page for a signed-in request: the returned
// request's owner is the page's own session. Render Page.Fields in the
// page's forms and ScriptTag in its body. A request that already came from
// a page keeps it.
func (m *Middleware) StartPage(r *http.Request) (*http.Request, Page, error) {
	if p, ok := PageFrom(r.Context()); ok {
		return r, p, nil
	}
	o, ok := implicit.OwnerFrom(r.Context())
	if !ok {
		return r, Page{}, errors.New("httplock: StartPage needs a signed-in request behind the middleware")
	}
	b := make([]byte, 12)
	rand.Read(b)
	p := Page{ID: base64.RawURLEncoding.EncodeToString(b)}
	p.Token = m.sign(o.Session, p.ID)
	o.Session = pageSession(o.Session, p.ID)
	// Start the page's session with the idle timeout now, so that a tab
	// closed before its first heartbeat, whose beacon is lost, still frees
	// its lock after the idle timeout and not only at the lock's expiry.
	_, err := m.svc.Heartbeat(r.Context(), holdfast.HeartbeatRequest{Session: o.Session, IdleTimeout: holdfast.Duration(m.cfg.IdleTimeout)})
	if err != nil {
		return r, Page{}, fmt.Errorf("httplock: start page: %w", err)
	}
	ctx := context.WithValue(implicit.WithOwner(r.Context(), o), pageKey, p)
	return r.WithContext(ctx), p, nil
}

// EndSession releases every lock of the signed-in person's session and of
// all its pages, and ends those sessions. Call it on logout and whenever
// the application invalidates a session; owner is what the Owner function
// returned for it.
func (m *Middleware) EndSession(ctx context.Context, owner holdfast.Owner) error {
	person := m.personSession(owner.Session)
	ids := []string{person}
	q := holdfast.SessionQuery{User: owner.User, Limit: 1000}
	for {
		page, err := m.svc.Sessions(ctx, q)
		if err != nil {
			return fmt.Errorf("httplock: list sessions: %w", err)
		}
		for _, s := range page.Sessions {
			if strings.HasPrefix(s.ID, person+"/") {
				ids = append(ids, s.ID)
			}
		}
		if page.Next == nil {
			break
		}
		q.After = *page.Next
	}
	for _, id := range ids {
		if _, err := m.svc.EndSession(ctx, holdfast.EndSessionRequest{Session: id}); err != nil {
			return fmt.Errorf("httplock: end session: %w", err)
		}
	}
	m.mu.Lock()
	for _, id := range ids {
		delete(m.lastBeat, id)
	}
	m.mu.Unlock()
	return nil
}

// personSession is the holdfast session of an application session: a hash,
// so that the application's session id, a secret, is never shown to
// whoever can list locks.
func (m *Middleware) personSession(appSession string) string {
	h := sha256.Sum256([]byte(appSession))
	return "web-" + hex.EncodeToString(h[:16])
}

func pageSession(person, pageID string) string { return person + "/" + pageID }

func (m *Middleware) sign(person, pageID string) string {
	mac := hmac.New(sha256.New, m.cfg.Secret)
	io.WriteString(mac, person+"\x00"+pageID)
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

func (m *Middleware) validToken(person string, p Page) bool {
	if p.ID == "" || len(p.ID) > 64 || strings.ContainsAny(p.ID, "/\x00") {
		return false
	}
	return hmac.Equal([]byte(p.Token), []byte(m.sign(person, p.ID)))
}

// maxBeaconBytes bounds a text/plain beacon body read for page fields.
const maxBeaconBytes = 4 << 10

// pageParams finds the page a request names: in headers (fetch), in a form
// (the page's own forms, a beacon with URLSearchParams or FormData), or in
// a text/plain beacon to the page endpoints.
func (m *Middleware) pageParams(r *http.Request) (Page, bool) {
	if id := r.Header.Get(PageHeader); id != "" {
		return Page{ID: id, Token: r.Header.Get(TokenHeader)}, true
	}
	if r.Method != http.MethodPost {
		return Page{}, false
	}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch ct {
	case "application/x-www-form-urlencoded", "multipart/form-data":
		if id := r.PostFormValue(PageField); id != "" {
			return Page{ID: id, Token: r.PostFormValue(TokenField)}, true
		}
	case "text/plain":
		if !strings.HasPrefix(r.URL.Path, m.cfg.Prefix) {
			return Page{}, false
		}
		b, err := io.ReadAll(io.LimitReader(r.Body, maxBeaconBytes))
		if err != nil {
			return Page{}, false
		}
		v, err := url.ParseQuery(strings.TrimSpace(string(b)))
		if err != nil {
			return Page{}, false
		}
		r.PostForm = v
		if id := v.Get(PageField); id != "" {
			return Page{ID: id, Token: v.Get(TokenField)}, true
		}
	}
	return Page{}, false
}

// keepAlive heartbeats session unless it did so within KeepAliveEvery.
func (m *Middleware) keepAlive(ctx context.Context, session string) {
	now := m.cfg.Now()
	m.mu.Lock()
	if last, ok := m.lastBeat[session]; ok && now.Sub(last) < m.cfg.KeepAliveEvery {
		m.mu.Unlock()
		return
	}
	m.lastBeat[session] = now
	if now.Sub(m.pruned) > m.cfg.KeepAliveEvery {
		for s, t := range m.lastBeat {
			if now.Sub(t) >= m.cfg.KeepAliveEvery {
				delete(m.lastBeat, s)
			}
		}
		m.lastBeat[session] = now
		m.pruned = now
	}
	m.mu.Unlock()

	_, err := m.svc.Heartbeat(ctx, holdfast.HeartbeatRequest{Session: session, IdleTimeout: holdfast.Duration(m.cfg.IdleTimeout)})
	switch {
	case err == nil, errors.Is(err, holdfast.ErrLockLost):
		// An ended session starts again with its next acquire; an edit
		// page learns about its loss from its own heartbeat.
	default:
		m.log.Warn("holdfast keep-alive failed", "session", session, "error", err)
	}
}
