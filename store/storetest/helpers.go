package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/holdfast/holdfast"
)

// owner is a person editing in one session: session "s-NAME", user
// "u-NAME", shown as NAME.
func owner(name string) holdfast.Owner {
	return holdfast.Owner{Session: "s-" + name, User: "u-" + name, Name: name}
}

// tab is one of a person's sessions (a browser tab or device).
func tab(user, session string) holdfast.Owner {
	return holdfast.Owner{Session: session, User: user, Name: user}
}

func keys(k ...string) []string { return k }

// exclusive and shared build the plain single-key requests most cases use.
func exclusive(key string, o holdfast.Owner) holdfast.AcquireRequest {
	return holdfast.AcquireRequest{Keys: keys(key), Owner: o}
}

func shared(key string, o holdfast.Owner) holdfast.AcquireRequest {
	return holdfast.AcquireRequest{Keys: keys(key), Owner: o, Mode: holdfast.Shared}
}

func (e *env) acquire(req holdfast.AcquireRequest) *holdfast.AcquireResult {
	e.t.Helper()
	res, err := e.m.Acquire(e.t.Context(), req)
	if err != nil {
		e.t.Fatalf("Acquire(%v by %s): %v", req.Keys, req.Owner.Session, err)
	}
	return res
}

// grant acquires and returns the one lock the request must yield.
func (e *env) grant(req holdfast.AcquireRequest) holdfast.Lock {
	e.t.Helper()
	res := e.acquire(req)
	if len(res.Locks) != 1 {
		e.t.Fatalf("Acquire(%v by %s): got %d locks, want 1: %s", req.Keys, req.Owner.Session, len(res.Locks), fmtLocks(res.Locks))
	}
	return res.Locks[0]
}

// refused acquires and requires the refusal 423 locked.
func (e *env) refused(req holdfast.AcquireRequest) *holdfast.LockedError {
	e.t.Helper()
	res, err := e.m.Acquire(e.t.Context(), req)
	if err == nil {
		e.t.Fatalf("Acquire(%v by %s) = %s, want ErrLocked", req.Keys, req.Owner.Session, fmtLocks(res.Locks))
	}
	if !errors.Is(err, holdfast.ErrLocked) {
		e.t.Fatalf("Acquire(%v by %s): error %v, want ErrLocked", req.Keys, req.Owner.Session, err)
	}
	var le *holdfast.LockedError
	if !errors.As(err, &le) {
		e.t.Fatalf("Acquire(%v by %s): error %T is not a *LockedError", req.Keys, req.Owner.Session, err)
	}
	return le
}

// wantInvalid requires err to be ErrInvalid naming field.
func (e *env) wantInvalid(what string, err error, field string) {
	e.t.Helper()
	if !errors.Is(err, holdfast.ErrInvalid) {
		e.t.Fatalf("%s: error %v, want ErrInvalid", what, err)
	}
	var ie *holdfast.InvalidError
	if !errors.As(err, &ie) {
		e.t.Fatalf("%s: error %T is not an *InvalidError", what, err)
	}
	if field != "" && ie.Field != field {
		e.t.Errorf("%s: InvalidError.Field = %q, want %q (message %q)", what, ie.Field, field, ie.Message)
	}
}

// wantLost requires err to be ErrLockLost with reason.
func (e *env) wantLost(what string, err error, reason holdfast.LostReason) *holdfast.LockLostError {
	e.t.Helper()
	if !errors.Is(err, holdfast.ErrLockLost) {
		e.t.Fatalf("%s: error %v, want ErrLockLost (%s)", what, err, reason)
	}
	var le *holdfast.LockLostError
	if !errors.As(err, &le) {
		e.t.Fatalf("%s: error %T is not a *LockLostError", what, err)
	}
	if le.Reason != reason {
		e.t.Fatalf("%s: lost reason %q, want %q (message %q)", what, le.Reason, reason, le.Message)
	}
	return le
}

// wantStale requires err to be ErrStaleToken naming current as the
// current grant.
func (e *env) wantStale(what string, err error, current holdfast.Lock) {
	e.t.Helper()
	if !errors.Is(err, holdfast.ErrStaleToken) {
		e.t.Fatalf("%s: error %v, want ErrStaleToken", what, err)
	}
	var se *holdfast.StaleTokenError
	if !errors.As(err, &se) {
		e.t.Fatalf("%s: error %T is not a *StaleTokenError", what, err)
	}
	wantLock(e.t, what+": current grant", se.Lock, current)
}

func (e *env) release(session string, ks ...string) *holdfast.ReleaseResult {
	e.t.Helper()
	res, err := e.m.Release(e.t.Context(), holdfast.ReleaseRequest{Session: session, Keys: ks})
	if err != nil {
		e.t.Fatalf("Release(%s, %v): %v", session, ks, err)
	}
	return res
}

func (e *env) verify(key, session string, token uint64) (*holdfast.VerifyResult, error) {
	return e.m.Verify(e.t.Context(), holdfast.VerifyRequest{Key: key, Session: session, Token: token})
}

// wantLive requires l to be verified as a live grant.
func (e *env) wantLive(what string, l holdfast.Lock) {
	e.t.Helper()
	res, err := e.verify(l.Key, l.Owner.Session, l.Token)
	if err != nil {
		e.t.Fatalf("%s: Verify(%s, %s, %d): %v", what, l.Key, l.Owner.Session, l.Token, err)
	}
	wantLock(e.t, what, res.Lock, l)
}

// wantLostLock requires the verify of l to report it lost for reason,
// naming l as the lost grant.
func (e *env) wantLostLock(what string, l holdfast.Lock, reason holdfast.LostReason) *holdfast.LockLostError {
	e.t.Helper()
	_, err := e.verify(l.Key, l.Owner.Session, l.Token)
	le := e.wantLost(what, err, reason)
	if le.Lock == nil {
		e.t.Fatalf("%s: LockLostError.Lock is nil, want the lost grant %s", what, fmtLock(l))
	}
	wantLock(e.t, what+": lost grant", *le.Lock, l)
	return le
}

func (e *env) heartbeat(session string) *holdfast.HeartbeatResult {
	e.t.Helper()
	res, err := e.m.Heartbeat(e.t.Context(), holdfast.HeartbeatRequest{Session: session})
	if err != nil {
		e.t.Fatalf("Heartbeat(%s): %v", session, err)
	}
	return res
}

func (e *env) sweep() {
	e.t.Helper()
	if err := e.m.Sweep(e.t.Context()); err != nil {
		e.t.Fatalf("Sweep: %v", err)
	}
}

func (e *env) setAggregate(member, root string) {
	e.t.Helper()
	got, err := e.m.SetAggregate(e.t.Context(), holdfast.Aggregate{Member: member, Root: root})
	if err != nil {
		e.t.Fatalf("SetAggregate(%s → %s): %v", member, root, err)
	}
	if got.Member != member || got.Root != root {
		e.t.Fatalf("SetAggregate(%s → %s) = %+v", member, root, *got)
	}
}

// locks lists every lock q selects, following the cursor through all
// pages.
func (e *env) locks(q holdfast.LockQuery) []holdfast.Lock {
	e.t.Helper()
	var all []holdfast.Lock
	for range 10000 {
		page, err := e.m.Locks(e.t.Context(), q)
		if err != nil {
			e.t.Fatalf("Locks(%+v): %v", q, err)
		}
		all = append(all, page.Locks...)
		if page.Next == nil {
			return all
		}
		if len(page.Locks) == 0 {
			e.t.Fatalf("Locks(%+v): empty page with a next cursor %q", q, *page.Next)
		}
		q.After = *page.Next
	}
	e.t.Fatalf("Locks(%+v): the cursor never ends", q)
	return nil
}

func (e *env) sessions(q holdfast.SessionQuery) []holdfast.SessionInfo {
	e.t.Helper()
	var all []holdfast.SessionInfo
	for range 10000 {
		page, err := e.m.Sessions(e.t.Context(), q)
		if err != nil {
			e.t.Fatalf("Sessions(%+v): %v", q, err)
		}
		all = append(all, page.Sessions...)
		if page.Next == nil {
			return all
		}
		if len(page.Sessions) == 0 {
			e.t.Fatalf("Sessions(%+v): empty page with a next cursor %q", q, *page.Next)
		}
		q.After = *page.Next
	}
	e.t.Fatalf("Sessions(%+v): the cursor never ends", q)
	return nil
}

func (e *env) audit(q holdfast.AuditQuery) []holdfast.AuditEntry {
	e.t.Helper()
	var all []holdfast.AuditEntry
	for range 10000 {
		page, err := e.m.Audit(e.t.Context(), q)
		if err != nil {
			e.t.Fatalf("Audit(%+v): %v", q, err)
		}
		all = append(all, page.Entries...)
		if page.Next == nil {
			return all
		}
		if len(page.Entries) == 0 {
			e.t.Fatalf("Audit(%+v): empty page with a next cursor %q", q, *page.Next)
		}
		q.After = *page.Next
	}
	e.t.Fatalf("Audit(%+v): the cursor never ends", q)
	return nil
}

// session returns the live session id as Sessions lists it.
func (e *env) session(id string) holdfast.SessionInfo {
	e.t.Helper()
	got := e.sessions(holdfast.SessionQuery{Session: id})
	if len(got) != 1 || got[0].ID != id {
		e.t.Fatalf("Sessions(session=%s) = %+v, want that one session", id, got)
	}
	return got[0]
}

// normLock makes locks comparable: times in UTC without a monotonic
// reading, so equal instants compare equal whatever location a store
// returns them in.
func normLock(l holdfast.Lock) holdfast.Lock {
	l.AcquiredAt = l.AcquiredAt.UTC()
	l.ExpiresAt = l.ExpiresAt.UTC()
	return l
}

func fmtTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

func fmtLock(l holdfast.Lock) string {
	s := fmt.Sprintf("{%s requested=%s %s owner=%s/%s/%q acquired=%s expires=%s token=%d",
		l.Key, l.RequestedKey, l.Mode, l.Owner.Session, l.Owner.User, l.Owner.Name,
		fmtTime(l.AcquiredAt), fmtTime(l.ExpiresAt), l.Token)
	if l.Note != "" {
		s += fmt.Sprintf(" note=%q", l.Note)
	}
	return s + "}"
}

func fmtLocks(ls []holdfast.Lock) string {
	parts := make([]string, len(ls))
	for i, l := range ls {
		parts[i] = fmtLock(l)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// wantLock requires got to be exactly want, field by field.
func wantLock(t testingT, what string, got, want holdfast.Lock) {
	t.Helper()
	if !reflect.DeepEqual(normLock(got), normLock(want)) {
		t.Fatalf("%s:\n got  %s\n want %s", what, fmtLock(got), fmtLock(want))
	}
}

// wantLocks requires got to be exactly want, in order. Nil and empty are
// the same list.
func wantLocks(t testingT, what string, got, want []holdfast.Lock) {
	t.Helper()
	same := len(got) == len(want)
	for i := 0; same && i < len(got); i++ {
		same = reflect.DeepEqual(normLock(got[i]), normLock(want[i]))
	}
	if !same {
		t.Fatalf("%s:\n got  %s\n want %s", what, fmtLocks(got), fmtLocks(want))
	}
}

// byKeySession sorts locks the way listings are sorted.
func byKeySession(ls []holdfast.Lock) []holdfast.Lock {
	out := append([]holdfast.Lock(nil), ls...)
	sort.Slice(out, func(i, j int) bool {
		if out[i].Key != out[j].Key {
			return out[i].Key < out[j].Key
		}
		return out[i].Owner.Session < out[j].Owner.Session
	})
	return out
}

// wantConflicts requires a refusal to name exactly these blocked keys, in
// order, each with exactly these holders (in any order: API.md does not
// order holders).
func wantConflicts(t testingT, got, want []holdfast.Conflict) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("conflicts: got %d %+v, want %d %+v", len(got), got, len(want), want)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Key != w.Key || g.RequestedKey != w.RequestedKey {
			t.Fatalf("conflict %d: got key %s (requested %s), want key %s (requested %s)", i, g.Key, g.RequestedKey, w.Key, w.RequestedKey)
		}
		wantLocks(t, fmt.Sprintf("conflict %d (%s): holders", i, w.Key), byKeySession(g.Holders), byKeySession(w.Holders))
	}
}

// wantTokensIncrease requires every token to be greater than the one
// before it.
func wantTokensIncrease(t testingT, what string, tokens []uint64) {
	t.Helper()
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Fatalf("%s: token %d after %d (all: %v), want strictly increasing", what, tokens[i], tokens[i-1], tokens)
		}
	}
}

// testingT is the part of testing.TB the assertions use, so that they work
// in tests and benchmarks alike.
type testingT interface {
	Helper()
	Fatalf(format string, args ...any)
}
