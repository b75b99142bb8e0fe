package holdfast

import (
	"context"
	"strconv"
	"strings"

	"github.com/holdfast/holdfast/store"
)

// ForceRelease releases other people's locks: every lock on keys, every
// lock of session, or the session's locks on keys when both are given. The
// reason is required and, with the actor, is told to the former holder at
// its next renew, verify or heartbeat.
func (m *Manager) ForceRelease(ctx context.Context, req ForceReleaseRequest) (*ForceReleaseResult, error) {
	if strings.TrimSpace(req.Reason) == "" {
		return nil, invalid("reason", "reason is required: say why the lock is released, for its holder and the audit log")
	}
	if len(req.Keys) == 0 && req.Session == "" {
		return nil, invalid("keys", "give keys, session or both")
	}
	if err := validateKeys("keys", req.Keys, false); err != nil {
		return nil, err
	}
	if req.Session != "" {
		if err := validateSession("session", req.Session); err != nil {
			return nil, err
		}
	}
	var res *ForceReleaseResult
	err := m.update(ctx, "force_release", scope{keys: req.Keys, session: req.Session}, func(o *op) error {
		res = &ForceReleaseResult{Released: []Lock{}}
		var targets []store.Lock
		if len(req.Keys) == 0 {
			var err error
			if targets, err = o.tx.SessionLocks(req.Session); err != nil {
				return err
			}
		}
		for _, k := range req.Keys {
			key, err := o.resolve("keys", k)
			if err != nil {
				return err
			}
			related, err := o.relatedLocks(key)
			if err != nil {
				return err
			}
			for _, l := range related {
				if l.Key == key && (req.Session == "" || l.Session == req.Session) {
					targets = append(targets, l)
				}
			}
		}
		for _, l := range targets {
			cur, ok, err := o.liveLock(l.Key, l.Session)
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
			if err := o.drop(cur, LostForceReleased, EventForceReleased, req.Actor, req.Reason, false); err != nil {
				return err
			}
			res.Released = append(res.Released, toLock(cur))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// Audit lists audit entries after the cursor, oldest first or, with
// q.Newest, newest first.
func (m *Manager) Audit(ctx context.Context, q AuditQuery) (*AuditPage, error) {
	limit, err := pageSize(q.Limit)
	if err != nil {
		return nil, err
	}
	var after uint64
	if q.After != "" {
		if after, err = strconv.ParseUint(q.After, 10, 64); err != nil {
			return nil, invalid("after", "after is not a cursor this server returned")
		}
	}
	// The key is a point in the key hierarchy, as a listing's prefix is:
	// one that is no key would match nothing, silently.
	key := strings.TrimSuffix(q.Key, "/")
	if q.Key != "" {
		if err := ValidateKey(key); err != nil {
			return nil, invalid("key", "key: %v", err)
		}
	}
	if q.Event != "" && !q.Event.Known() {
		return nil, invalid("event", "event: no such event as %q", q.Event)
	}
	sq := store.AuditQuery{
		Key: key, Session: q.Session, User: q.User, Event: string(q.Event),
		Since: q.Since, After: after, Limit: limit + 1,
	}
	if q.Newest {
		sq.After, sq.Newest, sq.Before = 0, true, after
	}
	entries, err := m.listAudit(ctx, sq)
	if err != nil {
		return nil, err
	}
	page := &AuditPage{Entries: make([]AuditEntry, 0, len(entries))}
	for _, e := range entries {
		page.Entries = append(page.Entries, toAuditEntry(e))
	}
	if len(page.Entries) > limit {
		page.Entries = page.Entries[:limit]
		next := strconv.FormatUint(page.Entries[limit-1].ID, 10)
		page.Next = &next
	}
	return page, nil
}

// listAudit reads the audit log outside any transaction where the store
// can (store.AuditLister), so that a listing that reads far into a long
// log holds up no commit; in View otherwise.
func (m *Manager) listAudit(ctx context.Context, q store.AuditQuery) (entries []store.AuditEntry, err error) {
	l, ok := m.store.(store.AuditLister)
	if !ok || batchOf(ctx) != nil {
		err = m.view(ctx, "audit", func(o *readOp) error {
			entries, err = o.rtx.Audit(q)
			return err
		})
		return entries, err
	}
	start := m.started()
	entries, err = l.ListAudit(ctx, q)
	err = classify(err)
	m.observe("audit", start, err)
	return entries, err
}

// MaxTokenFloor is the highest floor RaiseTokens takes: a token above it
// would lose precision in a client that reads JSON numbers as doubles
// (JavaScript's, among others).
const MaxTokenFloor = 1<<53 - 1

// RaiseTokens makes every token granted from now on greater than floor,
// and reports whether the store's counter had to move; it never lowers
// it. Call it after restoring a backup of the store, with the highest
// token the fenced resources may have seen: the restored counter would
// otherwise grant again the tokens granted after the backup.
func (m *Manager) RaiseTokens(ctx context.Context, floor uint64) (raised bool, err error) {
	if floor > MaxTokenFloor {
		return false, invalid("floor", "the token floor %d is above %d, the highest a JSON client reads exactly", floor, uint64(MaxTokenFloor))
	}
	err = m.update(ctx, "raise_tokens", scope{}, func(o *op) error {
		raised, err = o.tx.RaiseTokens(floor)
		return err
	})
	return raised, err
}
