package holdfast

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/holdfast/holdfast/store"
)

// Acquire locks every key for the owner's session, all or nothing, or
// returns a *LockedError naming every blocked key and every holder.
func (m *Manager) Acquire(ctx context.Context, req AcquireRequest) (*AcquireResult, error) {
	if err := validateAcquire(req); err != nil {
		return nil, err
	}
	a := &acquireOp{req: req}
	if err := m.apply(ctx, "acquire", scope{keys: req.Keys, session: req.Owner.Session}, a); err != nil {
		return nil, err
	}
	return &a.res, nil
}

// acquireOp is an acquire as an operation (see operation).
type acquireOp struct {
	req AcquireRequest
	res AcquireResult
}

func (a *acquireOp) run(o *op) error { return o.acquire(a.req, &a.res) }

func validateAcquire(req AcquireRequest) error {
	if err := validateKeys("keys", req.Keys, true); err != nil {
		return err
	}
	if err := validateSession("owner.session", req.Owner.Session); err != nil {
		return err
	}
	switch {
	case len(req.Owner.Name) > MaxNameBytes:
		return invalid("owner.name", "owner.name is %d bytes, more than %d", len(req.Owner.Name), MaxNameBytes)
	case len(req.Owner.User) > MaxSessionBytes:
		return invalid("owner.user", "owner.user is %d bytes, more than %d", len(req.Owner.User), MaxSessionBytes)
	case len(req.Note) > MaxNoteBytes:
		return invalid("note", "note is %d bytes, more than %d", len(req.Note), MaxNoteBytes)
	case req.Mode != "" && req.Intent != "":
		return invalid("intent", "give mode or intent, not both")
	case req.Mode != "" && req.Mode != Exclusive && req.Mode != Shared:
		return invalid("mode", "mode %q is not exclusive or shared", req.Mode)
	case req.Intent != "" && req.Intent != IntentRead && req.Intent != IntentWrite:
		return invalid("intent", "intent %q is not read or write", req.Intent)
	case req.TTL < 0:
		return invalid("ttl_seconds", "ttl_seconds must be greater than 0")
	case req.IdleTimeout < 0:
		return invalid("idle_timeout_seconds", "idle_timeout_seconds must be greater than 0")
	}
	return nil
}

// wanted is one resolved key of an acquire.
type wanted struct {
	key, requested string
	mode           Mode
	lock           bool // false: a read that takes no lock under its policy
	policy         TypePolicy
	own            *store.Lock // this session's live lock on exactly key
}

// acquire grants req and fills res with the grants.
func (o *op) acquire(req AcquireRequest, res *AcquireResult) error {
	me := req.Owner
	wants, err := o.resolveWanted(req)
	if err != nil {
		return err
	}

	// Find what blocks each key. Records that are no longer held (expired,
	// or of an idle session) block nothing; they are cleaned up if the
	// acquire succeeds.
	var (
		conflicts []Conflict
		dead      []deadLock
		holders   []Lock
	)
	for i := range wants {
		w := &wants[i]
		related, err := o.relatedLocks(w.key)
		if err != nil {
			return err
		}
		var blocking []Lock
		for _, l := range related {
			why, err := o.deadReason(l)
			if err != nil {
				return err
			}
			switch {
			case why != "":
				dead = append(dead, deadLock{l, why})
			case !w.lock:
				holders = append(holders, toLock(l))
			case l.Session == me.Session:
				if l.Key == w.key {
					own := l
					w.own = &own
				}
			case w.mode == Shared && l.Shared:
				// Shared locks do not block each other.
			default:
				blocking = append(blocking, toLock(l))
			}
		}
		if len(blocking) > 0 {
			conflicts = append(conflicts, Conflict{Key: w.key, RequestedKey: w.requested, Holders: blocking})
		}
	}

	var takenOver []Lock
	if len(conflicts) > 0 {
		if !req.Takeover || !sameUser(me.User, conflicts) {
			// A refused acquire takes nothing, but it is the session's
			// activity all the same.
			if _, _, err := o.touch(me.Session); err != nil {
				return err
			}
			return &LockedError{Conflicts: conflicts, Message: lockedMessage(conflicts, o.now)}
		}
		for _, c := range conflicts {
			takenOver = append(takenOver, c.Holders...)
		}
	}
	// An entry per grant and per lock it ends; a refusal needs none.
	o.audit = slices.Grow(o.audit, len(wants)+len(dead)+len(takenOver))

	for _, d := range dedupeDead(dead) {
		if err := o.dropDead(d.lock, d.why); err != nil {
			return err
		}
	}
	for _, h := range dedupeLocks(takenOver) {
		l, ok, err := o.tx.Lock(h.Key, h.Owner.Session)
		if err != nil {
			return err
		}
		if ok {
			if err := o.drop(l, LostTakenOver, EventTakenOver, me.User, "", false); err != nil {
				return err
			}
		}
	}

	sess, err := o.startSession(me, req.IdleTimeout, wants)
	if err != nil {
		return err
	}
	*res = AcquireResult{Locks: make([]Lock, 0, len(wants)), Holders: dedupeLocks(holders)}
	for _, w := range wants {
		if !w.lock {
			continue
		}
		l, err := o.grant(w, req, sess)
		if err != nil {
			return err
		}
		out := toLock(l)
		out.RequestedKey = w.requested
		res.Locks = append(res.Locks, out)
	}
	return nil
}

// resolveWanted resolves keys through aggregates, de-duplicates them and
// sorts them into canonical order, with the mode each key takes, in a
// buffer o keeps.
func (o *op) resolveWanted(req AcquireRequest) ([]wanted, error) {
	wants := slices.Grow(o.wants[:0], len(req.Keys))
	for _, k := range req.Keys {
		key, err := o.resolve("keys", k)
		if err != nil {
			return nil, err
		}
		w := wanted{key: key, requested: k, policy: o.m.cfg.policy(key), lock: true}
		switch {
		case req.Mode != "":
			w.mode = req.Mode
		case req.Intent != "":
			w.mode, w.lock = w.policy.Policy.modeFor(req.Intent)
		default:
			w.mode = Exclusive
		}
		wants = append(wants, w)
	}
	// Stable, so that of two keys resolving alike the first requested is
	// kept: no quadratic search on the way for a request of many keys.
	slices.SortStableFunc(wants, func(a, b wanted) int { return cmp.Compare(a.key, b.key) })
	wants = slices.CompactFunc(wants, func(a, b wanted) bool { return a.key == b.key })
	o.wants = wants
	return wants, nil
}

// sameUser reports whether every holder is the same non-empty user.
func sameUser(user string, conflicts []Conflict) bool {
	if user == "" {
		return false
	}
	for _, c := range conflicts {
		for _, h := range c.Holders {
			if h.Owner.User != user {
				return false
			}
		}
	}
	return true
}

// startSession records the owner's activity, starting the session if it is
// new or has ended. It writes the session once, with everything that
// changes in it.
func (o *op) startSession(me Owner, idle Duration, wants []wanted) (store.Session, error) {
	s, live, err := o.liveSession(me.Session)
	if err != nil {
		return s, err
	}
	if !live {
		s = store.Session{ID: me.Session}
		for _, w := range wants {
			if w.policy.IdleTimeout > 0 && (s.IdleTimeout == 0 || w.policy.IdleTimeout < s.IdleTimeout) {
				s.IdleTimeout = w.policy.IdleTimeout
			}
		}
	}
	s.LastSeen = o.now
	if me.User != "" {
		s.User = me.User
	}
	if me.Name != "" {
		s.Name = me.Name
	}
	if idle > 0 {
		s.IdleTimeout = time.Duration(idle)
	}
	return s, o.putSession(s)
}

// grant creates, extends or upgrades this session's lock on w.key.
func (o *op) grant(w wanted, req AcquireRequest, s store.Session) (store.Lock, error) {
	expires := o.now.Add(ttl(req.TTL, w.policy))
	if w.own != nil {
		l := *w.own
		if l.ExpiresAt.Before(expires) {
			l.ExpiresAt = expires
		}
		if req.Note != "" {
			l.Note = req.Note
		}
		l.User, l.Name = s.User, s.Name
		ev := EventRenewed
		if l.Shared && w.mode == Exclusive {
			// An upgrade is a new grant: writes under the shared lock must
			// be told apart from writes under the exclusive one.
			token, err := o.tx.NextToken()
			if err != nil {
				return l, err
			}
			l.Shared, l.Token, l.AcquiredAt, ev = false, token, o.now, EventAcquired
		}
		if err := o.tx.PutLock(l); err != nil {
			return l, err
		}
		return l, o.record(ev, l, "", "")
	}
	token, err := o.tx.NextToken()
	if err != nil {
		return store.Lock{}, err
	}
	l := store.Lock{
		Key: w.key, Session: s.ID, User: s.User, Name: s.Name, Shared: w.mode == Shared,
		Token: token, AcquiredAt: o.now, ExpiresAt: expires, Note: req.Note,
	}
	if err := o.tx.PutLock(l); err != nil {
		return l, err
	}
	return l, o.record(EventAcquired, l, "", "")
}

// ttl is the requested lifetime capped by the type's maximum, or the type's
// default.
func ttl(requested Duration, p TypePolicy) time.Duration {
	switch d := time.Duration(requested); {
	case d <= 0:
		return p.DefaultTTL
	case d > p.MaxTTL:
		return p.MaxTTL
	default:
		return d
	}
}

type deadLock struct {
	lock store.Lock
	why  LostReason
}

func dedupeDead(ds []deadLock) []deadLock {
	seen := make(map[[2]string]bool, len(ds))
	out := ds[:0]
	for _, d := range ds {
		k := [2]string{d.lock.Key, d.lock.Session}
		if !seen[k] {
			seen[k] = true
			out = append(out, d)
		}
	}
	return out
}

func dedupeLocks(ls []Lock) []Lock {
	if len(ls) < 2 {
		return ls
	}
	seen := make(map[[2]string]bool, len(ls))
	out := ls[:0]
	for _, l := range ls {
		k := [2]string{l.Key, l.Owner.Session}
		if !seen[k] {
			seen[k] = true
			out = append(out, l)
		}
	}
	return out
}
