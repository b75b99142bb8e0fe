package adminui

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/holdfast/holdfast"
)

// auditEvents are the event filter's options.
var auditEvents = []holdfast.Event{
	holdfast.EventAcquired, holdfast.EventReleased, holdfast.EventRenewed, holdfast.EventExpired,
	holdfast.EventSessionExpired, holdfast.EventForceReleased, holdfast.EventTakenOver,
}

// sinceChoices are the time filter's options.
var sinceChoices = []struct{ Value, Label string }{
	{"1h", "last hour"},
	{"24h", "last 24 hours"},
	{"168h", "last 7 days"},
	{"720h", "last 30 days"},
	{"all", "all time"},
}

type auditRow struct {
	holdfast.AuditEntry
	Holder       string
	ShortSession string
	AtRel        string
	AtAbs        string
	AtISO        string
}

func (c *Console) auditRows(entries []holdfast.AuditEntry) []auditRow {
	now := c.cfg.Now()
	rows := make([]auditRow, 0, len(entries))
	for _, e := range entries {
		at := time.Time(e.At)
		rows = append(rows, auditRow{
			AuditEntry:   e,
			Holder:       holderName(e.Lock.Owner),
			ShortSession: shortID(e.Lock.Owner.Session),
			AtRel:        relTime(at, now),
			AtAbs:        absTime(at),
			AtISO:        isoTime(at),
		})
	}
	return rows
}

// latestAudit returns up to limit entries matching q, newest first, with
// IDs below before (0: no bound). more says older entries match too.
func (c *Console) latestAudit(ctx context.Context, q holdfast.AuditQuery, before uint64, limit int) (entries []holdfast.AuditEntry, more bool, err error) {
	q.Newest, q.Limit = true, limit
	if before != 0 {
		q.After = strconv.FormatUint(before, 10)
	}
	page, err := c.mgr.Audit(ctx, q)
	if err != nil {
		return nil, false, err
	}
	return page.Entries, page.Next != nil, nil
}

type auditFilter struct {
	Key     string
	User    string
	Session string
	Event   string
	Since   string // one of sinceChoices, or an RFC 3339 / datetime-local time
	Before  uint64
}

func (f auditFilter) values(overrides ...string) url.Values {
	v := url.Values{}
	for k, val := range map[string]string{"key": f.Key, "user": f.User, "session": f.Session, "event": f.Event, "since": f.Since} {
		if val != "" {
			v.Set(k, val)
		}
	}
	if f.Before != 0 {
		v.Set("before", strconv.FormatUint(f.Before, 10))
	}
	for i := 0; i+1 < len(overrides); i += 2 {
		if overrides[i+1] == "" {
			v.Del(overrides[i])
		} else {
			v.Set(overrides[i], overrides[i+1])
		}
	}
	return v
}

type auditView struct {
	Filter     auditFilter
	Events     []holdfast.Event
	Sinces     []struct{ Value, Label string }
	CustomTime bool
	SinceAbs   string
	Rows       []auditRow
	OlderHref  string
	NewestHref string
	Error      string
}

func (c *Console) auditPage(w http.ResponseWriter, r *http.Request) {
	qs := r.URL.Query()
	f := auditFilter{
		Key:     strings.Trim(strings.TrimSpace(qs.Get("key")), "/"),
		User:    strings.TrimSpace(qs.Get("user")),
		Session: strings.TrimSpace(qs.Get("session")),
		Event:   qs.Get("event"),
		Since:   qs.Get("since"),
	}
	if f.Since == "" {
		f.Since = "24h"
	}
	v := auditView{Filter: f, Events: auditEvents, Sinces: sinceChoices}
	q := holdfast.AuditQuery{Key: f.Key, User: f.User, Session: f.Session, Event: holdfast.Event(f.Event)}
	since, custom, err := c.parseSince(f.Since)
	if err == nil && qs.Get("before") != "" {
		f.Before, err = strconv.ParseUint(qs.Get("before"), 10, 64)
		if err != nil {
			err = fmt.Errorf("before: not a position in the audit log")
		}
		v.Filter = f
	}
	if err == nil && f.Key != "" {
		if kerr := holdfast.ValidateKey(f.Key); kerr != nil {
			err = fmt.Errorf("key %q: %w", f.Key, kerr)
		}
	}
	if err == nil && f.Event != "" && !holdfast.Event(f.Event).Known() {
		err = fmt.Errorf("unknown event %q", f.Event)
	}
	if err != nil {
		v.Error = err.Error()
		c.render(w, r, http.StatusBadRequest, "audit", nil, v)
		return
	}
	q.Since = since
	v.CustomTime = custom
	v.SinceAbs = absTime(since)
	entries, more, err := c.latestAudit(r.Context(), q, f.Before, c.cfg.PageSize)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	v.Rows = c.auditRows(entries)
	if more && len(entries) > 0 {
		v.OlderHref = Prefix + "audit?" + f.values("before", strconv.FormatUint(entries[len(entries)-1].ID, 10)).Encode()
	}
	if f.Before != 0 {
		v.NewestHref = Prefix + "audit?" + f.values("before", "").Encode()
	}
	c.render(w, r, http.StatusOK, "audit", nil, v)
}

// parseSince reads the time filter: a choice such as "24h", "all", or a
// time (RFC 3339, or a datetime-local field's value, taken as UTC).
func (c *Console) parseSince(s string) (since time.Time, custom bool, err error) {
	if s == "all" {
		return time.Time{}, false, nil
	}
	for _, ch := range sinceChoices {
		if ch.Value == s {
			d, _ := time.ParseDuration(s)
			return c.cfg.Now().Add(-d), false, nil
		}
	}
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), true, nil
		}
	}
	return time.Time{}, false, fmt.Errorf("since %q: want a time such as 2026-11-30T10:47", s)
}

func queryEscape(s string) string { return url.QueryEscape(s) }
