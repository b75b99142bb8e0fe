package adminui

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// cookieName is the console session's cookie.
const cookieName = "holdfast_console"

// session is one signed-in browser.
type session struct {
	id      string
	csrf    string
	access  Access
	actor   string // recorded as the actor of its releases
	expires time.Time

	mu    sync.Mutex
	flash *flash // shown once, by the next page
}

// flash is a message for the next page, after a redirect.
type flash struct {
	Kind string // "ok" or "error"
	Text string
}

func (s *session) setFlash(kind, text string) {
	s.mu.Lock()
	s.flash = &flash{Kind: kind, Text: text}
	s.mu.Unlock()
}

func (s *session) takeFlash() *flash {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.flash
	s.flash = nil
	return f
}

// sessionStore keeps console sessions in memory: a restart signs everyone
// out, which is acceptable for an admin console.
type sessionStore struct {
	ttl time.Duration
	max int
	now func() time.Time

	mu   sync.Mutex
	byID map[string]*session
}

func newSessionStore(ttl time.Duration, max int, now func() time.Time) *sessionStore {
	return &sessionStore{ttl: ttl, max: max, now: now, byID: make(map[string]*session)}
}

func (st *sessionStore) create(access Access, actor string) *session {
	s := &session{id: randomID(), csrf: randomID(), access: access, actor: actor}
	st.mu.Lock()
	defer st.mu.Unlock()
	now := st.now()
	s.expires = now.Add(st.ttl)
	for id, old := range st.byID {
		if !now.Before(old.expires) {
			delete(st.byID, id)
		}
	}
	for len(st.byID) >= st.max {
		st.evictOldest()
	}
	st.byID[s.id] = s
	return s
}

func (st *sessionStore) evictOldest() {
	var oldest *session
	for _, s := range st.byID {
		if oldest == nil || s.expires.Before(oldest.expires) {
			oldest = s
		}
	}
	delete(st.byID, oldest.id)
}

func (st *sessionStore) get(id string) (*session, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	s, ok := st.byID[id]
	if !ok {
		return nil, false
	}
	if !st.now().Before(s.expires) {
		delete(st.byID, id)
		return nil, false
	}
	return s, true
}

func (st *sessionStore) remove(id string) {
	st.mu.Lock()
	delete(st.byID, id)
	st.mu.Unlock()
}

// randomID is 256 random bits, URL-safe.
func randomID() string {
	b := make([]byte, 32)
	rand.Read(b) // never fails (crypto/rand panics rather than return an error)
	return base64.RawURLEncoding.EncodeToString(b)
}

type sessionKey struct{}

func sessionOf(ctx context.Context) *session {
	s, _ := ctx.Value(sessionKey{}).(*session)
	return s
}

// signedIn runs h with the request's console session. Without one, pages
// go to the sign-in form and scripts get 401; an anonymous console makes
// a session on the spot.
func (c *Console) signedIn(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if c.cfg.Anonymous && !loopbackHost(r.Host) {
			// A web page can make a browser talk to loopback; another host
			// name there means DNS rebinding.
			c.fail(w, r, http.StatusForbidden, "Without tokens the console only answers on a loopback address (127.0.0.1, [::1] or localhost).")
			return
		}
		var s *session
		if ck, err := r.Cookie(cookieName); err == nil {
			s, _ = c.sessions.get(ck.Value)
		}
		if s == nil && c.cfg.Anonymous {
			s = c.sessions.create(FullAccess, "console:local")
			c.setCookie(w, r, s)
		}
		if s == nil {
			if r.URL.Path == Prefix+"locks/rows" || r.URL.Path == Prefix+"events" {
				http.Error(w, "signed out", http.StatusUnauthorized)
				return
			}
			if r.Method == http.MethodPost {
				c.fail(w, r, http.StatusForbidden, "Your console session has ended. Sign in again, then repeat the action.")
				return
			}
			http.Redirect(w, r, Prefix+"signin", http.StatusSeeOther)
			return
		}
		h(w, r.WithContext(context.WithValue(r.Context(), sessionKey{}, s)))
	}
}

// checked refuses a state-changing request that does not come from the
// console's own pages: it must carry the session's CSRF token and come
// from this origin.
func (c *Console) checked(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !sameOrigin(r) {
			c.fail(w, r, http.StatusForbidden, "Refused: this request came from another site.")
			return
		}
		s := sessionOf(r.Context())
		given := r.PostFormValue("csrf")
		if subtle.ConstantTimeCompare([]byte(given), []byte(s.csrf)) != 1 {
			c.fail(w, r, http.StatusForbidden, "Refused: the form was not issued by this console session. Reload the page and try again.")
			return
		}
		h(w, r)
	}
}

// sameOrigin reports whether a browser says r comes from the console's
// own origin. Browsers send Sec-Fetch-Site or Origin with every POST; a
// Referer is the fallback. A request with none of them is refused.
func sameOrigin(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "same-origin":
		return true
	case "":
	default:
		return false
	}
	own := ownOrigin(r)
	if o := r.Header.Get("Origin"); o != "" {
		return o == own
	}
	if ref := r.Header.Get("Referer"); ref != "" {
		u, err := url.Parse(ref)
		return err == nil && u.Scheme+"://"+u.Host == own
	}
	return false
}

// ownOrigin is the origin the request was sent to.
func ownOrigin(r *http.Request) string {
	if r.TLS != nil {
		return "https://" + r.Host
	}
	return "http://" + r.Host
}

func (c *Console) setCookie(w http.ResponseWriter, r *http.Request, s *session) {
	http.SetCookie(w, &http.Cookie{
		Name:     cookieName,
		Value:    s.id,
		Path:     "/",
		Expires:  s.expires,
		HttpOnly: true,
		Secure:   r.TLS != nil,
		SameSite: http.SameSiteStrictMode,
	})
}

func (c *Console) signInPage(w http.ResponseWriter, r *http.Request) {
	if c.cfg.Anonymous {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	c.render(w, r, http.StatusOK, "signin", nil, signInView{})
}

type signInView struct {
	Error string
	Name  string
}

// signIn checks a token and starts a console session. The token comes
// only in the POST body, and is neither kept nor logged.
func (c *Console) signIn(w http.ResponseWriter, r *http.Request) {
	if c.cfg.Anonymous {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	if !sameOrigin(r) {
		c.fail(w, r, http.StatusForbidden, "Refused: this sign-in did not come from the console's own page. Sign in there; a script must send an Origin header naming this server, such as "+ownOrigin(r)+".")
		return
	}
	token := strings.TrimSpace(r.PostFormValue("token"))
	name := strings.TrimSpace(r.PostFormValue("name"))
	if len(name) > 100 {
		name = name[:100]
	}
	access := NoAccess
	if token != "" {
		access = c.cfg.Authenticate(token)
	}
	if access == NoAccess {
		c.log.InfoContext(r.Context(), "console sign-in refused", "remote", r.RemoteAddr)
		c.render(w, r, http.StatusUnauthorized, "signin", nil, signInView{
			Error: "That token is not accepted. Use one of this server's tokens (HOLDFAST_TOKENS): an admin token to force-release, a reader or client token to look.",
			Name:  name,
		})
		return
	}
	actor := "console:" + access.String()
	if name != "" {
		actor = "console:" + name
	}
	s := c.sessions.create(access, actor)
	c.setCookie(w, r, s)
	c.log.InfoContext(r.Context(), "console sign-in", "actor", actor, "access", access.String(), "remote", r.RemoteAddr)
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func (c *Console) signOut(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r.Context())
	c.sessions.remove(s.id)
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode,
	})
	c.log.InfoContext(r.Context(), "console sign-out", "actor", s.actor)
	http.Redirect(w, r, Prefix+"signin", http.StatusSeeOther)
}

// loopbackHost reports whether a Host header names the loopback interface.
func loopbackHost(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = strings.Trim(hostport, "[]")
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
