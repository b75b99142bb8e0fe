package adminui_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/memstore"
	"github.com/holdfast/holdfast/server"
	"github.com/holdfast/holdfast/store"
)

// Tokens the test servers accept unless they run anonymously.
const (
	adminToken  = "console-admin-secret"
	readerToken = "console-reader-secret"
	clientToken = "console-client-secret"
)

type envOptions struct {
	anonymous bool
	tls       bool
	store     store.Store // memstore if nil
}

// env is a real server (server.New over a Manager on memstore) on
// loopback, as holdfast serve runs it.
type env struct {
	t    testing.TB
	url  string
	mgr  *holdfast.Manager
	srv  *server.Server
	hs   *httptest.Server
	logs *syncBuffer
}

func newEnv(t testing.TB, opts envOptions) *env {
	t.Helper()
	st := opts.store
	if st == nil {
		st = memstore.New(memstore.Config{})
	}
	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	mgr, err := holdfast.New(st, holdfast.Config{SweepInterval: -1, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	cfg := server.Config{Manager: mgr, Logger: log, Anonymous: opts.anonymous}
	if !opts.anonymous {
		cfg.Tokens = []server.Token{
			{Role: server.Admin, Secret: adminToken},
			{Role: server.Reader, Secret: readerToken},
			{Role: server.Client, Secret: clientToken},
		}
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewUnstartedServer(srv)
	hs.Config = srv.HTTPServer()
	if opts.tls {
		hs.StartTLS()
	} else {
		hs.Start()
	}
	t.Cleanup(func() {
		srv.CloseStreams()
		hs.Close()
		mgr.Close()
		st.Close()
	})
	return &env{t: t, url: hs.URL, mgr: mgr, srv: srv, hs: hs, logs: logs}
}

// acquire takes locks through the HTTP API, as an application would.
func (e *env) acquire(session, user, name, note string, keys ...string) {
	e.t.Helper()
	body := fmt.Sprintf(`{"keys": [%s], "owner": {"session": %q, "user": %q, "name": %q}, "note": %q}`,
		quoteAll(keys), session, user, name, note)
	req, _ := http.NewRequest("POST", e.url+"/v1/locks/acquire", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+clientToken)
	res, err := e.hs.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		b, _ := io.ReadAll(res.Body)
		e.t.Fatalf("acquire %v: %d %s", keys, res.StatusCode, b)
	}
}

func quoteAll(keys []string) string {
	q := make([]string, len(keys))
	for i, k := range keys {
		q[i] = fmt.Sprintf("%q", k)
	}
	return strings.Join(q, ", ")
}

// held reports whether session holds key, asking the Manager directly.
func (e *env) held(key, session string) bool {
	e.t.Helper()
	page, err := e.mgr.Locks(context.Background(), holdfast.LockQuery{Key: key})
	if err != nil {
		e.t.Fatal(err)
	}
	for _, l := range page.Locks {
		if l.Key == key && l.Owner.Session == session {
			return true
		}
	}
	return false
}

// browser is a plain HTTP client with a cookie jar that does not follow
// redirects, so tests see each answer.
type browser struct {
	t      testing.TB
	e      *env
	client *http.Client
	csrf   string
}

func (e *env) browser() *browser {
	jar, _ := cookiejar.New(nil)
	c := *e.hs.Client() // a copy: the server's client is shared
	c.Jar = jar
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &browser{t: e.t, e: e, client: &c}
}

type page struct {
	status int
	header http.Header
	body   string
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func (b *browser) do(req *http.Request) page {
	b.t.Helper()
	res, err := b.client.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	p := page{status: res.StatusCode, header: res.Header, body: string(raw)}
	if m := csrfField.FindStringSubmatch(p.body); m != nil {
		b.csrf = m[1]
	}
	return p
}

func (b *browser) get(path string) page {
	b.t.Helper()
	req, _ := http.NewRequest("GET", b.e.url+path, nil)
	return b.do(req)
}

// post sends a form as a browser on the console's own page would: with
// the console's Origin. headers override or add headers ("" deletes).
func (b *browser) post(path string, form url.Values, headers ...string) page {
	b.t.Helper()
	req, _ := http.NewRequest("POST", b.e.url+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", b.e.url)
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] == "" {
			req.Header.Del(headers[i])
		} else {
			req.Header.Set(headers[i], headers[i+1])
		}
	}
	return b.do(req)
}

// signIn signs in with token and loads the locks page, for its CSRF token.
func (b *browser) signIn(token, name string) {
	b.t.Helper()
	p := b.post("/console/signin", url.Values{"token": {token}, "name": {name}})
	if p.status != http.StatusSeeOther || p.header.Get("Location") != "/" {
		b.t.Fatalf("sign-in: %d %s", p.status, p.body)
	}
	if p := b.get("/"); p.status != 200 || b.csrf == "" {
		b.t.Fatalf("locks page after sign-in: %d %s", p.status, p.body)
	}
}

// syncBuffer is a log sink that tests read while the server writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}
