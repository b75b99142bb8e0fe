package memdb

import (
	"cmp"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/holdfast/holdfast/store"
)

// reader answers every store.ReadTx method from the engine's indexes. The
// caller holds the engine's lock.
type reader struct {
	e   *Engine
	now time.Time
	// pivot, when not nil, is the write transaction's own record for
	// sessionPivot.
	pivot *lockRec
}

var _ store.ReadTx = reader{}

func (r reader) Now() time.Time { return r.now }

func (r reader) Lock(key, session string) (store.Lock, bool, error) {
	l := r.e.getLock(key, session)
	if l == nil {
		return store.Lock{}, false, nil
	}
	return l.lock(), true, nil
}

// Related visits the locks on key, then on each ancestor of key (nearest
// last), then on every descendant: a point range per key and one range for
// all descendants, which sort between key+"/" and key+"0".
func (r reader) Related(key string, fn func(store.Lock) bool) error {
	more := r.locksOn(key, fn)
	for i := 0; more && i < len(key); i++ {
		if key[i] == '/' {
			more = r.locksOn(key[:i], fn)
		}
	}
	if !more {
		return nil
	}
	bounds := key + "/" + key + "0" // one allocation for both
	from, to := bounds[:len(key)+1], bounds[len(key)+1:]
	r.e.locks.AscendRange(keyItem{key: from}, keyItem{key: to}, func(it keyItem) bool {
		return fn(it.rec.lock())
	})
	return nil
}

// locksOn visits the locks on exactly key and reports whether fn wants more.
func (r reader) locksOn(key string, fn func(store.Lock) bool) bool {
	more := true
	r.e.locks.AscendGreaterOrEqual(keyItem{key: key}, func(it keyItem) bool {
		if it.key != key {
			return false
		}
		more = fn(it.rec.lock())
		return more
	})
	return more
}

func (r reader) SessionLocks(session string) ([]store.Lock, error) {
	var out []store.Lock
	pivot := r.sessionPivot(session, "")
	r.e.locksBySess.AscendGreaterOrEqual(pivot, func(l *lockRec) bool {
		if l.session != pivot.session {
			return false
		}
		out = append(out, l.lock())
		return true
	})
	return out, nil
}

func (r reader) ExpiredLocks(now time.Time, limit int) ([]store.Lock, error) {
	var out []store.Lock
	r.e.locksByExpry.Ascend(func(it expiryItem) bool {
		if !it.expiresBy(now) || (limit > 0 && len(out) >= limit) {
			return false
		}
		out = append(out, it.rec.lock())
		return true
	})
	return out, nil
}

// Locks lists by (key, session) after the cursor, walking the session
// index when a session is given and the key index otherwise.
func (r reader) Locks(q store.LockQuery) ([]store.Lock, error) {
	out := withRoom[store.Lock](q.Limit)
	hasCursor := q.AfterKey != "" || q.AfterSession != ""
	afterCursor := func(l *lockRec) bool {
		if !hasCursor {
			return true
		}
		return l.key > q.AfterKey || (l.key == q.AfterKey && l.session > q.AfterSession)
	}
	visit := func(l *lockRec) bool {
		if !strings.HasPrefix(l.key, q.Prefix) {
			return l.key < q.Prefix // before the prefix range: keep going
		}
		if !afterCursor(l) || (q.User != "" && l.user != q.User) || (q.Session != "" && l.session != q.Session) {
			return true
		}
		out = append(out, l.lock())
		return q.Limit <= 0 || len(out) < q.Limit
	}
	if q.Session != "" {
		pivot := r.sessionPivot(q.Session, max(q.Prefix, q.AfterKey))
		r.e.locksBySess.AscendGreaterOrEqual(pivot, func(l *lockRec) bool {
			return l.session == pivot.session && visit(l)
		})
		return out, nil
	}
	if q.User != "" {
		pivot := &lockRec{user: q.User, key: max(q.Prefix, q.AfterKey)}
		r.e.locksByUser.AscendGreaterOrEqual(pivot, func(l *lockRec) bool {
			return l.user == q.User && visit(l)
		})
		return out, nil
	}
	start := keyItem{key: q.Prefix}
	if hasCursor && q.AfterKey >= q.Prefix {
		start = keyItem{key: q.AfterKey, rec: r.sessionPivot(q.AfterSession, q.AfterKey)}
	}
	r.e.locks.AscendGreaterOrEqual(start, func(it keyItem) bool { return visit(it.rec) })
	return out, nil
}

// withRoom returns an empty slice with room for a page of limit (0: no
// limit) items, up to a bound, so a listing grows it once at most.
func withRoom[T any](limit int) []T {
	const most = 1000
	if limit <= 0 {
		return nil
	}
	return make([]T, 0, min(limit, most))
}

func (r reader) Session(id string) (store.Session, bool, error) {
	s := r.e.sessions[id]
	if s == nil {
		return store.Session{}, false, nil
	}
	return s.session(), true, nil
}

func (r reader) IdleSessions(now time.Time, limit int) ([]store.Session, error) {
	return r.e.idle(now, limit, nil), nil
}

// idle returns up to limit live sessions whose idle deadline is at or
// before now, the earliest deadline first. An entry of idleSessions found
// before its session's deadline is passed over, and its id added to early
// when that is not nil.
func (e *Engine) idle(now time.Time, limit int, early *[]string) []store.Session {
	var out []store.Session
	e.idleSessions.Ascend(func(it timedSessionItem) bool {
		if it.after(now) || (limit > 0 && len(out) >= limit) {
			return false
		}
		s := e.sessions[it.rec.id]
		if idleItem(s).after(now) {
			if early != nil {
				*early = append(*early, s.id)
			}
			return true
		}
		out = append(out, s.session())
		return true
	})
	// Entries lie at their deadline or earlier, so the walk finds them out
	// of their deadlines' order.
	slices.SortFunc(out, func(a, b store.Session) int {
		return cmp.Or(a.IdleDeadline().Compare(b.IdleDeadline()), cmp.Compare(a.ID, b.ID))
	})
	return out
}

func (r reader) Sessions(q store.SessionQuery) ([]store.Session, error) {
	out := withRoom[store.Session](q.Limit)
	if q.User != "" {
		r.e.liveByUser.AscendGreaterOrEqual(userItem{user: q.User, id: q.After}, func(it userItem) bool {
			if it.user != q.User {
				return false
			}
			if it.id != q.After {
				out = append(out, r.e.sessions[it.id].session())
			}
			return q.Limit <= 0 || len(out) < q.Limit
		})
		return out, nil
	}
	r.e.liveSessions.AscendGreaterOrEqual(&sessRec{id: q.After}, func(s *sessRec) bool {
		if s.id != q.After {
			out = append(out, s.session())
		}
		return q.Limit <= 0 || len(out) < q.Limit
	})
	return out, nil
}

func (r reader) EndedSessions(before time.Time, limit int) ([]store.Session, error) {
	var out []store.Session
	r.e.endedSession.Ascend(func(it timedSessionItem) bool {
		if !it.before(before) || (limit > 0 && len(out) >= limit) {
			return false
		}
		out = append(out, it.rec.session())
		return true
	})
	return out, nil
}

func (r reader) Aggregate(member string) (string, bool, error) {
	root, ok := r.e.aggRoot[member]
	return root, ok, nil
}

func (r reader) Aggregates(root string) ([]store.Aggregate, error) {
	var out []store.Aggregate
	if root == "" {
		r.e.aggByMember.Ascend(func(it aggItem) bool {
			out = append(out, store.Aggregate{Member: it.a, Root: it.b})
			return true
		})
		return out, nil
	}
	r.e.aggByRoot.AscendGreaterOrEqual(aggItem{a: root}, func(it aggItem) bool {
		if it.a != root {
			return false
		}
		out = append(out, store.Aggregate{Member: it.b, Root: it.a})
		return true
	})
	return out, nil
}

func (r reader) Lost(session string) ([]store.Lost, error) {
	var out []store.Lost
	r.e.lost.AscendGreaterOrEqual(lostItem{session: session}, func(it lostItem) bool {
		if it.session != session {
			return false
		}
		out = append(out, it.rec.lost())
		return true
	})
	slices.SortStableFunc(out, func(x, y store.Lost) int { return x.At.Compare(y.At) })
	return out, nil
}

func (r reader) LostBefore(before time.Time, limit int) ([]store.Lost, error) {
	var out []store.Lost
	r.e.lostByAt.Ascend(func(it lostAtItem) bool {
		if !it.before(before) || (limit > 0 && len(out) >= limit) {
			return false
		}
		out = append(out, it.rec.lost())
		return true
	})
	return out, nil
}

// Audit walks entries by ID from the cursor and filters them; the log is
// read by administrators, not on the lock paths.
func (r reader) Audit(q store.AuditQuery) ([]store.AuditEntry, error) {
	var out []store.AuditEntry
	visit := func(it auditItem) bool {
		if !AuditMatches(q, it.entry) {
			return true
		}
		out = append(out, *it.entry)
		return q.Limit <= 0 || len(out) < q.Limit
	}
	switch {
	case q.Newest && q.Before > 0:
		r.e.audit.DescendLessOrEqual(auditItem{id: q.Before - 1}, visit)
	case q.Newest:
		r.e.audit.Descend(visit)
	case q.After < math.MaxUint64:
		r.e.audit.AscendGreaterOrEqual(auditItem{id: q.After + 1}, visit)
	}
	return out, nil
}

// AuditMatches reports whether e passes q's filters (not its cursor or
// limit), for a store that lists the audit log itself.
func AuditMatches(q store.AuditQuery, e *store.AuditEntry) bool {
	return (q.Key == "" || covers(q.Key, e.Lock.Key)) &&
		(q.Session == "" || e.Lock.Session == q.Session) &&
		(q.User == "" || e.Lock.User == q.User) &&
		(q.Event == "" || e.Event == q.Event) &&
		(q.Since.IsZero() || !e.At.Before(q.Since))
}
