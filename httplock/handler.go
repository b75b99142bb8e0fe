package httplock

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
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
//
// Both POSTs need the page's token (PageField and TokenField as a form, a
// text/plain beacon body, or the headers).
func (m *Middleware) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+m.cfg.Prefix+ScriptName, serveScript)
	mux.HandleFunc("POST "+m.cfg.Prefix+"heartbeat", m.heartbeat)
	mux.HandleFunc("POST "+m.cfg.Prefix+"release", m.release)
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
		`></script>`)
}
