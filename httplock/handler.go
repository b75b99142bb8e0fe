package httplock

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/implicit"
)

//go:embed holdfast-edit.js
var script []byte

// ScriptName is the file name Handler serves the browser script under.
const ScriptName = "holdfast-edit.js"

// Handler serves, below Prefix, the endpoints of edit pages. Mount it
// behind Wrap:
//
//	GET  holdfast-edit.js  the script
//	POST heartbeat         keeps the page's session alive and reports its lock
//	POST release           ends the page's session (the beacon on leaving)
//	GET  holders?key=K     the locks that stand in the way of editing K
//
// Both POSTs need the page's token (PageField and TokenField as a form, a
// text/plain beacon body, or the headers); holders needs a signed-in
// person.
func (m *Middleware) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+m.cfg.Prefix+ScriptName, serveScript)
	mux.HandleFunc("POST "+m.cfg.Prefix+"heartbeat", m.heartbeat)
	mux.HandleFunc("POST "+m.cfg.Prefix+"release", m.release)
	mux.HandleFunc("GET "+m.cfg.Prefix+"holders", m.holders)
	return mux
}

var scriptModTime = time.Now()

func serveScript(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	http.ServeContent(w, r, ScriptName, scriptModTime, strings.NewReader(string(script)))
}

// Status is the answer of the heartbeat endpoint.
type Status struct {
	Held      bool           `json:"held"`
	ExpiresAt *holdfast.Time `json:"expires_at,omitempty"`
	// ExpiresIn is how many seconds the lock has left, by the lock
	// service's clock, whatever the browser's says.
	ExpiresIn int64 `json:"expires_in,omitempty"`
	// Reason, Actor, ForceReason and Message say why the lock is gone.
	Reason      string `json:"reason,omitempty"`
	Actor       string `json:"actor,omitempty"`
	ForceReason string `json:"force_reason,omitempty"`
	Message     string `json:"message,omitempty"`
}

// pageOwner returns the page session of a request, or writes the refusal.
func pageOwner(w http.ResponseWriter, r *http.Request) (holdfast.Owner, bool) {
	o, signedIn := implicit.OwnerFrom(r.Context())
	_, onPage := PageFrom(r.Context())
	if !signedIn || !onPage {
		writeJSON(w, http.StatusForbidden, Status{Reason: "signed_out",
			Message: "You are no longer signed in, so this page cannot keep its edit lock."})
		return o, false
	}
	return o, true
}

func (m *Middleware) heartbeat(w http.ResponseWriter, r *http.Request) {
	o, ok := pageOwner(w, r)
	if !ok {
		return
	}
	ctx := r.Context()
	hb, err := m.svc.Heartbeat(ctx, holdfast.HeartbeatRequest{Session: o.Session, IdleTimeout: holdfast.Duration(m.cfg.IdleTimeout)})
	if err != nil {
		m.writeLoss(w, err)
		return
	}
	token, _ := strconv.ParseUint(r.PostFormValue("lock_token"), 10, 64)
	st := Status{Held: true}
	for _, key := range r.PostForm["key"] {
		res, err := m.svc.Verify(ctx, holdfast.VerifyRequest{Key: key, Session: o.Session, Token: token})
		if err != nil {
			m.writeLoss(w, err)
			return
		}
		exp := holdfast.Time(res.Lock.ExpiresAt)
		if st.ExpiresAt == nil || res.Lock.ExpiresAt.Before(time.Time(*st.ExpiresAt)) {
			st.ExpiresAt = &exp
		}
	}
	if st.ExpiresAt != nil {
		// The heartbeat's last_seen is the service's now.
		st.ExpiresIn = max(1, int64(time.Time(*st.ExpiresAt).Sub(time.Time(hb.Session.LastSeen)).Seconds()))
	}
	writeJSON(w, http.StatusOK, st)
}

// writeLoss answers a heartbeat whose session or lock is gone, or whose
// check failed.
func (m *Middleware) writeLoss(w http.ResponseWriter, err error) {
	var (
		lost  *holdfast.LockLostError
		stale *holdfast.StaleTokenError
	)
	switch {
	case errors.As(err, &lost):
		writeJSON(w, http.StatusOK, Status{Reason: string(lost.Reason), Actor: lost.Actor,
			ForceReason: lost.ForceReason, Message: lost.Message})
	case errors.As(err, &stale):
		writeJSON(w, http.StatusOK, Status{Reason: "stale_token", Message: stale.Message})
	case errors.Is(err, holdfast.ErrUnavailable):
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, Status{Held: true, Message: "The lock service cannot be reached right now."})
	default:
		m.log.Warn("holdfast page heartbeat failed", "error", err)
		writeJSON(w, http.StatusInternalServerError, Status{Held: true, Message: "The lock could not be checked."})
	}
}

func (m *Middleware) release(w http.ResponseWriter, r *http.Request) {
	o, ok := pageOwner(w, r)
	if !ok {
		return
	}
	if _, err := m.svc.EndSession(r.Context(), holdfast.EndSessionRequest{Session: o.Session}); err != nil {
		http.Error(w, "release failed", http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// Holder is one lock in the answer of the holders endpoint: what a
// read-only page needs to tell whether the record is still held, and by
// whom.
type Holder struct {
	Key        string        `json:"key"`
	Token      uint64        `json:"token,string"`
	Name       string        `json:"name"`
	Mine       bool          `json:"mine"`
	AcquiredAt holdfast.Time `json:"acquired_at"`
	ExpiresAt  holdfast.Time `json:"expires_at"`
}

// Holders is the answer of the holders endpoint.
type Holders struct {
	Locks []Holder `json:"locks"`
	// More says there are more locks than Locks lists (many below the
	// key): the page cannot tell from Locks that one of its own is gone.
	More bool `json:"more,omitempty"`
}

// maxWatchedLocks bounds the answer for a key with many locks below it: a
// page needs to know that it is held and by whom, not every lock.
const maxWatchedLocks = 100

// holders answers a read-only page's script with the locks that stand in
// the way of editing a key: on it, above it and below it. It does not
// keep the person's session alive: a page left open to watch a record is
// not activity.
func (m *Middleware) holders(w http.ResponseWriter, r *http.Request) {
	o, signedIn := implicit.OwnerFrom(r.Context())
	if !signedIn {
		writeJSON(w, http.StatusForbidden, Status{Reason: "signed_out",
			Message: "You are no longer signed in, so this page cannot show who is editing."})
		return
	}
	key := r.URL.Query().Get("key")
	if key == "" {
		// No key would list every lock.
		writeJSON(w, http.StatusBadRequest, Status{Message: "key: a key is required"})
		return
	}
	page, err := m.svc.Locks(r.Context(), holdfast.LockQuery{Key: key, Limit: maxWatchedLocks})
	switch {
	case errors.Is(err, holdfast.ErrInvalid):
		writeJSON(w, http.StatusBadRequest, Status{Message: err.Error()})
		return
	case errors.Is(err, holdfast.ErrUnavailable):
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, Status{Message: "The lock service cannot be reached right now."})
		return
	case err != nil:
		m.log.Warn("holdfast holders failed", "error", err)
		writeJSON(w, http.StatusInternalServerError, Status{Message: "The locks could not be read."})
		return
	}
	hs := Holders{Locks: make([]Holder, 0, len(page.Locks)), More: page.Next != nil}
	for _, l := range page.Locks {
		hs.Locks = append(hs.Locks, Holder{Key: l.Key, Token: l.Token, Name: l.Owner.Name,
			Mine: o.User != "" && l.Owner.User == o.User, AcquiredAt: holdfast.Time(l.AcquiredAt), ExpiresAt: holdfast.Time(l.ExpiresAt)})
	}
	writeJSON(w, http.StatusOK, hs)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// Fields returns the hidden inputs that make a form's POST come from p.
func (p Page) Fields() template.HTML {
	return template.HTML(fmt.Sprintf(`<input type="hidden" name="%s" value="%s"><input type="hidden" name="%s" value="%s">`,
		PageField, template.HTMLEscapeString(p.ID), TokenField, template.HTMLEscapeString(p.Token)))
}

// ResumeScriptTag returns the script element of a page refused because l,
// held by the person's own other edit page, stands in the way. Should that
// page have been this browser tab's own (the edit page was reloaded, or
// left and opened again, before its release reached the server), the
// script takes over at once: it submits the page's take-over form, which
// must carry the attribute data-holdfast-takeover. Otherwise the person
// chooses, as before. It returns "" for a lock held by no edit page.
func (m *Middleware) ResumeScriptTag(l holdfast.Lock) template.HTML {
	_, pageID, ok := strings.Cut(l.Owner.Session, "/")
	if !ok || pageID == "" {
		return ""
	}
	return template.HTML(`<script src="` + template.HTMLEscapeString(m.cfg.Prefix+ScriptName) + `" defer` +
		` data-key="` + template.HTMLEscapeString(l.Key) + `" data-holder-page="` + template.HTMLEscapeString(pageID) +
		`"></script>`)
}

// WatchScriptTag returns the script element of a read-only page shown
// because held, the locks on key, above it or below it, stand in the way
// of editing it (as LockQuery{Key: key} lists them). While the page is
// open the script asks who holds key, and when none of held does any
// more it says so: the record is free to edit, or someone else now holds
// it. It shows the page's elements marked data-holdfast-when-free (an
// Edit button, say) once nobody holds key, and hides those marked
// data-holdfast-while-held (what says who held it) once they are out of
// date. It returns "" when held is empty.
func (m *Middleware) WatchScriptTag(key string, held []holdfast.Lock) template.HTML {
	if len(held) == 0 {
		return ""
	}
	var locks, names []string
	for _, l := range held {
		locks = append(locks, l.Key+"@"+strconv.FormatUint(l.Token, 10))
		if !slices.Contains(names, l.Owner.Name) {
			names = append(names, l.Owner.Name)
		}
	}
	attr := func(name, v string) string {
		return fmt.Sprintf(` data-%s="%s"`, name, template.HTMLEscapeString(v))
	}
	namesJSON, _ := json.Marshal(names)
	return template.HTML(`<script src="` + template.HTMLEscapeString(m.cfg.Prefix+ScriptName) + `" defer` +
		attr("prefix", m.cfg.Prefix) + attr("watch", key) + attr("locks", strings.Join(locks, " ")) +
		attr("names", string(namesJSON)) +
		attr("heartbeat", strconv.FormatInt(m.cfg.PageHeartbeat.Milliseconds(), 10)) +
		attr("hidden-heartbeat", strconv.FormatInt(m.cfg.HiddenPageHeartbeat.Milliseconds(), 10)) +
		`></script>`)
}

// ScriptTag returns the script element of an edit page p that holds l.
func (m *Middleware) ScriptTag(p Page, l holdfast.Lock) template.HTML {
	attr := func(name, v string) string {
		return fmt.Sprintf(` data-%s="%s"`, name, template.HTMLEscapeString(v))
	}
	return template.HTML(`<script src="` + template.HTMLEscapeString(m.cfg.Prefix+ScriptName) + `" defer` +
		attr("prefix", m.cfg.Prefix) + attr("page", p.ID) + attr("token", p.Token) +
		attr("key", l.Key) + attr("lock-token", strconv.FormatUint(l.Token, 10)) +
		attr("heartbeat", strconv.FormatInt(m.cfg.PageHeartbeat.Milliseconds(), 10)) +
		attr("hidden-heartbeat", strconv.FormatInt(m.cfg.HiddenPageHeartbeat.Milliseconds(), 10)) +
		attr("release-inactive", strconv.FormatInt(max(0, m.cfg.ReleaseInactivePageAfter.Milliseconds()), 10)) +
		`></script>`)
}
