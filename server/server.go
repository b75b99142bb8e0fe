// Package server is the HTTP API of holdfast: an http.Handler over a
// *holdfast.Manager that speaks the wire contract of API.md, with bearer
// token roles, server-sent events, health, metrics, an OpenAPI document
// and, at / and under /console/, the admin console of package adminui.
package server

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/adminui"
)

// Defaults of Config.
const (
	DefaultMaxBodyBytes      = 1 << 20
	DefaultEventPing         = 15 * time.Second
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultReadTimeout       = 30 * time.Second
	DefaultWriteTimeout      = 30 * time.Second
	DefaultIdleTimeout       = 2 * time.Minute
	DefaultMaxHeaderBytes    = 64 << 10
)

// Config configures a Server.
type Config struct {
	// Manager answers every request. Required.
	Manager *holdfast.Manager
	// Tokens are the accepted bearer tokens.
	Tokens []Token
	// Anonymous lets requests without a token in with every right when no
	// Tokens are set. Only for a server that listens on loopback; the
	// caller checks that.
	Anonymous bool
	// Metrics receives request and operation metrics; pass the same value
	// as holdfast.Config.Observer to count lock outcomes. Default: a new
	// Metrics that only counts requests. New gives it the Manager, whose
	// store it pings at each scrape: one Metrics serves one Server.
	Metrics *Metrics
	// MaxBodyBytes limits request bodies; default 1 MiB.
	MaxBodyBytes int64
	// EventPing is how often an idle event stream gets a comment, so
	// proxies keep it open; default 15s.
	EventPing time.Duration
	// Logger receives one line per request; default slog.Default().
	Logger *slog.Logger
	// Timeouts of the http.Server made by HTTPServer; zero means default.
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration // event streams are exempt
	IdleTimeout       time.Duration
	MaxHeaderBytes    int
}

// Validate fills defaults and reports the first problem.
func (c *Config) Validate() error {
	if c.Manager == nil {
		return errors.New("server: a Manager is required")
	}
	for i, t := range c.Tokens {
		if t.Role < Reader || t.Role > Admin || t.Secret == "" {
			return errors.New("server: every token needs a role and a secret")
		}
		if strings.TrimSpace(t.Secret) != t.Secret {
			// A request's token is read trimmed: this one would never match.
			return fmt.Errorf("server: token %d starts or ends with a space", i+1)
		}
		for j, u := range c.Tokens[:i] {
			if u.Secret == t.Secret && u.Role != t.Role {
				return fmt.Errorf("server: tokens %d and %d are the same secret with two roles (%s and %s): a token must grant one role", j+1, i+1, u.Role, t.Role)
			}
		}
	}
	if c.MaxBodyBytes < 0 || c.EventPing < 0 {
		return errors.New("server: limits must not be negative")
	}
	if c.Metrics == nil {
		c.Metrics = NewMetrics()
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.EventPing == 0 {
		c.EventPing = DefaultEventPing
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	setDefault(&c.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	setDefault(&c.ReadTimeout, DefaultReadTimeout)
	setDefault(&c.WriteTimeout, DefaultWriteTimeout)
	setDefault(&c.IdleTimeout, DefaultIdleTimeout)
	setDefault(&c.MaxHeaderBytes, DefaultMaxHeaderBytes)
	return nil
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// Server is the http.Handler of the API.
type Server struct {
	cfg     Config
	mgr     *holdfast.Manager
	auth    *authenticator
	metrics *Metrics
	log     *slog.Logger

	routes  map[string]map[string]*route // path → method → route
	console *adminui.Console
	ops     map[string]decodeFunc // batchable operations by name

	// closing is closed when the http.Server shuts down, so that event
	// streams end and Shutdown does not wait for them forever.
	closing   chan struct{}
	closeOnce sync.Once
}

// route is one endpoint. Exactly one of op, query and raw is set.
type route struct {
	method string
	path   string
	role   Role
	op     opFunc
	query  queryFunc
	raw    http.HandlerFunc
	quiet  bool // logged at debug level: probes and scrapes
	// console marks a page of the admin console: HTML for browsers that
	// authenticates by its own sign-in cookie. Only its entry point, GET /,
	// is part of API.md and the OpenAPI document.
	console bool
}

// New returns a Server for cfg.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{
		cfg:     cfg,
		mgr:     cfg.Manager,
		auth:    newAuthenticator(cfg.Tokens, cfg.Anonymous),
		metrics: cfg.Metrics,
		log:     cfg.Logger,
		closing: make(chan struct{}),
	}
	console, err := adminui.New(adminui.Config{
		Manager:      cfg.Manager,
		Authenticate: s.auth.consoleAccess,
		Anonymous:    s.auth.anonymous,
		EventPing:    cfg.EventPing,
		Logger:       cfg.Logger,
	})
	if err != nil {
		return nil, err
	}
	s.console = console
	s.ops = map[string]decodeFunc{
		"acquire":     s.decodeAcquire,
		"release":     s.decodeRelease,
		"renew":       s.decodeRenew,
		"verify":      s.decodeVerify,
		"heartbeat":   s.decodeHeartbeat,
		"end_session": s.decodeEndSession,
	}
	s.routes = make(map[string]map[string]*route)
	routes := []*route{
		{method: "POST", path: "/v1/locks/acquire", role: Client, op: decoded(s.decodeAcquire)},
		{method: "POST", path: "/v1/locks/release", role: Client, op: decoded(s.decodeRelease)},
		{method: "POST", path: "/v1/locks/renew", role: Client, op: decoded(s.decodeRenew)},
		{method: "POST", path: "/v1/locks/verify", role: Client, op: decoded(s.decodeVerify)},
		{method: "GET", path: "/v1/locks", role: Reader, query: s.listLocks},
		{method: "POST", path: "/v1/sessions/heartbeat", role: Client, op: decoded(s.decodeHeartbeat)},
		{method: "POST", path: "/v1/sessions/end", role: Client, op: decoded(s.decodeEndSession)},
		{method: "GET", path: "/v1/sessions", role: Reader, query: s.listSessions},
		{method: "POST", path: "/v1/aggregates", role: Client, op: s.setAggregate},
		{method: "GET", path: "/v1/aggregates", role: Reader, query: s.listAggregates},
		{method: "POST", path: "/v1/aggregates/remove", role: Client, op: s.removeAggregate},
		{method: "POST", path: "/v1/batch", role: Client, op: s.batch},
		{method: "POST", path: "/v1/admin/force-release", role: Admin, op: s.forceRelease},
		{method: "GET", path: "/v1/admin/audit", role: Admin, query: s.audit},
		{method: "GET", path: "/v1/events", role: Reader, raw: s.events},
		{method: "GET", path: "/healthz", role: public, raw: s.healthz, quiet: true},
		{method: "GET", path: "/readyz", role: public, raw: s.readyz, quiet: true},
		{method: "GET", path: "/metrics", role: Reader, raw: s.metrics.serveHTTP, quiet: true},
		{method: "GET", path: "/openapi.json", role: public, raw: serveOpenAPI},
	}
	for _, page := range console.Routes() {
		method, path, _ := strings.Cut(page, " ")
		routes = append(routes, &route{method: method, path: path, role: public, raw: console.ServeHTTP, console: true})
	}
	for _, rt := range routes {
		if s.routes[rt.path] == nil {
			s.routes[rt.path] = make(map[string]*route)
		}
		s.routes[rt.path][rt.method] = rt
	}
	cfg.Metrics.storeUp.watch(cfg.Manager.Ping)
	return s, nil
}

// Routes lists every "METHOD /path" the server answers, sorted.
func (s *Server) Routes() []string {
	var all []string
	for path, methods := range s.routes {
		for method := range methods {
			all = append(all, method+" "+path)
		}
	}
	sort.Strings(all)
	return all
}

// ServeHTTP routes, authorizes, answers, logs and counts one request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := &recorder{ResponseWriter: w, status: http.StatusOK}
	rt, err := s.match(r)
	name := "unmatched"
	if rt != nil {
		name = rt.path
		err = s.auth.authorize(r, rt.role)
	} else if _, known := s.routes[r.URL.Path]; known {
		name = r.URL.Path // a known path, the wrong method
	}
	gone := false
	if err != nil {
		writeError(rec, err)
		if r.ContentLength != 0 {
			// Refused before its body was read: net/http would read the
			// rest of it to reuse the connection, waiting, up to the read
			// timeout, for a client that may never send it, and hold a
			// graceful shutdown as long. End the reading now instead; the
			// connection closes after the answer.
			_ = http.NewResponseController(rec).SetReadDeadline(time.Now())
		}
	} else {
		gone, err = s.serve(rec, r, rt)
	}

	d := time.Since(start)
	status := rec.status
	if gone {
		status = statusClientClosed
	}
	s.metrics.observeRequest(name, r.Method, status, d)
	level := slog.LevelInfo
	if rt != nil && rt.quiet && status < 400 {
		level = slog.LevelDebug
	}
	attrs := []slog.Attr{
		slog.String("method", r.Method),
		slog.String("route", name),
		slog.String("path", r.URL.Path),
		slog.Int("status", status),
		slog.Duration("duration", d),
		slog.String("remote", r.RemoteAddr),
	}
	if status == http.StatusServiceUnavailable {
		// The operator's first question about a 503: what the store said
		// (unreachable, out of time, a full disk).
		level = slog.LevelWarn
		if err == nil {
			err = rec.err // a route that answers by itself (/readyz, /v1/events)
		}
		if err != nil {
			attrs = append(attrs, slog.String("error", err.Error()))
		}
	}
	s.log.LogAttrs(r.Context(), level, "request", attrs...)
}

// match finds the route of r: 404 for an unknown path, 405 with Allow for
// a known path and another method.
func (s *Server) match(r *http.Request) (*route, error) {
	methods, ok := s.routes[r.URL.Path]
	if !ok {
		return nil, &statusError{sentinel: holdfast.ErrNotFound, msg: fmt.Sprintf("no route %s", r.URL.Path)}
	}
	if rt, ok := methods[r.Method]; ok {
		return rt, nil
	}
	return nil, methodNotAllowed(methods)
}

// serve answers r on rt, and returns the error it answered, if any. It
// reports whether the request failed only because its client went away
// first: the answer is written all the same (a client that closed only
// its sending side still reads it), but the logs and metrics count it as
// statusClientClosed, not as the 503 of an unavailable store.
func (s *Server) serve(w http.ResponseWriter, r *http.Request, rt *route) (clientGone bool, err error) {
	var res any
	switch {
	case rt.raw != nil:
		rt.raw(w, r)
		return false, nil
	case rt.query != nil:
		res, err = rt.query(r.Context(), r.URL.RawQuery)
	default:
		var body []byte
		if body, err = readBody(w, r, s.cfg.MaxBodyBytes); err == nil {
			res, err = rt.op(r.Context(), body)
		}
	}
	if err != nil {
		if status, _ := classify(err); status == http.StatusInternalServerError {
			s.log.ErrorContext(r.Context(), "request failed", slog.String("route", rt.path), slog.Any("error", err))
		}
		writeError(w, err)
		return callerGone(err) && r.Context().Err() != nil, err
	}
	writeJSON(w, http.StatusOK, res)
	return false, nil
}

// statusClientClosed is what the logs and metrics count for a request
// that failed because its client went away first: 499, nginx's "client
// closed request". No client is sent it.
const statusClientClosed = 499

// HTTPServer returns an http.Server for s with its timeouts and limits.
// Its Shutdown also ends the event streams, which would otherwise never
// become idle.
func (s *Server) HTTPServer() *http.Server {
	hs := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		ReadTimeout:       s.cfg.ReadTimeout,
		WriteTimeout:      s.cfg.WriteTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		MaxHeaderBytes:    s.cfg.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	hs.RegisterOnShutdown(s.CloseStreams)
	return hs
}

// CloseStreams ends every open event stream and refuses new ones; clients
// reconnect elsewhere with Last-Event-ID.
func (s *Server) CloseStreams() {
	s.closeOnce.Do(func() { close(s.closing) })
	s.console.CloseStreams()
}

// methodNotAllowedError is a 405, which API.md's table leaves to HTTP.
type methodNotAllowedError struct{ allow string }

func (e *methodNotAllowedError) Error() string { return "method not allowed; allowed: " + e.allow }

func methodNotAllowed(methods map[string]*route) error {
	var allow []string
	for m := range methods {
		allow = append(allow, m)
	}
	sort.Strings(allow)
	return &methodNotAllowedError{allow: strings.Join(allow, ", ")}
}

// recorder remembers the status for logs and metrics.
type recorder struct {
	http.ResponseWriter
	status  int
	written bool
	err     error // what writeError answered, for the request log
}

func (r *recorder) WriteHeader(status int) {
	if !r.written {
		r.status, r.written = status, true
	}
	r.ResponseWriter.WriteHeader(status)
}

func (r *recorder) Write(b []byte) (int, error) {
	r.written = true
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach Flush and deadlines.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
