package adminui

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/holdfast/holdfast"
)

type sessionRow struct {
	holdfast.SessionInfo
	ShortID     string
	LastSeenRel string
	LastSeenAbs string
	LastSeenISO string
	Idle        string
	ExpiresRel  string
	ExpiresAbs  string
	LocksHref   string
}

type sessionsView struct {
	User      string
	Rows      []sessionRow
	NextHref  string
	FirstHref string
	Return    string // this page, for release forms to come back to
	Error     string
}

func (c *Console) sessionsPage(w http.ResponseWriter, r *http.Request) {
	qs := r.URL.Query()
	user := strings.TrimSpace(qs.Get("user"))
	after := qs.Get("after")
	v := sessionsView{User: user}
	page, err := c.mgr.Sessions(r.Context(), holdfast.SessionQuery{User: user, After: after, Limit: c.cfg.PageSize})
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	now := c.cfg.Now()
	back := Prefix + "sessions"
	if user != "" {
		back += "?user=" + url.QueryEscape(user)
	}
	for _, s := range page.Sessions {
		row := sessionRow{
			SessionInfo: s,
			ShortID:     shortID(s.ID),
			LastSeenRel: relTime(time.Time(s.LastSeen), now),
			LastSeenAbs: absTime(time.Time(s.LastSeen)),
			LastSeenISO: isoTime(time.Time(s.LastSeen)),
			LocksHref:   "/?session=" + url.QueryEscape(s.ID),
		}
		if s.IdleTimeout > 0 {
			row.Idle = span(time.Duration(s.IdleTimeout))
		}
		if s.ExpiresAt != nil {
			row.ExpiresRel = relTime(time.Time(*s.ExpiresAt), now)
			row.ExpiresAbs = absTime(time.Time(*s.ExpiresAt))
		}
		v.Rows = append(v.Rows, row)
	}
	if page.Next != nil {
		v.NextHref = Prefix + "sessions?" + url.Values{"user": {user}, "after": {*page.Next}}.Encode()
	}
	v.Return = back
	if after != "" {
		v.FirstHref = back
	}
	c.render(w, r, http.StatusOK, "sessions", nil, v)
}
