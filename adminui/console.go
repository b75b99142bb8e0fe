// Package adminui is the admin console of holdfast: server-rendered HTML
// pages over a *holdfast.Manager that list locks live, show what a lock
// covers and its history, and force-release with a required reason.
//
// The server mounts it at / and under Prefix. It authenticates with the
// API's bearer tokens once, at sign-in, and then by an in-memory console
// session in an HttpOnly, SameSite=Strict cookie; every POST carries the
// session's CSRF token and must come from the console's own origin.
package adminui

import (
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/holdfast/holdfast"
)

// Prefix is where the console's pages live; its entry point is "/".
const Prefix = "/console/"

// Defaults of Config.
const (
	DefaultSessionTTL  = 8 * time.Hour
	DefaultPageSize    = 50
	DefaultEventPing   = 15 * time.Second
	DefaultMaxSessions = 10000
)

// Access is what a console session may do.
type Access int

const (
	// NoAccess is a token the console does not accept.
	NoAccess Access = iota
	// ReadOnly sees every page but releases nothing.
	ReadOnly
	// FullAccess may also force-release.
	FullAccess
)

func (a Access) String() string {
	switch a {
	case ReadOnly:
		return "reader"
	case FullAccess:
		return "admin"
	default:
		return "none"
	}
}

// Config configures a Console.
type Config struct {
	// Manager answers every page. Required.
	Manager *holdfast.Manager
	// Authenticate tells what a sign-in token grants. It must compare in
	// constant time. Required unless Anonymous.
	Authenticate func(token string) Access
	// Anonymous lets everyone in with FullAccess and no sign-in, for a
	// server without tokens that listens on loopback only; requests must
	// then name a loopback host.
	Anonymous bool
	// SessionTTL is how long a sign-in lasts; default 8 hours.
	SessionTTL time.Duration
	// MaxSessions bounds the console sessions kept in memory; the oldest
	// go first. Default 10,000.
	MaxSessions int
	// PageSize is the number of rows of a listing; default 50.
	PageSize int
	// EventPing is how often an idle live-update stream gets a comment;
	// default 15s.
	EventPing time.Duration
	// Now is the clock for relative times and sessions; default time.Now.
	Now func() time.Time
	// Logger receives sign-ins, sign-outs and releases; default
	// slog.Default(). Tokens are never logged.
	Logger *slog.Logger
}

func (c *Config) validate() error {
	if c.Manager == nil {
		return errors.New("adminui: a Manager is required")
	}
	if c.Authenticate == nil && !c.Anonymous {
		return errors.New("adminui: Authenticate is required unless Anonymous")
	}
	if c.SessionTTL < 0 || c.PageSize < 0 || c.EventPing < 0 || c.MaxSessions < 0 {
		return errors.New("adminui: limits must not be negative")
	}
	setDefault(&c.SessionTTL, DefaultSessionTTL)
	setDefault(&c.MaxSessions, DefaultMaxSessions)
	setDefault(&c.PageSize, DefaultPageSize)
	setDefault(&c.EventPing, DefaultEventPing)
	if c.PageSize > maxPageSize {
		return errors.New("adminui: PageSize must be at most 1000")
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// maxPageSize is the largest page the Manager lists at once.
const maxPageSize = 1000

//go:embed templates/*.html
var templateFS embed.FS

//go:embed assets
var assetFS embed.FS

// Console is the http.Handler of the console's pages.
type Console struct {
	cfg      Config
	mgr      *holdfast.Manager
	log      *slog.Logger
	sessions *sessionStore
	pages    map[string]*template.Template
	assets   http.Handler
	routes   map[string]http.HandlerFunc // "METHOD /path" → handler

	closing   chan struct{}
	closeOnce sync.Once
}

// New returns a Console for cfg.
func New(cfg Config) (*Console, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	sub, err := fs.Sub(assetFS, "assets")
	if err != nil {
		return nil, err
	}
	c := &Console{
		cfg:      cfg,
		mgr:      cfg.Manager,
		log:      cfg.Logger,
		sessions: newSessionStore(cfg.SessionTTL, cfg.MaxSessions, cfg.Now),
		pages:    pages,
		assets:   http.StripPrefix(Prefix+"assets/", http.FileServerFS(sub)),
		closing:  make(chan struct{}),
	}
	c.routes = map[string]http.HandlerFunc{
		"GET /":                                c.signedIn(c.locksPage),
		"GET " + Prefix + "locks/rows":         c.signedIn(c.locksRows),
		"GET " + Prefix + "lock":               c.signedIn(c.lockPage),
		"GET " + Prefix + "sessions":           c.signedIn(c.sessionsPage),
		"GET " + Prefix + "audit":              c.signedIn(c.auditPage),
		"GET " + Prefix + "release":            c.signedIn(c.confirmRelease),
		"POST " + Prefix + "release":           c.signedIn(c.checked(c.release)),
		"GET " + Prefix + "events":             c.signedIn(c.events),
		"GET " + Prefix + "signin":             c.signInPage,
		"POST " + Prefix + "signin":            c.signIn,
		"POST " + Prefix + "signout":           c.signedIn(c.checked(c.signOut)),
		"GET " + Prefix + "assets/console.css": c.asset,
		"GET " + Prefix + "assets/console.js":  c.asset,
	}
	return c, nil
}

// Routes lists every "METHOD /path" the console answers, sorted.
func (c *Console) Routes() []string {
	all := make([]string, 0, len(c.routes))
	for rt := range c.routes {
		all = append(all, rt)
	}
	sort.Strings(all)
	return all
}

// ServeHTTP answers one of Routes.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h, ok := c.routes[r.Method+" "+r.URL.Path]
	if !ok {
		http.NotFound(w, r)
		return
	}
	// Pages show live data and are never framed by another site.
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
	w.Header().Set("Referrer-Policy", "same-origin")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	h(w, r)
}

// CloseStreams ends every live-update stream and refuses new ones, so a
// graceful shutdown does not wait for browsers.
func (c *Console) CloseStreams() {
	c.closeOnce.Do(func() { close(c.closing) })
}

func (c *Console) asset(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-cache")
	c.assets.ServeHTTP(w, r)
}
