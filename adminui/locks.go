package adminui

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/holdfast/holdfast"
)

// maxAgeScan bounds how many locks one page reads while looking for locks
// older than the age filter, so a rare match never reads every lock.
const maxAgeScan = 20000

// ageChoices are the "held longer than" filter's options.
var ageChoices = []struct{ Value, Label string }{
	{"", "any time"},
	{"5m", "5 minutes"},
	{"1h", "1 hour"},
	{"8h", "8 hours"},
	{"24h", "1 day"},
	{"168h", "7 days"},
}

// locksFilter is the locks view's query string.
type locksFilter struct {
	Prefix  string
	User    string
	Session string
	Age     string // a time.ParseDuration string, or ""
	Sort    string // key (default), holder, since, expires, token
	Desc    bool
	After   string
	minAge  time.Duration
}

func parseLocksFilter(q url.Values) (locksFilter, error) {
	f := locksFilter{
		Prefix:  strings.Trim(strings.TrimSpace(q.Get("prefix")), "/"),
		User:    strings.TrimSpace(q.Get("user")),
		Session: strings.TrimSpace(q.Get("session")),
		Age:     q.Get("age"),
		Sort:    q.Get("sort"),
		Desc:    q.Get("dir") == "desc",
		After:   q.Get("after"),
	}
	if f.Prefix != "" {
		if err := holdfast.ValidateKey(f.Prefix); err != nil {
			return f, fmt.Errorf("key prefix %q: %w", f.Prefix, err)
		}
	}
	if f.Age != "" {
		d, err := time.ParseDuration(f.Age)
		if err != nil || d <= 0 {
			return f, fmt.Errorf("age %q: want a duration such as 1h", f.Age)
		}
		f.minAge = d
	}
	switch f.Sort {
	case "", "key", "holder", "since", "expires", "token":
	default:
		return f, fmt.Errorf("cannot sort by %q", f.Sort)
	}
	return f, nil
}

// values is the filter as a query string, with overrides.
func (f locksFilter) values(overrides ...string) url.Values {
	v := url.Values{}
	set := func(k, val string) {
		if val != "" {
			v.Set(k, val)
		}
	}
	set("prefix", f.Prefix)
	set("user", f.User)
	set("session", f.Session)
	set("age", f.Age)
	set("sort", f.Sort)
	if f.Desc {
		v.Set("dir", "desc")
	}
	set("after", f.After)
	for i := 0; i+1 < len(overrides); i += 2 {
		if overrides[i+1] == "" {
			v.Del(overrides[i])
		} else {
			v.Set(overrides[i], overrides[i+1])
		}
	}
	return v
}

// lockRow is a lock as the tables show it.
type lockRow struct {
	holdfast.Lock
	Holder       string
	ShortSession string
	SinceRel     string
	SinceAbs     string
	SinceISO     string
	ExpiresRel   string
	ExpiresAbs   string
	ExpiresISO   string
	Aggregate    bool // requested through an aggregate member
}

func (c *Console) rowOf(l holdfast.Lock, now time.Time) lockRow {
	return lockRow{
		Lock:         l,
		Holder:       holderName(l.Owner),
		ShortSession: shortID(l.Owner.Session),
		SinceRel:     relTime(l.AcquiredAt, now),
		SinceAbs:     absTime(l.AcquiredAt),
		SinceISO:     isoTime(l.AcquiredAt),
		ExpiresRel:   relTime(l.ExpiresAt, now),
		ExpiresAbs:   absTime(l.ExpiresAt),
		ExpiresISO:   isoTime(l.ExpiresAt),
		Aggregate:    l.RequestedKey != "" && l.RequestedKey != l.Key,
	}
}

func (c *Console) rowsOf(locks []holdfast.Lock) []lockRow {
	now := c.cfg.Now()
	rows := make([]lockRow, 0, len(locks))
	for _, l := range locks {
		rows = append(rows, c.rowOf(l, now))
	}
	return rows
}

// column is a sortable table header.
type column struct {
	Label string
	Href  string
	Sort  string // "ascending", "descending" or "" (aria-sort)
}

type locksView struct {
	Filter     locksFilter
	Ages       []struct{ Value, Label string }
	Rows       []lockRow
	Columns    map[string]column
	NextHref   string
	FirstHref  string
	Scanned    int  // locks read for the age filter
	ScanCapped bool // the age filter stopped reading before the end
	Error      string
	RowsHref   string // the table region alone, for live refreshes
	Return     string // this page, for the release form to come back to
}

func (v locksView) Filtered() bool {
	return v.Filter.Prefix != "" || v.Filter.User != "" || v.Filter.Session != "" || v.Filter.Age != ""
}

func (c *Console) locksPage(w http.ResponseWriter, r *http.Request) {
	v, status := c.locksData(r)
	c.render(w, r, status, "locks", nil, v)
}

// locksRows is the table region alone, fetched by the page's script when
// a lock event arrives.
func (c *Console) locksRows(w http.ResponseWriter, r *http.Request) {
	v, status := c.locksData(r)
	block := "locks-region"
	c.render(w, r, status, "locks", &block, v)
}

func (c *Console) locksData(r *http.Request) (locksView, int) {
	f, err := parseLocksFilter(r.URL.Query())
	v := locksView{Filter: f, Ages: ageChoices}
	if err != nil {
		v.Error = err.Error()
		return v, http.StatusBadRequest
	}
	v.RowsHref = Prefix + "locks/rows"
	v.Return = "/"
	if q := f.values().Encode(); q != "" {
		v.RowsHref += "?" + q
		v.Return += "?" + q
	}
	locks, next, scanned, capped, err := c.listLocks(r.Context(), f)
	if err != nil {
		v.Error = err.Error()
		return v, http.StatusServiceUnavailable
	}
	sortRows(locks, f.Sort, f.Desc)
	v.Rows = c.rowsOf(locks)
	v.Scanned, v.ScanCapped = scanned, capped
	if next != "" {
		v.NextHref = "/?" + f.values("after", next).Encode()
	}
	if f.After != "" {
		v.FirstHref = "/?" + f.values("after", "").Encode()
	}
	v.Columns = map[string]column{}
	for _, col := range []struct{ key, label string }{
		{"key", "Key"}, {"holder", "Holder"}, {"since", "Since"}, {"expires", "Expires"}, {"token", "Token"},
	} {
		current := f.Sort == col.key || (f.Sort == "" && col.key == "key")
		dir := ""
		if current && !f.Desc {
			dir = "desc"
		}
		sortKey := col.key
		if col.key == "key" {
			sortKey = ""
		}
		cl := column{Label: col.label, Href: "/?" + f.values("sort", sortKey, "dir", dir).Encode()}
		if current {
			cl.Sort = "ascending"
			if f.Desc {
				cl.Sort = "descending"
			}
		}
		v.Columns[col.key] = cl
	}
	return v, http.StatusOK
}

// listLocks reads one page of live locks from the Manager, never more
// than a page (or, with an age filter, than maxAgeScan locks). next is
// the cursor of the following page, "" at the end.
func (c *Console) listLocks(ctx context.Context, f locksFilter) (locks []holdfast.Lock, next string, scanned int, capped bool, err error) {
	limit := c.cfg.PageSize
	q := holdfast.LockQuery{Prefix: f.Prefix, User: f.User, Session: f.Session, After: f.After}
	if f.minAge == 0 {
		q.Limit = limit
		page, err := c.mgr.Locks(ctx, q)
		if err != nil {
			return nil, "", 0, false, err
		}
		if page.Next != nil {
			next = *page.Next
		}
		return page.Locks, next, len(page.Locks), false, nil
	}
	// Asking for no more than the rows still missing keeps each batch's
	// cursor exactly after the last lock shown.
	cutoff := c.cfg.Now().Add(-f.minAge)
	for len(locks) < limit {
		q.Limit = max(limit-len(locks), 1)
		page, err := c.mgr.Locks(ctx, q)
		if err != nil {
			return nil, "", 0, false, err
		}
		scanned += len(page.Locks)
		for _, l := range page.Locks {
			if !l.AcquiredAt.After(cutoff) {
				locks = append(locks, l)
			}
		}
		if page.Next == nil {
			return locks, "", scanned, false, nil
		}
		q.After = *page.Next
		if scanned >= maxAgeScan {
			return locks, q.After, scanned, len(locks) < limit, nil
		}
	}
	return locks, q.After, scanned, false, nil
}

// sortRows orders one page; pages themselves follow key order.
func sortRows(locks []holdfast.Lock, by string, desc bool) {
	less := func(a, b holdfast.Lock) int {
		switch by {
		case "holder":
			return strings.Compare(strings.ToLower(holderName(a.Owner)), strings.ToLower(holderName(b.Owner)))
		case "since":
			return a.AcquiredAt.Compare(b.AcquiredAt)
		case "expires":
			return a.ExpiresAt.Compare(b.ExpiresAt)
		case "token":
			return cmpUint(a.Token, b.Token)
		}
		return 0
	}
	sort.SliceStable(locks, func(i, j int) bool {
		if desc {
			i, j = j, i
		}
		if d := less(locks[i], locks[j]); d != 0 {
			return d < 0
		}
		if locks[i].Key != locks[j].Key {
			return locks[i].Key < locks[j].Key
		}
		return locks[i].Owner.Session < locks[j].Owner.Session
	})
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// formatCount is 12,345.
func formatCount(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
