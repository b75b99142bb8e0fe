package memdb

import (
	"cmp"
	"math"
	"time"
	"unique"

	"github.com/holdfast/holdfast/store"
)

// lockRec is how the engine keeps a lock: a million of them must fit in a
// few hundred MiB, so it is 80 bytes instead of store.Lock's 144. The
// session and the grant (user, name, mode) are interned, as a session
// typically holds many locks and one request grants many keys alike; times
// are Unix seconds and nanoseconds. A store.Lock is built on every read.
//
// Records are immutable once stored: a write stores a new record, so one
// kept in the undo log or in an index never changes under its holder.
type lockRec struct {
	key        string
	note       string
	session    unique.Handle[string]
	grant      unique.Handle[grant]
	token      uint64
	acquiredS  int64
	expiresS   int64
	acquiredNS int32
	expiresNS  int32
}

// grant is what the locks of one acquire share besides their session.
type grant struct {
	user, name string
	shared     bool
}

// newLockRec makes a record of l with its session and grant interned. It
// keeps l's key and note.
func newLockRec(l *store.Lock, session unique.Handle[string], g unique.Handle[grant]) *lockRec {
	r := &lockRec{key: l.Key, note: l.Note, session: session, grant: g, token: l.Token}
	r.acquiredS, r.acquiredNS = unixOf(l.AcquiredAt)
	r.expiresS, r.expiresNS = unixOf(l.ExpiresAt)
	return r
}

// recOf makes a record of l.
func recOf(l *store.Lock) *lockRec {
	return newLockRec(l, unique.Make(l.Session), unique.Make(grantOf(l)))
}

func grantOf(l *store.Lock) grant { return grant{user: l.User, name: l.Name, shared: l.Shared} }

func (r *lockRec) sessionID() string { return r.session.Value() }

// lock returns the record as a store.Lock; its times are in UTC.
func (r *lockRec) lock() store.Lock {
	g := r.grant.Value()
	return store.Lock{
		Key:        r.key,
		Session:    r.session.Value(),
		User:       g.user,
		Name:       g.name,
		Shared:     g.shared,
		Token:      r.token,
		AcquiredAt: timeOf(r.acquiredS, r.acquiredNS),
		ExpiresAt:  timeOf(r.expiresS, r.expiresNS),
		Note:       r.note,
	}
}

func unixOf(t time.Time) (int64, int32) { return t.Unix(), int32(t.Nanosecond()) }

// timeOf is the inverse of unixOf; the zero time comes back as the zero
// time.
func timeOf(sec int64, nsec int32) time.Time { return time.Unix(sec, int64(nsec)).UTC() }

// expiresNanos is the expiry in Unix nanoseconds, clamped to int64: the
// expiry index orders by it first and by the exact time only on a tie, so
// an expiry beyond the years 1678–2262 still sorts right.
func (r *lockRec) expiresNanos() int64 { return clampedNanos(r.expiresS, r.expiresNS) }

func clampedNanos(sec int64, nsec int32) int64 {
	const maxSec = math.MaxInt64/int64(time.Second) - 1
	switch {
	case sec > maxSec:
		return math.MaxInt64
	case sec < -maxSec:
		return math.MinInt64
	}
	return sec*int64(time.Second) + int64(nsec)
}

// compareExpiry orders records by their exact expiry.
func compareExpiry(x, y *lockRec) int {
	if c := cmp.Compare(x.expiresS, y.expiresS); c != 0 {
		return c
	}
	return cmp.Compare(x.expiresNS, y.expiresNS)
}
