package memdb

import (
	"strings"
	"time"

	"github.com/holdfast/holdfast/store"
)

// The index items are small values, so a lookup builds its pivot on the
// stack instead of allocating a record. Every record they point to is
// immutable once stored: a Put stores a new record, so a pointer handed to
// the durable layer or kept in the undo log never changes under it.

// pairItem orders locks by (key, session) in the primary index.
type pairItem struct {
	a, b string
	lock *store.Lock
}

func lessPair(x, y pairItem) bool {
	if x.a != y.a {
		return x.a < y.a
	}
	return x.b < y.b
}

// expiryItem orders locks by (ExpiresAt, key, session). It is three words,
// not a copy of the fields, because every lock has one and a million locks
// must fit in little memory; ties, rare, compare through the pointer.
type expiryItem struct {
	sec  int64
	nsec int32
	lock *store.Lock
}

func expiryOf(l *store.Lock) expiryItem {
	return expiryItem{sec: l.ExpiresAt.Unix(), nsec: int32(l.ExpiresAt.Nanosecond()), lock: l}
}

// expiresBy reports whether the item's expiry is at or before t.
func (it expiryItem) expiresBy(t time.Time) bool {
	sec := t.Unix()
	return it.sec < sec || (it.sec == sec && it.nsec <= int32(t.Nanosecond()))
}

func lessExpiry(x, y expiryItem) bool {
	if x.sec != y.sec {
		return x.sec < y.sec
	}
	if x.nsec != y.nsec {
		return x.nsec < y.nsec
	}
	if x.lock.Key != y.lock.Key {
		return x.lock.Key < y.lock.Key
	}
	return x.lock.Session < y.lock.Session
}

// lessBySession orders locks by (session, key) in the session index, which
// holds bare pointers to stay small.
func lessBySession(x, y *store.Lock) bool {
	if x.Session != y.Session {
		return x.Session < y.Session
	}
	return x.Key < y.Key
}

// sessionItem orders live sessions by id.
type sessionItem struct {
	id string
	s  *store.Session
}

func lessSession(x, y sessionItem) bool { return x.id < y.id }

// timedSessionItem orders sessions by a time (idle deadline or end), then id.
type timedSessionItem struct {
	at time.Time
	id string
	s  *store.Session
}

func lessTimedSession(x, y timedSessionItem) bool {
	if c := x.at.Compare(y.at); c != 0 {
		return c < 0
	}
	return x.id < y.id
}

// aggItem orders aggregates by (member, root) or by (root, member).
type aggItem struct{ a, b string }

func lessAgg(x, y aggItem) bool {
	if x.a != y.a {
		return x.a < y.a
	}
	return x.b < y.b
}

// lostItem orders lost records by (session, key, token).
type lostItem struct {
	session, key string
	token        uint64
	lost         *store.Lost
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

func lostItemOf(l *store.Lost) lostItem {
	return lostItem{session: l.Lock.Session, key: l.Lock.Key, token: l.Lock.Token, lost: l}
}

// lostAtItem orders lost records by when they were lost.
type lostAtItem struct {
	at time.Time
	id lostItem
}

func lessLostAt(x, y lostAtItem) bool {
	if c := x.at.Compare(y.at); c != 0 {
		return c < 0
	}
	return lessLost(x.id, y.id)
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
