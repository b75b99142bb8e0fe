package holdfast

import (
	"context"
	"encoding/base64"
	"slices"
	"strconv"
	"strings"

	"github.com/holdfast/holdfast/store"
)

// Release releases the session's locks on keys. Keys it does not hold are
// listed in NotHeld; that is not an error.
func (m *Manager) Release(ctx context.Context, req ReleaseRequest) (*ReleaseResult, error) {
	if err := validateSession("session", req.Session); err != nil {
		return nil, err
	}
	if err := validateKeys("keys", req.Keys, true); err != nil {
		return nil, err
	}
	if req.Token != 0 && len(req.Keys) != 1 {
		return nil, invalid("token", "token can be given with one key only")
	}
	r := &releaseOp{req: req}
	if err := m.apply(ctx, "release", scope{keys: req.Keys, session: req.Session}, r); err != nil {
		return nil, err
	}
	return &r.res, nil
}

// releaseOp is a release as an operation (see operation).
type releaseOp struct {
	req ReleaseRequest
	res ReleaseResult
}

func (r *releaseOp) run(o *op) error {
	req, res := &r.req, &r.res
	*res = ReleaseResult{Released: make([]Lock, 0, len(req.Keys)), NotHeld: []string{}}
	if _, _, err := o.touch(req.Session); err != nil {
		return err
	}
	held := make([]store.Lock, 0, 2) // on the stack for one or two keys
	if n := len(req.Keys); n > 2 {
		held = make([]store.Lock, 0, n)
		o.audit = slices.Grow(o.audit, n) // an entry per release
	}
	for _, k := range req.Keys {
		key, err := o.resolve("keys", k)
		if err != nil {
			return err
		}
		l, ok, err := o.liveLock(key, req.Session)
		if err != nil {
			return err
		}
		if !ok || slices.ContainsFunc(held, func(h store.Lock) bool { return h.Key == key }) {
			if !ok {
				res.NotHeld = append(res.NotHeld, k)
			}
			continue
		}
		if req.Token != 0 && l.Token != req.Token {
			return staleToken(l, req.Token)
		}
		held = append(held, l)
		out := toLock(l)
		out.RequestedKey = k
		res.Released = append(res.Released, out)
	}
	for _, l := range held {
		if err := o.drop(l, LostReleased, EventReleased, "", "", true); err != nil {
			return err
		}
	}
	return nil
}

// liveLock returns the session's lock on exactly key if it is still held,
// removing it first if it has expired.
func (o *op) liveLock(key, session string) (store.Lock, bool, error) {
	l, ok, err := o.tx.Lock(key, session)
	if err != nil || !ok {
		return l, false, err
	}
	ok, err = o.stillHeld(l)
	return l, ok, err
}

// stillHeld reports whether l, a record this transaction read, still
// counts as held, removing it if it does not. A caller going through a
// session's locks need not read each again: dropping one of them removes
// no other unless it ends the session, and then every other one counts as
// no longer held.
func (o *op) stillHeld(l store.Lock) (bool, error) {
	why, err := o.deadReason(l)
	if err != nil || why == "" {
		return err == nil, err
	}
	return false, o.dropDead(l, why)
}

func staleToken(current store.Lock, given uint64) error {
	l := toLock(current)
	held, wrong := strconv.FormatUint(l.Token, 10), strconv.FormatUint(given, 10)
	if given < l.Token {
		return &StaleTokenError{Lock: l, Message: l.Key + " is held under a newer grant (token " + held +
			", not " + wrong + "): a write with the old token must not land"}
	}
	// Never a token of this key's current grant: a mistake, not a late write.
	return &StaleTokenError{Lock: l, Message: l.Key + " is held under token " + held + ", not " + wrong +
		": a write with token " + wrong + " must not land"}
}

// Renew moves the expiry of the session's locks (all of them when no keys
// are given) to now + ttl. If any named key is not held, nothing is renewed.
// Renewing all the locks of a session that has ended returns a
// *LockLostError, as its heartbeat does.
func (m *Manager) Renew(ctx context.Context, req RenewRequest) (*RenewResult, error) {
	if err := validateSession("session", req.Session); err != nil {
		return nil, err
	}
	if err := validateKeys("keys", req.Keys, false); err != nil {
		return nil, err
	}
	if req.TTL < 0 {
		return nil, invalid("ttl_seconds", "ttl_seconds must be greater than 0")
	}
	var res *RenewResult
	err := m.update(ctx, "renew", scope{keys: req.Keys, session: req.Session}, func(o *op) error {
		s, _, err := o.touch(req.Session)
		if err != nil {
			return err
		}
		if len(req.Keys) == 0 && s.Ended() {
			// All of an ended session's locks are lost, as its heartbeat
			// says; one never seen (or forgotten) held nothing.
			return o.endedError(s)
		}
		var locks []store.Lock
		if len(req.Keys) == 0 {
			all, err := o.tx.SessionLocks(req.Session)
			if err != nil {
				return err
			}
			for _, l := range all {
				if ok, err := o.stillHeld(l); err != nil {
					return err
				} else if ok {
					locks = append(locks, l)
				}
			}
		}
		requested := make([]string, 0, len(req.Keys))
		for _, k := range req.Keys {
			key, err := o.resolve("keys", k)
			if err != nil {
				return err
			}
			if slices.ContainsFunc(locks, func(l store.Lock) bool { return l.Key == key }) {
				continue
			}
			l, ok, err := o.liveLock(key, req.Session)
			if err != nil {
				return err
			}
			if !ok {
				lost, err := o.lostError(req.Session, key, 0)
				if err != nil {
					return err
				}
				return lost
			}
			locks = append(locks, l)
			requested = append(requested, k)
		}
		res = &RenewResult{Locks: make([]Lock, 0, len(locks))}
		for i, l := range locks {
			l.ExpiresAt = o.now.Add(ttl(req.TTL, o.m.cfg.policy(l.Key)))
			if err := o.tx.PutLock(l); err != nil {
				return err
			}
			if err := o.record(EventRenewed, l, "", ""); err != nil {
				return err
			}
			out := toLock(l)
			if len(requested) == len(locks) {
				out.RequestedKey = requested[i]
			}
			res.Locks = append(res.Locks, out)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// Verify returns the lock when the session holds key under token (any
// token when zero); otherwise a *LockLostError or *StaleTokenError. Call it
// right before a write to a store that cannot check the lock itself.
func (m *Manager) Verify(ctx context.Context, req VerifyRequest) (*VerifyResult, error) {
	if err := validateSession("session", req.Session); err != nil {
		return nil, err
	}
	if err := ValidateKey(req.Key); err != nil {
		return nil, invalid("key", "key: %v", err)
	}
	var res *VerifyResult
	err := m.update(ctx, "verify", scope{keys: []string{req.Key}, session: req.Session}, func(o *op) error {
		if _, _, err := o.touch(req.Session); err != nil {
			return err
		}
		key, err := o.resolve("key", req.Key)
		if err != nil {
			return err
		}
		l, ok, err := o.liveLock(key, req.Session)
		if err != nil {
			return err
		}
		if !ok {
			lost, err := o.lostError(req.Session, key, req.Token)
			if err != nil {
				return err
			}
			return lost
		}
		if req.Token != 0 && l.Token != req.Token {
			return staleToken(l, req.Token)
		}
		out := toLock(l)
		out.RequestedKey = req.Key
		res = &VerifyResult{Lock: out}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

const (
	defaultPageSize = 100
	maxPageSize     = 1000
)

func pageSize(limit int) (int, error) {
	switch {
	case limit == 0:
		return defaultPageSize, nil
	case limit < 0 || limit > maxPageSize:
		return 0, invalid("limit", "limit must be between 1 and %d", maxPageSize)
	default:
		return limit, nil
	}
}

// Locks lists live locks, sorted by key then session.
func (m *Manager) Locks(ctx context.Context, q LockQuery) (*LockPage, error) {
	limit, err := pageSize(q.Limit)
	if err != nil {
		return nil, err
	}
	if q.Key != "" {
		if err := ValidateKey(q.Key); err != nil {
			return nil, invalid("key", "key: %v", err)
		}
	}
	if q.Prefix != "" {
		// A point in the key hierarchy (see UnderPrefix): one that is no
		// key would list nothing, silently.
		if err := ValidateKey(strings.TrimSuffix(q.Prefix, "/")); err != nil {
			return nil, invalid("prefix", "prefix: %v", err)
		}
	}
	afterKey, afterSession, err := decodeLockCursor(q.After)
	if err != nil {
		return nil, err
	}
	var page *LockPage
	err = m.view(ctx, "locks", func(o *readOp) error {
		var found []store.Lock
		if q.Key != "" {
			key, err := o.resolve("key", q.Key)
			if err != nil {
				return err
			}
			if found, err = o.related(key, q, afterKey, afterSession); err != nil {
				return err
			}
		} else {
			if found, err = o.listLocks(store.LockQuery{
				Prefix: q.Prefix, Session: q.Session, User: q.User,
				AfterKey: afterKey, AfterSession: afterSession,
			}, limit+1); err != nil {
				return err
			}
		}
		page = &LockPage{Locks: toLocks(found)}
		if len(page.Locks) > limit {
			page.Locks = page.Locks[:limit]
			last := page.Locks[limit-1]
			next := encodeLockCursor(last.Key, last.Owner.Session)
			page.Next = &next
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return page, nil
}

// listLocks collects up to want live locks, skipping dead records.
func (o *readOp) listLocks(q store.LockQuery, want int) ([]store.Lock, error) {
	prefix := q.Prefix
	if len(prefix) > 1 && prefix[len(prefix)-1] == '/' {
		q.Prefix = prefix[:len(prefix)-1] // the store's prefix is a string prefix
	}
	// The sessions are read from the store, not through o.session: a
	// page of a thousand locks of as many sessions would fill its cache,
	// a map, which was half of what a listing allocated. Locks sorted by
	// key come in runs of one session, which the session read last serves.
	var held struct {
		session string
		dead    LostReason
		read    bool
	}
	var out []store.Lock
	for len(out) < want {
		q.Limit = want - len(out)
		batch, err := o.rtx.Locks(q)
		if err != nil {
			return nil, err
		}
		n := len(batch)
		if n == 0 {
			break
		}
		last := batch[n-1]
		// The batch is ours: the live locks are kept in its place, so
		// that a page allocates no slice of its own, which was half of
		// what a listing allocated.
		live := batch[:0]
		for _, l := range batch {
			if !UnderPrefix(prefix, l.Key) || !l.ExpiresAt.After(o.now) {
				continue
			}
			if !held.read || held.session != l.Session {
				s, ok, err := o.rtx.Session(l.Session)
				if err != nil {
					return nil, err
				}
				held.session, held.dead, held.read = l.Session, o.sessionDead(s, ok), true
			}
			if held.dead == "" {
				live = append(live, l)
			}
		}
		if out == nil {
			out = live
		} else {
			out = append(out, live...)
		}
		if n < q.Limit {
			break
		}
		q.AfterKey, q.AfterSession = last.Key, last.Session
	}
	return out, nil
}

// related returns the live locks that conflict-check against key, filtered
// and sorted like a listing.
func (o *readOp) related(key string, q LockQuery, afterKey, afterSession string) ([]store.Lock, error) {
	related, err := o.relatedLocks(key)
	if err != nil {
		return nil, err
	}
	var out []store.Lock
	for _, l := range related {
		switch {
		case !UnderPrefix(q.Prefix, l.Key),
			q.Session != "" && l.Session != q.Session,
			q.User != "" && l.User != q.User,
			afterKey != "" && (l.Key < afterKey || l.Key == afterKey && l.Session <= afterSession):
			continue
		}
		why, err := o.deadReason(l)
		if err != nil {
			return nil, err
		}
		if why == "" {
			out = append(out, l)
		}
	}
	slices.SortFunc(out, func(a, b store.Lock) int {
		if c := strings.Compare(a.Key, b.Key); c != 0 {
			return c
		}
		return strings.Compare(a.Session, b.Session)
	})
	return out, nil
}

// Cursors are opaque to clients; they carry the last item's sort key.
func encodeLockCursor(key, session string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(key + "\x00" + session))
}

func decodeLockCursor(c string) (key, session string, err error) {
	if c == "" {
		return "", "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return "", "", invalid("after", "after is not a cursor this server returned")
	}
	key, session, ok := strings.Cut(string(b), "\x00")
	if !ok {
		return "", "", invalid("after", "after is not a cursor this server returned")
	}
	return key, session, nil
}
