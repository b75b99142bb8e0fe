package adminui

import (
	"context"
	"net/http"
	"strings"

	"github.com/holdfast/holdfast"
)

// historyLimit is how many of a key's latest audit entries its page shows.
const historyLimit = 100

type lockDetailView struct {
	Key         string
	Holders     []lockRow // locks on exactly this key
	Ancestors   []lockRow // locks above it, which cover it
	Descendants []lockRow // locks below it, which it covers
	MoreRelated bool      // more related locks than one listing page
	Members     []holdfast.Aggregate
	History     []auditRow
	HistoryMore bool
	AuditHref   string
	Return      string
	Error       string
}

func (v lockDetailView) title() string { return "Lock " + v.Key }

func (c *Console) lockPage(w http.ResponseWriter, r *http.Request) {
	key := strings.Trim(strings.TrimSpace(r.URL.Query().Get("key")), "/")
	if err := holdfast.ValidateKey(key); err != nil {
		c.fail(w, r, http.StatusBadRequest, "Not a lock key: "+err.Error())
		return
	}
	v, err := c.lockDetail(r.Context(), key)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	c.render(w, r, http.StatusOK, "lock", nil, v)
}

func (c *Console) lockDetail(ctx context.Context, key string) (lockDetailView, error) {
	v := lockDetailView{
		Key:       key,
		AuditHref: Prefix + "audit?key=" + queryEscape(key),
		Return:    Prefix + "lock?key=" + queryEscape(key),
	}
	related, err := c.mgr.Locks(ctx, holdfast.LockQuery{Key: key, Limit: maxPageSize})
	if err != nil {
		return v, err
	}
	v.MoreRelated = related.Next != nil
	now := c.cfg.Now()
	for _, l := range related.Locks {
		row := c.rowOf(l, now)
		switch {
		case l.Key == key:
			v.Holders = append(v.Holders, row)
		case holdfast.UnderPrefix(l.Key, key):
			v.Ancestors = append(v.Ancestors, row)
		default:
			v.Descendants = append(v.Descendants, row)
		}
	}
	agg, err := c.mgr.Aggregates(ctx, key)
	if err != nil {
		return v, err
	}
	v.Members = agg.Aggregates
	entries, more, err := c.latestAudit(ctx, holdfast.AuditQuery{Key: key}, 0, historyLimit)
	if err != nil {
		return v, err
	}
	v.History = c.auditRows(entries)
	v.HistoryMore = more
	return v, nil
}
