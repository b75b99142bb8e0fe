package memdb

import (
	"cmp"
	"strings"
	"time"

	"github.com/holdfast/holdfast/store"
)

// The index items are small values, so most lookups build their pivot on
// the stack instead of allocating a record. Every record they point to is
// immutable once stored: a Put stores a new record, so a pointer kept in
// the undo log never changes under it.

// keyItem orders locks by (key, session) in the primary index. It copies
// the key so that a lookup compares keys without a pointer chase; a pivot
// has no record and sorts before every session of its key.
type keyItem struct {
	key string
	rec *lockRec
}

func lessKey(x, y keyItem) bool {
	if x.key != y.key {
		return x.key < y.key
	}
	switch {
	case y.rec == nil:
		return false
	case x.rec == nil:
		return true
	}
	return x.rec.session < y.rec.session
}

// lessBySession orders locks by (session, key) in the session index, which
// holds bare records to stay small.
func lessBySession(x, y *lockRec) bool {
	if x.session != y.session {
		return x.session < y.session
	}
	return x.key < y.key
}

// lessByUser orders locksByUser.
func lessByUser(x, y *lockRec) bool {
	if x.user != y.user {
		return x.user < y.user
	}
	if x.key != y.key {
		return x.key < y.key
	}
	return x.session < y.session
}

// sessionPivot returns a record that sorts before every lock of session on
// a key at or after key. A write transaction runs alone, so it reuses one
// record (a heartbeat looks up its session's locks every time); readers
// run concurrently and allocate theirs.
func (r reader) sessionPivot(session, key string) *lockRec {
	if r.pivot == nil {
		return &lockRec{session: session, key: key}
	}
	*r.pivot = lockRec{session: session, key: key}
	return r.pivot
}

// expiryItem orders locks by (ExpiresAt, token, key, session). It is two
// words, not a copy of the fields, because every lock has one; ties, rare
// but for the keys of one request, compare through the record, by token
// first: the keys of one request differ in it, and often share a long
// prefix.
type expiryItem struct {
	at  int64 // expiresNanos
	rec *lockRec
}

func expiryOf(r *lockRec) expiryItem { return expiryItem{at: r.expiresNanos(), rec: r} }

// expiresBy reports whether the item's expiry is at or before t.
func (it expiryItem) expiresBy(t time.Time) bool {
	sec, nsec := unixOf(t)
	if at := clampedNanos(sec, nsec); it.at != at {
		return it.at < at
	}
	return it.rec.expiresS < sec || (it.rec.expiresS == sec && it.rec.expiresNS <= nsec)
}

func lessExpiry(x, y expiryItem) bool {
	if x.at != y.at {
		return x.at < y.at
	}
	if c := compareExpiry(x.rec, y.rec); c != 0 {
		return c < 0
	}
	if x.rec.token != y.rec.token {
		return x.rec.token < y.rec.token
	}
	return lessKey(keyItem{x.rec.key, x.rec}, keyItem{y.rec.key, y.rec})
}

// lessSession orders live sessions by id.
func lessSession(x, y *sessRec) bool { return x.id < y.id }

// timedSessionItem orders sessions by a time (idle deadline or end), then
// id.
type timedSessionItem struct {
	sec  int64
	nsec int32
	rec  *sessRec
}

func timedSession(t time.Time, r *sessRec) timedSessionItem {
	sec, nsec := unixOf(t)
	return timedSessionItem{sec: sec, nsec: nsec, rec: r}
}

func endedItem(r *sessRec) timedSessionItem {
	return timedSessionItem{sec: r.endedS, nsec: r.endedNS, rec: r}
}

func idleItem(r *sessRec) timedSessionItem {
	return timedSession(timeOf(r.lastSeenS, r.lastSeenNS).Add(r.idleTimeout), r)
}

// after reports whether the item's time is after t.
func (it timedSessionItem) after(t time.Time) bool {
	sec, nsec := unixOf(t)
	return it.sec > sec || (it.sec == sec && it.nsec > nsec)
}

// earlier reports whether the item's time is before o's.
func (it timedSessionItem) earlier(o timedSessionItem) bool {
	return it.sec < o.sec || (it.sec == o.sec && it.nsec < o.nsec)
}

// before reports whether the item's time is before t.
func (it timedSessionItem) before(t time.Time) bool {
	sec, nsec := unixOf(t)
	return it.sec < sec || (it.sec == sec && it.nsec < nsec)
}

func lessTimedSession(x, y timedSessionItem) bool {
	if x.sec != y.sec {
		return x.sec < y.sec
	}
	if x.nsec != y.nsec {
		return x.nsec < y.nsec
	}
	return x.rec.id < y.rec.id
}

// aggItem orders aggregates by (member, root) or by (root, member).
type aggItem struct{ a, b string }

func lessAgg(x, y aggItem) bool {
	if x.a != y.a {
		return x.a < y.a
	}
	return x.b < y.b
}

// userItem orders live sessions by (user, id).
type userItem struct{ user, id string }

func lessUser(x, y userItem) bool {
	if x.user != y.user {
		return x.user < y.user
	}
	return x.id < y.id
}

// lostItem orders lost records by (session, key, token).
type lostItem struct {
	session, key string
	token        uint64
	rec          *lostRec
}

func lessLost(x, y lostItem) bool {
	if x.session != y.session {
		return x.session < y.session
	}
	if x.key != y.key {
		return x.key < y.key
	}
	return x.token < y.token
}

func lostItemOf(r *lostRec) lostItem {
	return lostItem{session: r.lock.session, key: r.lock.key, token: r.lock.token, rec: r}
}

// lostAtItem orders lost records by when they were lost, then like
// lostItem; two words, like expiryItem.
type lostAtItem struct {
	at  int64 // clamped Unix nanoseconds
	rec *lostRec
}

func lostAtOf(r *lostRec) lostAtItem { return lostAtItem{at: clampedNanos(r.atS, r.atNS), rec: r} }

// before reports whether the record was lost before t.
func (it lostAtItem) before(t time.Time) bool {
	sec, nsec := unixOf(t)
	if at := clampedNanos(sec, nsec); it.at != at {
		return it.at < at
	}
	return it.rec.atS < sec || (it.rec.atS == sec && it.rec.atNS < nsec)
}

func lessLostAt(x, y lostAtItem) bool {
	if x.at != y.at {
		return x.at < y.at
	}
	if c := cmp.Compare(x.rec.atS, y.rec.atS); c != 0 {
		return c < 0
	}
	if c := cmp.Compare(x.rec.atNS, y.rec.atNS); c != 0 {
		return c < 0
	}
	if x.rec.lock.token != y.rec.lock.token {
		// The records one request makes differ in it, not in their time.
		return x.rec.lock.token < y.rec.lock.token
	}
	return lessLost(lostItemOf(x.rec), lostItemOf(y.rec))
}

// auditItem orders audit entries by ID.
type auditItem struct {
	id    uint64
	entry *store.AuditEntry
}

func lessAudit(x, y auditItem) bool { return x.id < y.id }

// auditAtItem orders audit entries by (At, ID) for pruning.
type auditAtItem struct {
	at    time.Time
	id    uint64
	entry *store.AuditEntry
}

func lessAuditAt(x, y auditAtItem) bool {
	if c := x.at.Compare(y.at); c != 0 {
		return c < 0
	}
	return x.id < y.id
}

// covers reports whether a lock on a covers key b: a equals b or is an
// ancestor of it.
func covers(a, b string) bool {
	return a == b || (len(b) > len(a) && b[len(a)] == '/' && strings.HasPrefix(b, a))
}
