package holdfast

import (
	"slices"
	"time"

	"github.com/holdfast/holdfast/store"
)

// readOp is one read-only operation inside a store transaction: the
// transaction, the store's time, and what the operation has looked up.
type readOp struct {
	m        *Manager
	rtx      store.ReadTx
	now      time.Time
	sessions sessionCache

	// relatedBuf is relatedLocks' buffer, and collect the callback that
	// fills it, made once.
	relatedBuf []store.Lock
	collect    func(store.Lock) bool
}

// relatedLocks returns the locks on key, its ancestors and its
// descendants (see store.ReadTx.Related), in a buffer the next call
// reuses.
func (o *readOp) relatedLocks(key string) ([]store.Lock, error) {
	if o.collect == nil {
		o.collect = func(l store.Lock) bool {
			o.relatedBuf = append(o.relatedBuf, l)
			return true
		}
	}
	clear(o.relatedBuf)
	o.relatedBuf = o.relatedBuf[:0]
	err := o.rtx.Related(key, o.collect)
	return o.relatedBuf, err
}

// sessionCache holds the sessions an operation has looked up or written.
// Most operations see one or two, which a short slice serves without the
// cost of a map; a sweep that sees many moves to one.
type sessionCache struct {
	few  []sessionView
	many map[string]sessionView
}

type sessionView struct {
	s      store.Session
	exists bool
}

const fewSessions = 8

// emptied returns c empty, keeping the buffer of a few.
func (c *sessionCache) emptied() sessionCache {
	clear(c.few)
	return sessionCache{few: c.few[:0]}
}

func (c *sessionCache) get(id string) (sessionView, bool) {
	if c.many != nil {
		v, ok := c.many[id]
		return v, ok
	}
	for _, v := range c.few {
		if v.s.ID == id {
			return v, true
		}
	}
	return sessionView{}, false
}

func (c *sessionCache) put(id string, v sessionView) {
	v.s.ID = id // also names a session that does not exist
	if c.many == nil {
		for i := range c.few {
			if c.few[i].s.ID == id {
				c.few[i] = v
				return
			}
		}
		if len(c.few) < fewSessions {
			c.few = append(c.few, v)
			return
		}
		c.many = make(map[string]sessionView, 2*fewSessions)
		for _, w := range c.few {
			c.many[w.s.ID] = w
		}
		c.few = nil
	}
	c.many[id] = v
}

func newReadOp(m *Manager, tx store.ReadTx) *readOp {
	o := &readOp{m: m, rtx: tx, now: storeNow(tx)}
	m.noteStart(o.now)
	return o
}

// noteStart records now as the Manager's start if it has none yet: the
// time of its first transaction, by the store's clock.
func (m *Manager) noteStart(now time.Time) {
	if m.firstTx.Load() == 0 {
		m.firstTx.CompareAndSwap(0, now.UnixNano())
	}
}

// inGrace reports whether now is within the restart grace (Config.RestartGrace).
func (m *Manager) inGrace(now time.Time) bool {
	return m.cfg.RestartGrace > 0 && now.UnixNano() < m.firstTx.Load()+int64(m.cfg.RestartGrace)
}

// storeNow is the store's time. Times travel with millisecond precision;
// keeping them so in the store makes every comparison agree with what
// clients see.
func storeNow(tx store.ReadTx) time.Time {
	return tx.Now().UTC().Truncate(time.Millisecond)
}

// op is one read-write operation inside a store transaction.
type op struct {
	readOp
	tx    store.Tx
	audit []AuditEntry // written by this operation, published after commit
	wants []wanted     // resolveWanted's buffer
}

// begin makes o a new operation in tx.
func (o *op) begin(m *Manager, tx store.Tx) {
	o.forget()
	o.m, o.rtx, o.tx, o.now = m, tx, tx, storeNow(tx)
	m.noteStart(o.now)
}

// forget drops what o refers to, keeping its buffers unless they grew
// large (a sweep's).
func (o *op) forget() {
	o.audit = reuse(o.audit)
	o.wants = reuse(o.wants)
	o.readOp = readOp{sessions: o.sessions.emptied(), relatedBuf: reuse(o.relatedBuf), collect: o.collect}
	o.tx = nil
}

// keptBuffer bounds the buffers a pooled operation keeps.
const keptBuffer = 16

// reuse returns buf emptied, or nil if it grew past keptBuffer.
func reuse[T any](buf []T) []T {
	clear(buf)
	if cap(buf) > keptBuffer {
		return nil
	}
	return buf[:0]
}

func (o *readOp) session(id string) (store.Session, bool, error) {
	if v, ok := o.sessions.get(id); ok {
		if !v.exists {
			return store.Session{}, false, nil
		}
		return v.s, true, nil
	}
	s, ok, err := o.rtx.Session(id)
	if err != nil {
		return store.Session{}, false, err
	}
	o.sessions.put(id, sessionView{s, ok})
	return s, ok, nil
}

// idle reports whether a live session has passed its idle deadline.
func (o *readOp) idle(s store.Session) bool {
	d := o.idleDeadline(s)
	return !s.Ended() && !d.IsZero() && !d.After(o.now)
}

// idleDeadline is when s ends without further requests (zero: never). A
// session last seen before the Manager started has at least the restart
// grace from the start, or its idle timeout if that is shorter: its
// clients could not heartbeat while the lock service was down. Past the
// grace this changes no answer: both deadlines are behind.
func (o *readOp) idleDeadline(s store.Session) time.Time {
	d := s.IdleDeadline()
	if d.IsZero() || !o.m.inGrace(o.now) {
		return d
	}
	start := time.Unix(0, o.m.firstTx.Load()).UTC()
	if !s.LastSeen.Before(start) {
		return d
	}
	if end := start.Add(min(o.m.cfg.RestartGrace, s.IdleTimeout)); end.After(d) {
		return end
	}
	return d
}

// deadReason says why a lock record no longer counts as held ("" if it
// does): its own expiry, or its session's idle timeout. Expired means free
// at once, whether or not the sweep has removed the record.
func (o *readOp) deadReason(l store.Lock) (LostReason, error) {
	if !l.ExpiresAt.After(o.now) {
		return LostExpired, nil
	}
	s, ok, err := o.session(l.Session)
	if err != nil {
		return "", err
	}
	return o.sessionDead(s, ok), nil
}

// sessionDead says why the locks of a session no longer count as held
// ("" if they do), as deadReason does for a lock not expired itself; ok
// says whether the session exists.
func (o *readOp) sessionDead(s store.Session, ok bool) LostReason {
	if ok && (s.Ended() || o.idle(s)) {
		return LostSessionExpired
	}
	return ""
}

// resolve maps key through aggregates: while some ancestor-or-self of key
// is a member, it is replaced by its root (the longest member wins).
func (o *readOp) resolve(field, key string) (string, error) {
	for range maxAggregateDepth {
		mapped := false
		for p := key; ; {
			root, ok, err := o.rtx.Aggregate(p)
			if err != nil {
				return "", err
			}
			if ok {
				key = root + key[len(p):]
				mapped = true
				break
			}
			i := lastSlash(p)
			if i < 0 {
				break
			}
			p = p[:i]
		}
		if !mapped {
			return key, nil
		}
	}
	return "", invalid(field, "%s: %q resolves through more than %d aggregates", field, key, maxAggregateDepth)
}

const maxAggregateDepth = 32

func lastSlash(s string) int {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '/' {
			return i
		}
	}
	return -1
}

// lostError explains why session does not hold key (token, when non-zero,
// names the grant asked about).
func (o *readOp) lostError(session, key string, token uint64) (*LockLostError, error) {
	lost, err := o.rtx.Lost(session)
	if err != nil {
		return nil, err
	}
	// The record of the grant asked about, else the latest for the key:
	// older reported records of a key are not kept (see drop).
	var found *store.Lost
	for i, l := range slices.Backward(lost) {
		if l.Lock.Key != key {
			continue
		}
		if found == nil || token != 0 && l.Lock.Token == token {
			found = &lost[i]
		}
		if token == 0 || l.Lock.Token == token {
			break
		}
	}
	if l := found; l != nil {
		lk := toLock(l.Lock)
		e := &LockLostError{Reason: LostReason(l.Reason), Lock: &lk, Actor: l.Actor, ForceReason: l.ForceReason}
		e.Message = lostMessage(key, e.Reason, l.Actor, l.ForceReason, l.At, o.now)
		return e, nil
	}
	s, ok, err := o.session(session)
	if err != nil {
		return nil, err
	}
	if ok && s.Ended() {
		r := LostReason(s.EndReason)
		return &LockLostError{Reason: r, Message: lostMessage(key, r, "", "", s.EndedAt, o.now)}, nil
	}
	return &LockLostError{Reason: LostNeverHeld, Message: lostMessage(key, LostNeverHeld, "", "", time.Time{}, o.now)}, nil
}

func lostMessage(key string, r LostReason, actor, why string, at, now time.Time) string {
	switch r {
	case LostExpired:
		return key + " is no longer held: the lock expired at " + clock(at, now)
	case LostReleased:
		return key + " is no longer held: it was released at " + clock(at, now)
	case LostForceReleased:
		msg := key + " is no longer held: an administrator"
		if actor != "" {
			msg += " (" + actor + ")"
		}
		return msg + " released it at " + clock(at, now) + ": " + why
	case LostTakenOver:
		return key + " is no longer held: it was taken over from another tab or device of the same user at " + clock(at, now)
	case LostSessionExpired:
		return key + " is no longer held: the session expired (no heartbeat within its idle timeout) at " + clock(at, now)
	case LostSessionEnded:
		return key + " is no longer held: the session ended at " + clock(at, now)
	default:
		return key + " is not held by this session"
	}
}

// record appends an audit entry for l and queues it for subscribers.
func (o *op) record(ev Event, l store.Lock, actor, reason string) error {
	e := store.AuditEntry{At: o.now, Event: string(ev), Lock: l, Actor: actor, Reason: reason}
	id, err := o.tx.AppendAudit(e)
	if err != nil {
		return err
	}
	e.ID = id
	o.audit = append(o.audit, toAuditEntry(e))
	return nil
}

// drop removes a lock and remembers why, for the holder's next renew,
// verify or heartbeat. Reported losses are not listed by heartbeats again,
// and the store keeps only the latest reported one per session and key, so
// a session that locks and releases the same keys all day stays small.
func (o *op) drop(l store.Lock, why LostReason, ev Event, actor, forceReason string, reported bool) error {
	if err := o.tx.DeleteLock(l.Key, l.Session); err != nil {
		return err
	}
	lost := store.Lost{Lock: l, Reason: string(why), Actor: actor, ForceReason: forceReason, At: o.now, Reported: reported}
	if err := o.tx.PutLost(lost); err != nil {
		return err
	}
	return o.record(ev, l, actor, forceReason)
}

// dropDead removes a lock that is no longer held for reason why: an expired
// lock alone, or the whole idle session it belongs to.
func (o *op) dropDead(l store.Lock, why LostReason) error {
	if _, held, err := o.tx.Lock(l.Key, l.Session); err != nil || !held {
		return err // already dropped with its session
	}
	if why == LostExpired {
		return o.drop(l, LostExpired, EventExpired, "", "", false)
	}
	s, ok, err := o.session(l.Session)
	if err != nil {
		return err
	}
	if !ok || s.Ended() {
		// A lock without a live session: an inconsistency only an older
		// store could leave; treat it as expired.
		return o.drop(l, LostSessionExpired, EventSessionExpired, "", "", true)
	}
	_, err = o.endSession(s, LostSessionExpired)
	return err
}

// endSession releases every lock of s and keeps the ended record, so that
// a late heartbeat learns why.
func (o *op) endSession(s store.Session, why LostReason) ([]store.Lock, error) {
	locks, err := o.tx.SessionLocks(s.ID)
	if err != nil {
		return nil, err
	}
	ev := EventReleased
	if why == LostSessionExpired {
		ev = EventSessionExpired
	}
	released := locks[:0:0]
	for _, l := range locks {
		r, err := o.deadReason(l)
		if err != nil {
			return nil, err
		}
		if r == LostExpired {
			// It ended on its own before the session did.
			if err := o.drop(l, LostExpired, EventExpired, "", "", false); err != nil {
				return nil, err
			}
			continue
		}
		if err := o.drop(l, why, ev, "", "", true); err != nil {
			return nil, err
		}
		released = append(released, l)
	}
	s.EndedAt, s.EndReason = o.now, string(why)
	if err := o.putSession(s); err != nil {
		return nil, err
	}
	return released, nil
}

func (o *op) putSession(s store.Session) error {
	if err := o.tx.PutSession(s); err != nil {
		return err
	}
	o.sessions.put(s.ID, sessionView{s, true})
	return nil
}

// touchSession records the activity of a live session whose record
// changes in nothing else, lazily where the store can (see store.Toucher).
func (o *op) touchSession(s store.Session) error {
	t, ok := o.tx.(store.Toucher)
	if !ok {
		return o.putSession(s)
	}
	if err := t.TouchSession(s); err != nil {
		return err
	}
	o.sessions.put(s.ID, sessionView{s, true})
	return nil
}

// touch records activity of a session and returns it. A live session past
// its idle deadline is ended first (it expired before this request came),
// and an ended one stays ended: only acquire and heartbeat start sessions.
func (o *op) touch(id string) (s store.Session, live bool, err error) {
	s, live, err = o.liveSession(id)
	if err != nil || !live {
		return s, false, err
	}
	s.LastSeen = o.now
	return s, true, o.touchSession(s)
}

// liveSession is touch without the write, for a caller that writes the
// session itself: it ends the session if it is past its idle deadline,
// and reports whether it is live.
func (o *op) liveSession(id string) (s store.Session, live bool, err error) {
	s, ok, err := o.session(id)
	if err != nil || !ok {
		return s, false, err
	}
	if o.idle(s) {
		if _, err := o.endSession(s, LostSessionExpired); err != nil {
			return s, false, err
		}
		s, _, err = o.session(id)
		return s, false, err
	}
	return s, !s.Ended(), nil
}

func toLock(l store.Lock) Lock {
	mode := Exclusive
	if l.Shared {
		mode = Shared
	}
	return Lock{
		Key: l.Key, RequestedKey: l.Key, Mode: mode,
		Owner:      Owner{Session: l.Session, User: l.User, Name: l.Name},
		AcquiredAt: l.AcquiredAt, ExpiresAt: l.ExpiresAt, Token: l.Token, Note: l.Note,
	}
}

func toLocks(ls []store.Lock) []Lock {
	out := make([]Lock, len(ls))
	for i, l := range ls {
		out[i] = toLock(l)
	}
	return out
}

func toAuditEntry(e store.AuditEntry) AuditEntry {
	return AuditEntry{ID: e.ID, At: Time(e.At), Event: Event(e.Event), Lock: toLock(e.Lock), Actor: e.Actor, Reason: e.Reason}
}
