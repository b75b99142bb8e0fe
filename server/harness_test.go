package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/logstore"
	"github.com/holdfast/holdfast/memstore"
	"github.com/holdfast/holdfast/server"
	"github.com/holdfast/holdfast/store"
)

// Tokens the harness configures unless told otherwise.
const (
	readerToken = "reader-secret"
	clientToken = "client-secret"
	adminToken  = "admin-secret"
)

// clock is the store's clock, moved by tests instead of sleeping.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

type options struct {
	tokens       []server.Token
	anonymous    bool
	maxBodyBytes int64
	eventPing    time.Duration
	types        map[string]holdfast.TypePolicy
	// timeouts for the http.Server, to check event streams outlive them
	readTimeout, writeTimeout time.Duration
	// tinySocketBuffers makes a client that stops reading block the
	// server's writes quickly.
	tinySocketBuffers bool
	// logStore puts the Manager on the embedded log store, whose commits
	// many requests share, instead of memstore.
	logStore bool
	// stall holds every write transaction of the store until it is closed
	// or the transaction's context ends; failWrites fails them all.
	stall      chan struct{}
	failWrites error
	// loseAnswers, while true, fails every write transaction after it
	// committed, as a store whose answer was lost does.
	loseAnswers *atomic.Bool
}

// faultyStore holds its write transactions until stall is closed, or
// fails them with fail.
type faultyStore struct {
	store.Store
	stall chan struct{}
	fail  error
	lose  *atomic.Bool
}

// Ping fails as writes do: the store is down.
func (s faultyStore) Ping(ctx context.Context) error {
	if s.fail != nil {
		return s.fail
	}
	return s.Store.Ping(ctx)
}

func (s faultyStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	if s.fail != nil {
		return s.fail
	}
	if s.lose != nil {
		if err := s.Store.Update(ctx, fn); err != nil || !s.lose.Load() {
			return err
		}
		return fmt.Errorf("committed, but the answer was lost: %w", store.ErrUnavailable)
	}
	select {
	case <-s.stall:
		return s.Store.Update(ctx, fn)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// harness is a real server over a real Manager and memstore (or logstore).
type harness struct {
	t       testing.TB
	url     string
	srv     *server.Server
	mgr     *holdfast.Manager
	store   store.Store
	clock   *clock
	logs    *syncBuffer
	httpSrv *httptest.Server
	tiny    *tinyBufferListener
}

func defaultTokens() []server.Token {
	return []server.Token{
		{Role: server.Reader, Secret: readerToken},
		{Role: server.Client, Secret: clientToken},
		{Role: server.Admin, Secret: adminToken},
	}
}

func newHarness(t testing.TB, opts options) *harness {
	t.Helper()
	if opts.tokens == nil && !opts.anonymous {
		opts.tokens = defaultTokens()
	}
	clk := &clock{now: time.Date(2026, 11, 30, 10, 47, 0, 0, time.UTC)}
	metrics := server.NewMetrics()
	logs := &syncBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var st store.Store
	if opts.logStore {
		ls, err := logstore.Open(t.TempDir(), logstore.Config{Now: clk.Now, Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		st = ls
	} else {
		st = memstore.New(memstore.Config{Now: clk.Now})
	}
	if opts.stall != nil || opts.failWrites != nil || opts.loseAnswers != nil {
		st = faultyStore{st, opts.stall, opts.failWrites, opts.loseAnswers}
	}
	mgr, err := holdfast.New(st, holdfast.Config{
		Types: opts.types, SweepInterval: -1, Observer: metrics, Logger: log,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{
		Manager: mgr, Tokens: opts.tokens, Anonymous: opts.anonymous, Metrics: metrics,
		MaxBodyBytes: opts.maxBodyBytes, EventPing: opts.eventPing, Logger: log,
		ReadTimeout: opts.readTimeout, WriteTimeout: opts.writeTimeout,
	})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, srv: srv, mgr: mgr, store: st, clock: clk, logs: logs}
	hs := httptest.NewUnstartedServer(srv)
	hs.Config = srv.HTTPServer()
	if opts.tinySocketBuffers {
		tiny := &tinyBufferListener{Listener: hs.Listener}
		hs.Listener = tiny
		h.tiny = tiny
	}
	hs.Start()
	t.Cleanup(func() {
		srv.CloseStreams()
		hs.Close()
		mgr.Close()
		st.Close()
	})
	h.url, h.httpSrv = hs.URL, hs
	return h
}

// response is an answer with its body decoded loosely, to check the wire
// shape field by field.
type response struct {
	status int
	header http.Header
	raw    []byte
	body   map[string]any
}

// call sends a request with token ("" for none) and body (a string is sent
// as is, anything else as JSON).
func (h *harness) call(method, path, token string, body any) response {
	h.t.Helper()
	var rd io.Reader
	if body != nil {
		if s, ok := body.(string); ok {
			rd = strings.NewReader(s)
		} else {
			b, err := json.Marshal(body)
			if err != nil {
				h.t.Fatal(err)
			}
			rd = bytes.NewReader(b)
		}
	}
	req, err := http.NewRequestWithContext(context.Background(), method, h.url+path, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	r := response{status: res.StatusCode, header: res.Header, raw: raw}
	if strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(raw, &r.body); err != nil {
			h.t.Fatalf("%s %s: answer is not a JSON object: %v\n%s", method, path, err, raw)
		}
	}
	return r
}

// post sends body with the client token and wants status.
func (h *harness) post(path string, body any, status int) map[string]any {
	h.t.Helper()
	return h.want(h.call("POST", path, clientToken, body), status)
}

// get reads path with the admin token and wants status.
func (h *harness) get(path string, status int) map[string]any {
	h.t.Helper()
	return h.want(h.call("GET", path, adminToken, nil), status)
}

func (h *harness) want(r response, status int) map[string]any {
	h.t.Helper()
	if r.status != status {
		h.t.Fatalf("status %d, want %d: %s", r.status, status, r.raw)
	}
	return r.body
}

// wantError checks an error answer's status, code and, when given, field.
func wantError(t *testing.T, r response, status int, code, field string) map[string]any {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.raw)
	}
	e, ok := r.body["error"].(map[string]any)
	if !ok {
		t.Fatalf("no error object: %s", r.raw)
	}
	if e["code"] != code {
		t.Fatalf("code %v, want %s: %s", e["code"], code, r.raw)
	}
	if msg, _ := e["message"].(string); msg == "" {
		t.Fatalf("error without message: %s", r.raw)
	}
	if field != "" && e["field"] != field {
		t.Fatalf("field %v, want %s: %s", e["field"], field, r.raw)
	}
	return e
}

// acquireBody is a typical acquire request.
func acquireBody(session string, keys ...string) map[string]any {
	return map[string]any{
		"keys":  keys,
		"owner": map[string]any{"session": session, "user": "u-" + session, "name": "User " + session},
	}
}

// at returns the value at a path of map keys and list indexes.
func at(t *testing.T, v any, path ...any) any {
	t.Helper()
	for _, p := range path {
		switch p := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("at %v: not an object: %v", p, v)
			}
			if v, ok = m[p]; !ok {
				t.Fatalf("no field %q in %v", p, m)
			}
		case int:
			l, ok := v.([]any)
			if !ok || p >= len(l) {
				t.Fatalf("at [%d]: not a list that long: %v", p, v)
			}
			v = l[p]
		}
	}
	return v
}

func list(t *testing.T, v any, path ...any) []any {
	t.Helper()
	l, ok := at(t, v, path...).([]any)
	if !ok {
		t.Fatalf("%v is not a list (null?) in %v", path, v)
	}
	return l
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// tinyBufferListener shrinks the send buffer of every connection it
// accepts until widen is called.
type tinyBufferListener struct {
	net.Listener
	mu    sync.Mutex
	conns []*net.TCPConn
}

func (l *tinyBufferListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetWriteBuffer(1024)
		l.mu.Lock()
		l.conns = append(l.conns, tc)
		l.mu.Unlock()
	}
	return c, err
}

func (l *tinyBufferListener) widen() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		c.SetWriteBuffer(1 << 20)
	}
}
