package histcheck

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/holdfast/holdfast"
)

// state is what the model knows of one family: the live locks, sorted by
// key then session, the highest token issued on each key, and the store's
// time (Unix milliseconds; 0 while the history has no Tick and expiry is
// not modelled). It is never changed in place.
type state struct {
	locks []Grant
	// issued holds the highest token issued on each key, sorted by key.
	// Tokens only grow among related keys (a key, its ancestors, its
	// descendants): that orders every write made under a lock after the
	// writes made under the locks it conflicts with. Grants of unrelated
	// keys may overlap, and a store that runs them side by side (PostgreSQL)
	// may make the one with the higher token visible first.
	issued []keyToken
	now    int64
	// sessions are the sessions seen, sorted by id.
	sessions []session
}

// session is what the model knows of a session: whether it has ended,
// the losses its next heartbeat must report, and (while the clock is
// modelled) its idle timeout and last activity, in milliseconds.
type session struct {
	id       string
	ended    bool
	pending  []Loss
	idle     int64
	lastSeen int64
	// unsure is set when the session ended by its idle timeout: the
	// store decides lazily, at a moment the model does not see, whether
	// locks that expired around then count as expired (reported by the
	// next heartbeat) or as lost with the session (not reported), so the
	// next heartbeat's losses are not checked.
	unsure bool
}

func (st state) session(id string) (session, bool) {
	i, ok := slices.BinarySearchFunc(st.sessions, id, func(s session, id string) int { return strings.Compare(s.id, id) })
	if !ok {
		return session{id: id}, false
	}
	return st.sessions[i], true
}

// withSession returns st with s replacing (or adding) its session.
func (st state) withSession(s session) state {
	i, ok := slices.BinarySearchFunc(st.sessions, s.id, func(s session, id string) int { return strings.Compare(s.id, id) })
	st.sessions = slices.Clone(st.sessions)
	if ok {
		st.sessions[i] = s
	} else {
		st.sessions = slices.Insert(st.sessions, i, s)
	}
	return st
}

// lose queues a loss for the next heartbeat of each lock's session.
func (st state) lose(locks []Grant, reason string) state {
	for _, g := range locks {
		s, _ := st.session(g.Session)
		s.pending = append(slices.Clone(s.pending), Loss{Key: g.Key, Token: g.Token, Reason: reason})
		slices.SortFunc(s.pending, compareLosses)
		st = st.withSession(s)
	}
	return st
}

// started is the session after an acquire or heartbeat that succeeded: live
// (started again if it had ended, with no idle timeout unless asked for),
// active now.
func (st state) started(id string, idle time.Duration) state {
	s, ok := st.session(id)
	if !ok || s.ended {
		s.ended, s.idle = false, 0
	}
	if idle > 0 {
		s.idle = idle.Milliseconds()
	}
	s.lastSeen = st.now
	return st.withSession(s)
}

// touch records activity of a live session: every request naming it counts,
// refused or not.
func (st state) touch(id string) state {
	s, ok := st.session(id)
	if !ok || s.ended || st.now == 0 || s.lastSeen == st.now {
		return st
	}
	s.lastSeen = st.now
	return st.withSession(s)
}

// idleEnd ends every live session whose idle deadline is at or before now,
// with all its locks; the store does not report those losses.
func (st state) idleEnd(now int64) state {
	for _, s := range st.sessions {
		if s.ended || s.idle == 0 || s.lastSeen+s.idle > now {
			continue
		}
		st = remove(st, func(g Grant) bool { return g.Session == s.id })
		s.ended, s.unsure = true, true
		st = st.withSession(s)
	}
	return st
}

// heldBy counts a session's locks.
func (st state) heldBy(id string) int {
	n := 0
	for _, g := range st.locks {
		if g.Session == id {
			n++
		}
	}
	return n
}

// expiry is when a lock asked for with ttl at st.now ends, or 0 when the
// clock is not modelled.
func (st state) expiry(ttl time.Duration) int64 {
	if st.now == 0 {
		return 0
	}
	return st.now + ttl.Milliseconds()
}

// sameExpiry reports whether an answer's expiry agrees with the model's.
func (st state) sameExpiry(model, seen int64) bool {
	return st.now == 0 || model == seen
}

func (s state) find(key, session string) (int, bool) {
	return slices.BinarySearchFunc(s.locks, Grant{Key: key, Session: session}, compareGrants)
}

type keyToken struct {
	key   string
	token uint64
}

// highestRelated is the highest token issued on key or a key related to
// it; a new grant of key must be above it.
func (s state) highestRelated(key string) uint64 {
	var top uint64
	for _, kt := range s.issued {
		if related(kt.key, key) {
			top = max(top, kt.token)
		}
	}
	return top
}

// issue records token as issued on key.
func (s state) issue(key string, token uint64) state {
	i, ok := slices.BinarySearchFunc(s.issued, key, func(kt keyToken, key string) int { return strings.Compare(kt.key, key) })
	s.issued = slices.Clone(s.issued)
	if !ok {
		s.issued = slices.Insert(s.issued, i, keyToken{key, token})
	} else {
		s.issued[i].token = max(s.issued[i].token, token)
	}
	return s
}

// related reports whether locks on a and b conflict-check: equal keys, or
// one an ancestor of the other.
func related(a, b string) bool { return holdfast.Covers(a, b) || holdfast.Covers(b, a) }

// model is the lock semantics as a porcupine model, split by family. It is
// nondeterministic only for unknown outcomes: such an operation may or may
// not have happened.
var model = porcupine.NondeterministicModel{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byFamily := map[string][]porcupine.Operation{}
		var order []string
		for _, op := range history {
			f := op.Input.(Input).Family
			if _, ok := byFamily[f]; !ok {
				order = append(order, f)
			}
			byFamily[f] = append(byFamily[f], op)
		}
		out := make([][]porcupine.Operation, 0, len(order))
		for _, f := range order {
			out = append(out, byFamily[f])
		}
		return out
	},
	Init: func() []any { return []any{state{}} },
	Step: func(st, in, out any) []any {
		return step(st.(state), in.(Input), out.(Output))
	},
	Equal: func(a, b any) bool {
		x, y := a.(state), b.(state)
		return x.now == y.now && slices.Equal(x.locks, y.locks) && slices.Equal(x.issued, y.issued) &&
			slices.EqualFunc(x.sessions, y.sessions, func(a, b session) bool {
				return a.id == b.id && a.ended == b.ended && slices.Equal(a.pending, b.pending) &&
					a.idle == b.idle && a.lastSeen == b.lastSeen && a.unsure == b.unsure
			})
	},
	Hash: func(st any) uint64 {
		h := fnv.New64a()
		h.Write([]byte(describeState(st.(state))))
		return h.Sum64()
	},
	DescribeOperation: func(in, out any) string { return describeOp(in.(Input), out.(Output)) },
	DescribeState:     func(st any) string { return describeState(st.(state)) },
}

// step returns every state the family can be in after the operation, or
// none when the answer is impossible from st.
func step(st state, in Input, out Output) []any {
	if out.Outcome == Failed {
		return nil
	}
	if in.Kind == Tick {
		// The clock only moves forward; what it passes is free at once.
		if in.Now < st.now {
			return nil
		}
		var expired []Grant
		for _, g := range st.locks {
			if g.Expires <= in.Now {
				expired = append(expired, g)
			}
		}
		next := remove(st, func(g Grant) bool { return g.Expires <= in.Now }).lose(expired, "expired").idleEnd(in.Now)
		next.now = in.Now
		return []any{next}
	}
	// Every request naming a session is activity of it, whatever the
	// answer; acquire, heartbeat and end record theirs themselves.
	touches := in.Kind == Release || in.Kind == Renew || in.Kind == Verify
	if out.Outcome == Unknown {
		// It either did not happen, or happened with an answer we did not
		// see.
		next := []any{st}
		after, ok := apply(st, in)
		if touches {
			after, ok = after.touch(in.Session), true
		}
		if ok {
			next = append(next, after)
		}
		return next
	}
	next, ok := check(st, in, out)
	if !ok {
		return nil
	}
	if touches {
		next = next.touch(in.Session)
	}
	return []any{next}
}

// apply is the effect of a successful operation whose answer is unknown;
// new tokens stay unknown (0).
func apply(st state, in Input) (state, bool) {
	switch in.Kind {
	case Acquire:
		blockers := blocking(st, in)
		if len(blockers) > 0 && !takesOver(in, blockers) {
			return st.touch(in.Session), true
		}
		next, _, ok := grant(st, in, blockers, nil)
		return next, ok
	case Release:
		return release(st, in.Session, in.Keys, in.Token)
	case ForceRelease:
		return forceRelease(st, in.Keys), true
	case EndSession:
		return endSession(st, in.Session), true
	case Heartbeat:
		s, _ := st.session(in.Session)
		if s.ended {
			return st, false
		}
		s.pending, s.unsure = nil, false
		return st.withSession(s).started(in.Session, in.IdleTimeout), true
	case Renew:
		return renew(st, in)
	}
	return st, false
}

// renew sets each named lock's expiry to now + ttl; false if one is not
// held.
func renew(st state, in Input) (state, bool) {
	locks := slices.Clone(st.locks)
	for _, k := range in.Keys {
		i, ok := st.find(k, in.Session)
		if !ok {
			return st, false
		}
		locks[i].Expires = st.expiry(in.TTL)
	}
	st.locks = locks
	return st, true
}

// check returns the state after the operation when out is a possible
// answer to in from st.
func check(st state, in Input, out Output) (state, bool) {
	switch in.Kind {
	case Acquire:
		blockers := blocking(st, in)
		if len(blockers) > 0 && !takesOver(in, blockers) {
			if out.Outcome != Locked {
				return st, false
			}
			next, ok := st.reveal(blockers, out.Grants)
			return next.touch(in.Session), ok
		}
		if out.Outcome != OK {
			return st, false
		}
		next, want, ok := grant(st, in, blockers, out.Grants)
		if !ok || len(want) != len(out.Grants) {
			return st, false
		}
		return next, true

	case Release:
		var held []Grant
		var notHeld []string
		for _, k := range in.Keys {
			if i, ok := st.find(k, in.Session); ok {
				held = append(held, st.locks[i])
			} else {
				notHeld = append(notHeld, k)
			}
		}
		if in.Token != 0 && len(held) == 1 && held[0].Token != in.Token {
			// A known other token must be refused; an unknown one may be
			// either, and the answer tells which.
			if out.Outcome == Stale && len(out.Grants) == 1 && out.Grants[0].Token != in.Token {
				return st.reveal(held, out.Grants)
			}
			if held[0].Token != 0 {
				return st, false
			}
			held[0].Token = in.Token
		}
		if out.Outcome != OK || !slices.Equal(sorted(notHeld), out.NotHeld) {
			return st, false
		}
		next, ok := st.reveal(held, out.Grants)
		if !ok {
			return st, false
		}
		return remove(next, func(g Grant) bool { return g.Session == in.Session && slices.Contains(in.Keys, g.Key) }), true

	case Renew:
		for _, k := range in.Keys {
			if _, ok := st.find(k, in.Session); !ok {
				return st, out.Outcome == Lost
			}
		}
		if out.Outcome != OK {
			return st, false
		}
		next, _ := renew(st, in)
		var want []Grant
		for _, k := range in.Keys {
			i, _ := next.find(k, in.Session)
			want = append(want, next.locks[i])
		}
		return next.reveal(want, out.Grants)

	case Verify:
		i, ok := st.find(in.Keys[0], in.Session)
		if !ok {
			return st, out.Outcome == Lost
		}
		g := st.locks[i]
		switch {
		case out.Outcome == OK && (in.Token == 0 || g.Token == 0 || g.Token == in.Token):
			if in.Token != 0 && len(out.Grants) == 1 && out.Grants[0].Token != in.Token {
				return st, false
			}
			return st.reveal([]Grant{g}, out.Grants)
		case out.Outcome == Stale && in.Token != 0 && g.Token != in.Token &&
			len(out.Grants) == 1 && out.Grants[0].Token != in.Token:
			return st.reveal([]Grant{g}, out.Grants)
		}
		return st, false

	case Holders:
		if out.Outcome != OK {
			return st, false
		}
		var want []Grant
		for _, g := range st.locks {
			if related(g.Key, in.Keys[0]) {
				want = append(want, g)
			}
		}
		return st.reveal(want, out.Grants)

	case ForceRelease:
		if out.Outcome != OK {
			return st, false
		}
		var want []Grant
		for _, g := range st.locks {
			if slices.Contains(in.Keys, g.Key) {
				want = append(want, g)
			}
		}
		next, ok := st.reveal(want, out.Grants)
		return forceRelease(next, in.Keys), ok

	case EndSession:
		if out.Outcome != OK {
			return st, false
		}
		var want []Grant
		for _, g := range st.locks {
			if g.Session == in.Session {
				want = append(want, g)
			}
		}
		next, ok := st.reveal(want, out.Grants)
		return endSession(next, in.Session), ok

	case Heartbeat:
		s, _ := st.session(in.Session)
		if s.ended {
			return st, out.Outcome == Lost
		}
		if out.Outcome != OK || out.Held != st.heldBy(in.Session) || !s.unsure && !sameLosses(s.pending, out.Losses) {
			return st, false
		}
		s.pending, s.unsure = nil, false
		return st.withSession(s).started(in.Session, in.IdleTimeout), true
	}
	return st, false
}

// forceRelease ends every lock on keys; their holders learn it at their
// next heartbeat.
func forceRelease(st state, keys []string) state {
	var gone []Grant
	for _, g := range st.locks {
		if slices.Contains(keys, g.Key) {
			gone = append(gone, g)
		}
	}
	return remove(st, func(g Grant) bool { return slices.Contains(keys, g.Key) }).lose(gone, "force_released")
}

// endSession releases the session's locks and ends it if it is live.
func endSession(st state, id string) state {
	st = remove(st, func(g Grant) bool { return g.Session == id })
	if s, ok := st.session(id); ok && !s.ended {
		s.ended = true
		st = st.withSession(s)
	}
	return st
}

// sameLosses reports whether a heartbeat's losses are the pending ones;
// a pending loss whose token the model never learned matches any token.
func sameLosses(pending, seen []Loss) bool {
	if len(pending) != len(seen) {
		return false
	}
	used := make([]bool, len(pending))
	match := func(s Loss, exact bool) bool {
		for i, p := range pending {
			if !used[i] && p.Key == s.Key && p.Reason == s.Reason && (p.Token == s.Token || !exact && p.Token == 0) {
				used[i] = true
				return true
			}
		}
		return false
	}
	var loose []Loss
	for _, s := range seen {
		if !match(s, true) {
			loose = append(loose, s)
		}
	}
	for _, s := range loose {
		if !match(s, false) {
			return false
		}
	}
	return true
}

// blocking returns the other sessions' locks that conflict with the
// acquire, sorted and without duplicates.
func blocking(st state, in Input) []Grant {
	var out []Grant
	for _, g := range st.locks {
		if g.Session == in.Session || (in.Shared && g.Shared) || slices.Contains(out, g) {
			continue
		}
		if slices.ContainsFunc(in.Keys, func(k string) bool { return related(g.Key, k) }) {
			out = append(out, g)
		}
	}
	return out
}

// takesOver reports whether a takeover acquire ends every blocker: all are
// the requester's own (non-empty) user.
func takesOver(in Input, blockers []Grant) bool {
	if !in.Takeover || in.User == "" {
		return false
	}
	for _, b := range blockers {
		if b.User != in.User {
			return false
		}
	}
	return true
}

// grant applies a successful acquire: blockers (taken over) end, each key
// gets a new lock with a new token, or keeps the session's lock and its
// token, or (shared to exclusive) is upgraded with a new token. With seen
// set, the answer's grants must match and their tokens fill in the new
// ones; want is the grants the answer must list.
func grant(st state, in Input, blockers []Grant, seen []Grant) (next state, want []Grant, ok bool) {
	locks := slices.DeleteFunc(slices.Clone(st.locks), func(g Grant) bool { return slices.Contains(blockers, g) })
	keys := sorted(in.Keys)
	keys = slices.Compact(keys)
	tokens := st // the tokens issued, with this acquire's
	for _, k := range keys {
		i := slices.IndexFunc(locks, func(g Grant) bool { return g.Key == k && g.Session == in.Session })
		var g Grant
		isNew := true
		if i >= 0 {
			g = locks[i]
			isNew = g.Shared && !in.Shared
			g.Shared = g.Shared && in.Shared
			g.Expires = max(g.Expires, st.expiry(in.TTL))
			locks = slices.Delete(locks, i, i+1)
		} else {
			g = Grant{Key: k, Session: in.Session, User: in.User, Shared: in.Shared, Expires: st.expiry(in.TTL)}
		}
		if isNew {
			g.Token = 0
		}
		if seen != nil {
			j := slices.IndexFunc(seen, func(s Grant) bool { return s.Key == k })
			if j < 0 {
				return st, nil, false
			}
			s := seen[j]
			switch {
			case s.Session != g.Session || s.Shared != g.Shared || s.User != g.User || !st.sameExpiry(g.Expires, s.Expires):
				return st, nil, false
			case isNew && s.Token <= tokens.highestRelated(k):
				return st, nil, false // tokens only grow
			case !isNew && g.Token != 0 && s.Token != g.Token:
				return st, nil, false // re-entrant: the token is kept
			}
			g.Token = s.Token
			tokens = tokens.issue(k, s.Token)
		}
		want = append(want, g)
		locks = append(locks, g)
	}
	if seen != nil && !tokensUnique(locks) {
		return st, nil, false
	}
	slices.SortFunc(locks, compareGrants)
	next = st
	next.locks, next.issued = locks, tokens.issued
	return next.lose(blockers, "taken_over").started(in.Session, in.IdleTimeout), want, true
}

// release removes the session's locks on keys; with token set (one key),
// only when it is that grant.
func release(st state, session string, keys []string, token uint64) (state, bool) {
	if token != 0 && len(keys) == 1 {
		if i, ok := st.find(keys[0], session); ok && st.locks[i].Token != 0 && st.locks[i].Token != token {
			return st, false
		}
	}
	return remove(st, func(g Grant) bool { return g.Session == session && slices.Contains(keys, g.Key) }), true
}

func remove(st state, drop func(Grant) bool) state {
	st.locks = slices.DeleteFunc(slices.Clone(st.locks), drop)
	return st
}

// reveal checks that the answer lists exactly the grants want (the
// model's view of them) and learns their unknown tokens from it.
func (st state) reveal(want, seen []Grant) (state, bool) {
	want = slices.Clone(want)
	slices.SortFunc(want, compareGrants)
	if len(want) != len(seen) {
		return st, false
	}
	learned, tokens := false, st
	for i, w := range want {
		s := seen[i]
		if w.Key != s.Key || w.Session != s.Session || w.Shared != s.Shared || w.User != s.User || !st.sameExpiry(w.Expires, s.Expires) {
			return st, false
		}
		switch {
		case w.Token == s.Token:
		case w.Token == 0 && s.Token > 0:
			learned, tokens = true, tokens.issue(s.Key, s.Token)
		default:
			return st, false
		}
	}
	if !learned {
		return st, true
	}
	locks := slices.Clone(st.locks)
	for _, s := range seen {
		if i, ok := st.find(s.Key, s.Session); ok && locks[i].Token == 0 {
			locks[i].Token = s.Token
		}
	}
	if !tokensUnique(locks) {
		return st, false
	}
	st.locks, st.issued = locks, tokens.issued
	return st, true
}

// tokensUnique reports whether no two grants share a known token.
func tokensUnique(locks []Grant) bool {
	seen := make(map[uint64]bool, len(locks))
	for _, g := range locks {
		if g.Token == 0 {
			continue
		}
		if seen[g.Token] {
			return false
		}
		seen[g.Token] = true
	}
	return true
}

func describeGrant(g Grant) string {
	mode := "x"
	if g.Shared {
		mode = "s"
	}
	tok := "?"
	if g.Token != 0 {
		tok = strconv.FormatUint(g.Token, 10)
	}
	if g.Expires != 0 {
		return fmt.Sprintf("%s@%s/%s#%s<%s", g.Key, g.Session, mode, tok, time.UnixMilli(g.Expires).UTC().Format("15:04:05.000"))
	}
	return fmt.Sprintf("%s@%s/%s#%s", g.Key, g.Session, mode, tok)
}

func describeGrants(gs []Grant) string {
	parts := make([]string, len(gs))
	for i, g := range gs {
		parts[i] = describeGrant(g)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func describeState(st state) string {
	d := describeGrants(st.locks) + " issued"
	for _, kt := range st.issued {
		d += fmt.Sprintf(" %s#%d", kt.key, kt.token)
	}
	for _, s := range st.sessions {
		if s.ended {
			d += " " + s.id + ":ended"
		}
		if s.idle != 0 {
			d += fmt.Sprintf(" %s:idle%d@%d", s.id, s.idle, s.lastSeen)
		}
		if s.unsure {
			d += " " + s.id + ":unsure"
		}
		for _, l := range s.pending {
			d += fmt.Sprintf(" %s:lost(%s#%d %s)", s.id, l.Key, l.Token, l.Reason)
		}
	}
	if st.now != 0 {
		d += " at " + time.UnixMilli(st.now).UTC().Format("15:04:05.000")
	}
	return d
}

func describeOp(in Input, out Output) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", in.Kind, strings.Join(in.Keys, ","))
	if in.Session != "" {
		fmt.Fprintf(&b, " by %s", in.Session)
	}
	if in.Shared {
		b.WriteString(" shared")
	}
	if in.Takeover {
		b.WriteString(" takeover")
	}
	if in.Token != 0 {
		fmt.Fprintf(&b, " token %d", in.Token)
	}
	if in.Kind == Tick {
		fmt.Fprintf(&b, "to %s", time.UnixMilli(in.Now).UTC().Format("15:04:05.000"))
	}
	fmt.Fprintf(&b, " → %s %s", out.Outcome, describeGrants(out.Grants))
	if in.Kind == Heartbeat && out.Outcome == OK {
		fmt.Fprintf(&b, " holds %d, lost %v", out.Held, out.Losses)
	}
	if len(out.NotHeld) > 0 {
		fmt.Fprintf(&b, " not held %v", out.NotHeld)
	}
	if out.Err != "" {
		b.WriteString(" " + out.Err)
	}
	return b.String()
}
