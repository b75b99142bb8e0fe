package memdb

import (
	"cmp"
	"math"
	"time"

	"github.com/holdfast/holdfast/store"
)

// lockRec is how the engine keeps a lock: a million of them must fit in a
// few hundred MiB, so it is 112 bytes instead of store.Lock's 144, times
// as Unix seconds and nanoseconds instead of two time.Time. Its session,
// user and name share their bytes with the session's record when they are
// equal (see canonical), so the locks a session takes over many requests
// do not each keep a copy. A store.Lock is built on every read.
//
// Records are immutable once stored: a write stores a new record, so one
// kept in the undo log or in an index never changes under its holder.
type lockRec struct {
	key, session, user, name, note string
	token                          uint64
	acquiredS, expiresS            int64
	expiresNS                      int32
	// acquired holds AcquiredAt's nanoseconds and, in its top bit,
	// Shared: a bool of its own would make the record 128 bytes.
	acquired uint32
}

const sharedBit = 1 << 31

// newLockRec makes a record of l; it keeps l's strings.
func newLockRec(l *store.Lock) *lockRec {
	r := makeLockRec(l)
	return &r
}

func makeLockRec(l *store.Lock) lockRec {
	r := lockRec{key: l.Key, session: l.Session, user: l.User, name: l.Name, note: l.Note, token: l.Token}
	var acquiredNS int32
	r.acquiredS, acquiredNS = unixOf(l.AcquiredAt)
	r.acquired = uint32(acquiredNS)
	if l.Shared {
		r.acquired |= sharedBit
	}
	r.expiresS, r.expiresNS = unixOf(l.ExpiresAt)
	return r
}

func (r *lockRec) shared() bool { return r.acquired&sharedBit != 0 }

// recOf makes a record of l whose strings share their bytes with the
// session's record where they are equal.
func (e *Engine) recOf(l *store.Lock) *lockRec {
	r := newLockRec(l)
	e.share(r)
	return r
}

// share makes r's strings share the bytes of its session's record.
func (e *Engine) share(r *lockRec) {
	if s := e.sessions[r.session]; s != nil {
		r.session = canonical(s, r.session)
		r.user = canonical(s, r.user)
		r.name = canonical(s, r.name)
	}
}

// lostRec is how the engine keeps a lost lock: the lock as a lockRec and
// why it was lost, 176 bytes instead of store.Lost's 224. A day of
// releases is kept (see docs/GUARANTEES.md), so these add up.
type lostRec struct {
	lock                       lockRec
	reason, actor, forceReason string
	atS                        int64
	atNS                       int32
	reported                   bool
}

// lostRecOf makes a record of l, sharing strings like recOf; it keeps l's
// strings.
func (e *Engine) lostRecOf(l *store.Lost) *lostRec {
	r := &lostRec{lock: makeLockRec(&l.Lock), reason: l.Reason, actor: l.Actor, forceReason: l.ForceReason, reported: l.Reported}
	r.atS, r.atNS = unixOf(l.At)
	e.share(&r.lock)
	if s := e.sessions[r.lock.session]; s != nil {
		r.actor = canonical(s, r.actor)
	}
	return r
}

// lost returns the record as a store.Lost; its times are in UTC.
func (r *lostRec) lost() store.Lost {
	return store.Lost{Lock: r.lock.lock(), Reason: r.reason, Actor: r.actor, ForceReason: r.forceReason,
		At: timeOf(r.atS, r.atNS), Reported: r.reported}
}

// canonical returns the string of the session's record equal to v, or v.
func canonical(s *sessRec, v string) string {
	switch v {
	case s.id:
		return s.id
	case s.user:
		return s.user
	case s.name:
		return s.name
	}
	return v
}

// sessRec is how the engine keeps a session: 96 bytes instead of
// store.Session's 128 (with its size class); every heartbeat stores one.
type sessRec struct {
	id, user, name, endReason string
	lastSeenS, endedS         int64
	idleTimeout               time.Duration
	lastSeenNS, endedNS       int32
}

// newSessRec makes a record of s; it keeps s's strings.
func newSessRec(s *store.Session) *sessRec {
	r := &sessRec{id: s.ID, user: s.User, name: s.Name, endReason: s.EndReason, idleTimeout: s.IdleTimeout}
	r.lastSeenS, r.lastSeenNS = unixOf(s.LastSeen)
	r.endedS, r.endedNS = unixOf(s.EndedAt)
	return r
}

// session returns the record as a store.Session; its times are in UTC.
func (r *sessRec) session() store.Session {
	return store.Session{ID: r.id, User: r.user, Name: r.name, LastSeen: timeOf(r.lastSeenS, r.lastSeenNS),
		IdleTimeout: r.idleTimeout, EndedAt: timeOf(r.endedS, r.endedNS), EndReason: r.endReason}
}

var zeroS, zeroNS = unixOf(time.Time{})

func (r *sessRec) ended() bool { return r.endedS != zeroS || r.endedNS != zeroNS }

// lock returns the record as a store.Lock; its times are in UTC.
func (r *lockRec) lock() store.Lock {
	return store.Lock{
		Key:        r.key,
		Session:    r.session,
		User:       r.user,
		Name:       r.name,
		Shared:     r.shared(),
		Token:      r.token,
		AcquiredAt: timeOf(r.acquiredS, int32(r.acquired&^sharedBit)),
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
