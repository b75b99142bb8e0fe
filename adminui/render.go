package adminui

import (
	"bytes"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/holdfast/holdfast"
)

// pageNames are the templates/NAME.html files, each rendered inside
// templates/layout.html.
var pageNames = []string{"signin", "error", "locks", "lock", "sessions", "audit", "release"}

func parsePages() (map[string]*template.Template, error) {
	funcs := template.FuncMap{
		// args passes several values to a shared template.
		"args": func(pairs ...any) (map[string]any, error) {
			m := make(map[string]any, len(pairs)/2)
			for i := 0; i+1 < len(pairs); i += 2 {
				k, ok := pairs[i].(string)
				if !ok {
					return nil, fmt.Errorf("args: key %v is not a string", pairs[i])
				}
				m[k] = pairs[i+1]
			}
			return m, nil
		},
		"count": formatCount,
	}
	pages := make(map[string]*template.Template, len(pageNames))
	for _, name := range pageNames {
		t, err := template.New(name).Funcs(funcs).ParseFS(templateFS,
			"templates/layout.html", "templates/parts.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("adminui: template %s: %w", name, err)
		}
		pages[name] = t
	}
	return pages, nil
}

// frame is what the layout needs around every page.
type frame struct {
	Title      string
	Nav        string // the highlighted section: locks, sessions or audit
	SignedIn   bool
	Actor      string
	Access     string
	CanRelease bool
	Anonymous  bool
	CSRF       string
	Flash      *flash
	Data       any
}

// frameFor fills the layout's fields; a fragment leaves the one-time
// message for the next full page.
func (c *Console) frameFor(r *http.Request, title, nav string, data any, fragment bool) frame {
	f := frame{Title: title, Nav: nav, Anonymous: c.cfg.Anonymous, Data: data}
	if s := sessionOf(r.Context()); s != nil {
		f.SignedIn = true
		f.Actor = s.actor
		f.Access = s.access.String()
		f.CanRelease = s.access == FullAccess
		f.CSRF = s.csrf
		if !fragment {
			f.Flash = s.takeFlash()
		}
	}
	return f
}

// render writes page name with the layout around it; with block set, only
// that template (a fragment for live updates).
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, block *string, data any) {
	titles := map[string]string{
		"signin": "Sign in", "error": "Refused", "locks": "Locks", "lock": "Lock",
		"sessions": "Sessions", "audit": "Audit log", "release": "Force release",
	}
	nav := name
	if name == "lock" || name == "release" {
		nav = "locks"
	}
	f := c.frameFor(r, titles[name], nav, data, block != nil)
	if t, ok := data.(titled); ok {
		f.Title = t.title()
	}
	var buf bytes.Buffer
	tmpl := "layout"
	if block != nil {
		tmpl = *block
	}
	if err := c.pages[name].ExecuteTemplate(&buf, tmpl, f); err != nil {
		c.log.ErrorContext(r.Context(), "console page failed", "page", name, "error", err)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// titled is a view that names its page.
type titled interface{ title() string }

type errorView struct {
	Heading string
	Message string
}

func (v errorView) title() string { return v.Heading }

// fail shows a refusal or failure as a page.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	heading := "Refused"
	if status >= 500 {
		heading = "Something went wrong"
	}
	c.render(w, r, status, "error", nil, errorView{Heading: heading, Message: msg})
}

// failErr shows an error from the Manager.
func (c *Console) failErr(w http.ResponseWriter, r *http.Request, err error) {
	status := http.StatusInternalServerError
	msg := "The lock manager failed: " + err.Error()
	switch {
	case errors.Is(err, holdfast.ErrInvalid):
		status, msg = http.StatusBadRequest, err.Error()
	case errors.Is(err, holdfast.ErrUnavailable):
		status, msg = http.StatusServiceUnavailable, "The lock store cannot be reached right now; try again in a moment."
	default:
		c.log.ErrorContext(r.Context(), "console request failed", "path", r.URL.Path, "error", err)
	}
	c.fail(w, r, status, msg)
}

// Times as people read them.

// absTime is an absolute time in UTC, to the second.
func absTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

func isoTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// relTime is "5 min ago" or "in 2 h 3 min" relative to now.
func relTime(t, now time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := t.Sub(now)
	switch {
	case d < 0 && d > -time.Second:
		return "just now"
	case d < 0:
		return span(-d) + " ago"
	default:
		return "in " + span(d)
	}
}

// span is a duration in at most two units: "3 d 4 h", "1 h 48 min", "42 s".
func span(d time.Duration) string {
	d = d.Round(time.Second)
	days := d / (24 * time.Hour)
	hours := (d % (24 * time.Hour)) / time.Hour
	mins := (d % time.Hour) / time.Minute
	secs := (d % time.Minute) / time.Second
	switch {
	case days > 0 && hours > 0:
		return fmt.Sprintf("%d d %d h", days, hours)
	case days > 0:
		return fmt.Sprintf("%d d", days)
	case hours > 0 && mins > 0:
		return fmt.Sprintf("%d h %d min", hours, mins)
	case hours > 0:
		return fmt.Sprintf("%d h", hours)
	case mins > 0:
		return fmt.Sprintf("%d min", mins)
	default:
		return fmt.Sprintf("%d s", secs)
	}
}

// shortID shortens a session id for a table; the full id is its title.
func shortID(id string) string {
	const keep = 10
	if len(id) <= keep+2 {
		return id
	}
	return id[:keep] + "…"
}

// holderName is how a lock's owner is shown to people.
func holderName(o holdfast.Owner) string {
	switch {
	case o.Name != "":
		return o.Name
	case o.User != "":
		return o.User
	default:
		return "session " + shortID(o.Session)
	}
}

// localPath accepts a return address only when it stays on this console.
func localPath(s, fallback string) string {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil ||
		!strings.HasPrefix(u.Path, "/") || strings.HasPrefix(s, "//") || strings.ContainsAny(s, "\\\r\n") {
		return fallback
	}
	return u.RequestURI()
}
