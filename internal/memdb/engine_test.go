package memdb

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/holdfast/holdfast/internal/keep"
	"github.com/holdfast/holdfast/store"
)

var t0 = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

func fixedClock() time.Time { return t0 }

func lockOn(key, session string, expiresIn time.Duration) store.Lock {
	return store.Lock{Key: key, Session: session, User: "u-" + session, AcquiredAt: t0, ExpiresAt: t0.Add(expiresIn)}
}

func mustUpdate(t *testing.T, e *Engine, fn func(store.Tx) error) []Change {
	t.Helper()
	var got []Change
	if err := e.Update(fn, func(c []Change) { got = detach(c) }); err != nil {
		t.Fatalf("update: %v", err)
	}
	return got
}

// detach copies a change set out of the memory the engine reuses.
func detach(changes []Change) []Change {
	out := slices.Clone(changes)
	for i, c := range out {
		if c.Lock != nil {
			l := *c.Lock
			out[i].Lock = &l
		}
		if c.Audit != nil {
			a := *c.Audit
			out[i].Audit = &a
		}
		if c.Lost != nil {
			l := *c.Lost
			out[i].Lost = &l
		}
		if c.Session != nil {
			s := *c.Session
			out[i].Session = &s
		}
	}
	return out
}

func putLocks(t *testing.T, e *Engine, locks ...store.Lock) {
	t.Helper()
	mustUpdate(t, e, func(tx store.Tx) error {
		for _, l := range locks {
			if err := tx.PutLock(l); err != nil {
				return err
			}
		}
		return nil
	})
}

func view(t *testing.T, e *Engine, fn func(store.ReadTx) error) {
	t.Helper()
	if err := e.View(fn, nil); err != nil {
		t.Fatalf("view: %v", err)
	}
}

func keysOf(locks []store.Lock) []string {
	var out []string
	for _, l := range locks {
		out = append(out, l.Key+"@"+l.Session)
	}
	return out
}

func TestRelatedFindsExactAncestorsAndDescendantsOnly(t *testing.T) {
	t.Parallel()
	e := New(fixedClock, Options{AuditInMemory: true})
	putLocks(t, e,
		lockOn("order", "a", time.Hour),
		lockOn("order/4", "a", time.Hour),
		lockOn("order/4", "b", time.Hour),
		lockOn("order/42", "a", time.Hour),  // shares a string prefix, not a segment
		lockOn("order/4-x", "a", time.Hour), // sorts inside "order/4…" but is no descendant
		lockOn("order/4/line/7", "c", time.Hour),
		lockOn("order/4/line", "c", time.Hour),
		lockOn("order/40/line/7", "c", time.Hour),
		lockOn("orders/4", "d", time.Hour),
		lockOn("policy/4", "a", time.Hour),
	)
	cases := map[string][]string{
		"order/4":        {"order/4@a", "order/4@b", "order@a", "order/4/line@c", "order/4/line/7@c"},
		"order/4/line/7": {"order/4/line/7@c", "order@a", "order/4@a", "order/4@b", "order/4/line@c"},
		"order/42":       {"order/42@a", "order@a"},
		"order":          {"order@a", "order/4@a", "order/4@b", "order/4-x@a", "order/4/line@c", "order/4/line/7@c", "order/40/line/7@c", "order/42@a"},
		"policy":         {"policy/4@a"},
		"nothing/here":   nil,
	}
	for key, want := range cases {
		var got []store.Lock
		view(t, e, func(tx store.ReadTx) error {
			return tx.Related(key, func(l store.Lock) bool { got = append(got, l); return true })
		})
		if g := keysOf(got); !reflect.DeepEqual(g, want) {
			t.Errorf("Related(%q) = %v, want %v", key, g, want)
		}
	}

	// fn returning false stops the walk at once, in every phase.
	for stopAfter := 1; stopAfter <= 5; stopAfter++ {
		n := 0
		view(t, e, func(tx store.ReadTx) error {
			return tx.Related("order/4", func(store.Lock) bool { n++; return n < stopAfter })
		})
		if n != stopAfter {
			t.Errorf("Related stopped after %d calls, want %d", n, stopAfter)
		}
	}
}

func TestExpiredLocksOldestFirstAndMovedByRenewal(t *testing.T) {
	t.Parallel()
	e := New(fixedClock, Options{AuditInMemory: true})
	putLocks(t, e,
		lockOn("a", "s", 3*time.Minute),
		lockOn("b", "s", 1*time.Minute),
		lockOn("c", "s", 2*time.Minute),
		lockOn("d", "s", 10*time.Minute),
	)
	// Renewing b moves it in the expiry index; the old position must go.
	putLocks(t, e, lockOn("b", "s", 20*time.Minute))
	var got []store.Lock
	view(t, e, func(tx store.ReadTx) (err error) {
		got, err = tx.ExpiredLocks(t0.Add(5*time.Minute), 0)
		return err
	})
	if g, want := keysOf(got), []string{"c@s", "a@s"}; !reflect.DeepEqual(g, want) {
		t.Fatalf("ExpiredLocks = %v, want %v", g, want)
	}
	view(t, e, func(tx store.ReadTx) (err error) {
		got, err = tx.ExpiredLocks(t0.Add(time.Hour), 2)
		return err
	})
	if g, want := keysOf(got), []string{"c@s", "a@s"}; !reflect.DeepEqual(g, want) {
		t.Fatalf("ExpiredLocks limit 2 = %v, want %v", g, want)
	}
	// The boundary is inclusive: expires_at == now is expired.
	view(t, e, func(tx store.ReadTx) (err error) {
		got, err = tx.ExpiredLocks(t0.Add(2*time.Minute), 0)
		return err
	})
	if g, want := keysOf(got), []string{"c@s"}; !reflect.DeepEqual(g, want) {
		t.Fatalf("ExpiredLocks at the boundary = %v, want %v", g, want)
	}
}

// snapshot reads everything the engine holds through its public reads.
type snapshot struct {
	Locks      []store.Lock
	Expired    []store.Lock
	ByS        []store.Lock
	Sessions   []store.Session
	Idle       []store.Session
	Ended      []store.Session
	Aggregates []store.Aggregate
	ByRoot     []store.Aggregate
	Lost       []store.Lost
	LostBefore []store.Lost
	Audit      []store.AuditEntry
	Token      uint64
	AuditID    uint64
}

func takeSnapshot(t *testing.T, e *Engine) snapshot {
	t.Helper()
	var s snapshot
	far := t0.Add(1000 * time.Hour)
	view(t, e, func(tx store.ReadTx) (err error) {
		s.Locks, _ = tx.Locks(store.LockQuery{})
		s.Expired, _ = tx.ExpiredLocks(far, 0)
		s.ByS, _ = tx.SessionLocks("s1")
		s.Sessions, _ = tx.Sessions(store.SessionQuery{})
		s.Idle, _ = tx.IdleSessions(far, 0)
		s.Ended, _ = tx.EndedSessions(far, 0)
		s.Aggregates, _ = tx.Aggregates("")
		s.ByRoot, _ = tx.Aggregates("lease/3")
		s.Lost, _ = tx.Lost("s1")
		s.LostBefore, _ = tx.LostBefore(far, 0)
		s.Audit, _ = tx.Audit(store.AuditQuery{})
		return nil
	})
	s.Token, s.AuditID = e.Counters()
	return s
}

// seed writes one record of every kind and returns the engine.
func seed(t *testing.T) *Engine {
	e := New(fixedClock, Options{AuditInMemory: true})
	mustUpdate(t, e, func(tx store.Tx) error {
		tok, _ := tx.NextToken()
		l := lockOn("order/1", "s1", time.Hour)
		l.Token = tok
		tx.PutLock(l)
		tx.PutLock(lockOn("order/2", "s2", 2*time.Hour))
		tx.PutSession(store.Session{ID: "s1", User: "u", LastSeen: t0, IdleTimeout: time.Minute})
		tx.PutSession(store.Session{ID: "s3", User: "u", LastSeen: t0, EndedAt: t0, EndReason: "session_ended"})
		tx.PutAggregate(store.Aggregate{Member: "asset/9", Root: "lease/3"})
		tx.PutLost(store.Lost{Lock: lockOn("order/9", "s1", time.Hour), Reason: "expired", At: t0})
		tx.AppendAudit(store.AuditEntry{At: t0, Event: "acquired", Lock: l})
		return nil
	})
	return e
}

func TestFailedUpdateRestoresExactly(t *testing.T) {
	t.Parallel()
	e := seed(t)
	before := takeSnapshot(t, e)
	boom := errors.New("boom")
	var committed []Change
	called := false
	err := e.Update(func(tx store.Tx) error {
		tx.NextToken()
		tx.PutLock(lockOn("order/3", "s1", time.Minute))
		tx.PutLock(lockOn("order/1", "s1", 5*time.Hour)) // replace
		tx.DeleteLock("order/2", "s2")
		tx.PutSession(store.Session{ID: "s1", User: "u", LastSeen: t0.Add(time.Hour), IdleTimeout: time.Hour})
		tx.PutSession(store.Session{ID: "s3", User: "u", LastSeen: t0}) // revive
		tx.DeleteSession("s1")
		tx.PutAggregate(store.Aggregate{Member: "asset/9", Root: "lease/4"})
		tx.PutAggregate(store.Aggregate{Member: "asset/10", Root: "lease/3"})
		tx.DeleteLost("s1", "order/9", 0)
		tx.AppendAudit(store.AuditEntry{At: t0, Event: "released"})
		tx.PruneAudit(t0.Add(time.Hour), 0)
		return boom
	}, func(c []Change) { called, committed = true, c })
	if !errors.Is(err, boom) {
		t.Fatalf("Update = %v, want boom", err)
	}
	if !called || committed != nil {
		t.Fatalf("onCommit called=%v with %v, want called with nil", called, committed)
	}
	if after := takeSnapshot(t, e); !reflect.DeepEqual(before, after) {
		t.Fatalf("state changed by a failed update:\nbefore %+v\nafter  %+v", before, after)
	}
}

func TestPanickingUpdateRestores(t *testing.T) {
	t.Parallel()
	e := seed(t)
	before := takeSnapshot(t, e)
	func() {
		defer func() { recover() }()
		e.Update(func(tx store.Tx) error {
			tx.DeleteLock("order/1", "s1")
			tx.NextToken()
			panic("bug")
		}, nil)
	}()
	if after := takeSnapshot(t, e); !reflect.DeepEqual(before, after) {
		t.Fatalf("state changed by a panicking update")
	}
	// The engine is still usable: the write lock was released.
	mustUpdate(t, e, func(tx store.Tx) error { return tx.DeleteLock("order/1", "s1") })
}

func TestChangesReportFinalStateOncePerRecord(t *testing.T) {
	t.Parallel()
	e := seed(t)
	changes := mustUpdate(t, e, func(tx store.Tx) error {
		tx.NextToken()
		tx.NextToken()
		tx.PutLock(lockOn("order/1", "s1", 2*time.Hour))
		tx.PutLock(lockOn("order/1", "s1", 3*time.Hour))
		tx.PutLock(lockOn("tmp", "s1", time.Hour)) // created and deleted: no change
		tx.DeleteLock("tmp", "s1")
		tx.DeleteLock("order/2", "s2")
		tx.DeleteLock("never", "s2")
		tx.DeleteAggregate("asset/9")
		id, _ := tx.AppendAudit(store.AuditEntry{At: t0, Event: "released"})
		if id != 2 {
			t.Errorf("audit id = %d, want 2", id)
		}
		return nil
	})
	var got []string
	for _, c := range changes {
		switch c.Kind {
		case KindLock:
			got = append(got, fmt.Sprintf("lock %s@%s delete=%v exp=+%s", c.Lock.Key, c.Lock.Session, c.Delete, c.Lock.ExpiresAt.Sub(t0)))
		case KindAggregate:
			got = append(got, fmt.Sprintf("agg %s delete=%v", c.Aggregate.Member, c.Delete))
		case KindAudit:
			got = append(got, fmt.Sprintf("audit %d %s", c.Audit.ID, c.Audit.Event))
		case KindCounter:
			got = append(got, fmt.Sprintf("counter %d = %d", c.Counter, c.Value))
		default:
			got = append(got, fmt.Sprintf("unexpected %+v", c))
		}
	}
	want := []string{
		"lock order/1@s1 delete=false exp=+3h0m0s",
		"lock order/2@s2 delete=true exp=+2h0m0s",
		"agg asset/9 delete=true",
		"audit 2 released",
		fmt.Sprintf("counter %d = 3", CounterToken),
		fmt.Sprintf("counter %d = 2", CounterAudit),
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("changes:\n%v\nwant\n%v", got, want)
	}

	// Many touches (past the linear de-duplication) still give one change each.
	changes = mustUpdate(t, e, func(tx store.Tx) error {
		for i := range 50 {
			tx.PutLock(lockOn(fmt.Sprintf("k/%d", i%5), "s", time.Duration(i)*time.Minute))
		}
		return nil
	})
	if len(changes) != 5 {
		t.Fatalf("%d changes for 5 records", len(changes))
	}
	for _, c := range changes {
		if c.Lock.ExpiresAt.Sub(t0) < 45*time.Minute {
			t.Errorf("change for %s is not its final state: %v", c.Lock.Key, c.Lock.ExpiresAt)
		}
	}
}

func TestReadOnlyUpdateCommitsNil(t *testing.T) {
	t.Parallel()
	e := seed(t)
	called := false
	err := e.Update(func(tx store.Tx) error {
		_, _, err := tx.Lock("order/1", "s1")
		return err
	}, func(c []Change) {
		called = true
		if c != nil {
			t.Errorf("read-only commit reported %v", c)
		}
	})
	if err != nil || !called {
		t.Fatalf("Update = %v, onCommit called %v", err, called)
	}
}

func TestLockCursorsAndFilters(t *testing.T) {
	t.Parallel()
	e := New(fixedClock, Options{AuditInMemory: true})
	var all []store.Lock
	for _, k := range []string{"a/1", "a/2", "a/20", "b/1", "b/2"} {
		for _, s := range []string{"s1", "s2"} {
			all = append(all, lockOn(k, s, time.Hour))
		}
	}
	putLocks(t, e, all...)
	page := func(q store.LockQuery) []string {
		var got []store.Lock
		view(t, e, func(tx store.ReadTx) (err error) { got, err = tx.Locks(q); return err })
		return keysOf(got)
	}
	// Walk everything three at a time.
	var walked []string
	q := store.LockQuery{Limit: 3}
	for {
		p := page(q)
		walked = append(walked, p...)
		if len(p) < 3 {
			break
		}
		last := all[len(walked)-1]
		q.AfterKey, q.AfterSession = last.Key, last.Session
	}
	if want := keysOf(all); !reflect.DeepEqual(walked, want) {
		t.Fatalf("paged walk = %v, want %v", walked, want)
	}
	checks := []struct {
		q    store.LockQuery
		want []string
	}{
		{store.LockQuery{Prefix: "a/2"}, []string{"a/2@s1", "a/2@s2", "a/20@s1", "a/20@s2"}},
		{store.LockQuery{Prefix: "a/2", AfterKey: "a/2", AfterSession: "s1"}, []string{"a/2@s2", "a/20@s1", "a/20@s2"}},
		{store.LockQuery{Prefix: "b", AfterKey: "a/9"}, []string{"b/1@s1", "b/1@s2", "b/2@s1", "b/2@s2"}},
		{store.LockQuery{Session: "s2", Prefix: "a/"}, []string{"a/1@s2", "a/2@s2", "a/20@s2"}},
		{store.LockQuery{Session: "s2", AfterKey: "a/20", AfterSession: "s1", Limit: 2}, []string{"a/20@s2", "b/1@s2"}},
		{store.LockQuery{Session: "s1", AfterKey: "a/20", AfterSession: "s1"}, []string{"b/1@s1", "b/2@s1"}},
		{store.LockQuery{User: "u-s1", Prefix: "b/"}, []string{"b/1@s1", "b/2@s1"}},
		{store.LockQuery{User: "u-s2", AfterKey: "a/20", AfterSession: "s2", Limit: 1}, []string{"b/1@s2"}},
		{store.LockQuery{User: "u-s2", Prefix: "a/2", AfterKey: "a/2", AfterSession: "s2"}, []string{"a/20@s2"}},
		{store.LockQuery{User: "u-nobody"}, nil},
		{store.LockQuery{Session: "nobody"}, nil},
	}
	for _, c := range checks {
		if got := page(c.q); !reflect.DeepEqual(got, c.want) {
			t.Errorf("Locks(%+v) = %v, want %v", c.q, got, c.want)
		}
	}
	var bySession []store.Lock
	view(t, e, func(tx store.ReadTx) (err error) { bySession, err = tx.SessionLocks("s2"); return err })
	if got, want := keysOf(bySession), []string{"a/1@s2", "a/2@s2", "a/20@s2", "b/1@s2", "b/2@s2"}; !reflect.DeepEqual(got, want) {
		t.Errorf("SessionLocks = %v, want %v", got, want)
	}
}

// A listing of one user's locks reads the user index, which follows every
// put, replacement (the same session's lock under another user), deletion
// and rollback.
func TestUserIndexFollowsLocks(t *testing.T) {
	t.Parallel()
	e := New(fixedClock, Options{AuditInMemory: true})
	byUser := func(user string) []string {
		var got []store.Lock
		view(t, e, func(tx store.ReadTx) (err error) { got, err = tx.Locks(store.LockQuery{User: user}); return err })
		return keysOf(got)
	}
	check := func(when string, want map[string][]string) {
		t.Helper()
		for user, keys := range want {
			if got := byUser(user); !reflect.DeepEqual(got, keys) {
				t.Errorf("%s: user %s lists %v, want %v", when, user, got, keys)
			}
		}
		n := 0
		for _, keys := range want {
			n += len(keys)
		}
		if e.locksByUser.Len() != n {
			t.Errorf("%s: the user index holds %d locks, want %d", when, e.locksByUser.Len(), n)
		}
	}
	anonymous := lockOn("c/1", "s3", time.Hour)
	anonymous.User = ""
	putLocks(t, e, lockOn("a/1", "s1", time.Hour), lockOn("b/1", "s1", time.Hour), lockOn("a/1", "s2", time.Hour), anonymous)
	check("put", map[string][]string{"u-s1": {"a/1@s1", "b/1@s1"}, "u-s2": {"a/1@s2"}})

	moved := lockOn("b/1", "s1", time.Hour)
	moved.User = "u-s2"
	putLocks(t, e, moved)
	check("replaced under another user", map[string][]string{"u-s1": {"a/1@s1"}, "u-s2": {"a/1@s2", "b/1@s1"}})

	mustUpdate(t, e, func(tx store.Tx) error { return tx.DeleteLock("a/1", "s1") })
	check("deleted", map[string][]string{"u-s1": nil, "u-s2": {"a/1@s2", "b/1@s1"}})

	failed := errors.New("refused")
	err := e.Update(func(tx store.Tx) error {
		tx.PutLock(lockOn("d/1", "s1", time.Hour))
		tx.PutLock(lockOn("b/1", "s1", time.Hour)) // back to u-s1
		tx.DeleteLock("a/1", "s2")
		return failed
	}, nil)
	if err != failed {
		t.Fatalf("update = %v, want its own error", err)
	}
	check("rolled back", map[string][]string{"u-s1": nil, "u-s2": {"a/1@s2", "b/1@s1"}})

	// The listing reads the index: a lock missing from it is not listed.
	e.locksByUser.Delete(e.getLock("a/1", "s2"))
	if got := byUser("u-s2"); !reflect.DeepEqual(got, []string{"b/1@s1"}) {
		t.Fatalf("user u-s2 lists %v with a/1@s2 taken out of the index, want [b/1@s1]: the listing walks the locks", got)
	}
}

// A listing of one user's live sessions reads the user index, which
// follows every session that starts, changes its user, ends, is deleted
// or is rolled back, and which a heartbeat leaves alone.
func TestSessionUserIndexFollowsSessions(t *testing.T) {
	t.Parallel()
	e := New(fixedClock, Options{AuditInMemory: true})
	byUser := func(user string, after string) []string {
		var got []store.Session
		view(t, e, func(tx store.ReadTx) (err error) {
			got, err = tx.Sessions(store.SessionQuery{User: user, After: after})
			return err
		})
		var ids []string
		for _, s := range got {
			ids = append(ids, s.ID)
		}
		return ids
	}
	check := func(when string, want map[string][]string) {
		t.Helper()
		n := 0
		for user, ids := range want {
			n += len(ids)
			if got := byUser(user, ""); !reflect.DeepEqual(got, ids) {
				t.Errorf("%s: user %s lists %v, want %v", when, user, got, ids)
			}
		}
		if e.liveByUser.Len() != n {
			t.Errorf("%s: the user index holds %d sessions, want %d", when, e.liveByUser.Len(), n)
		}
	}
	put := func(ss ...store.Session) {
		t.Helper()
		mustUpdate(t, e, func(tx store.Tx) error {
			for _, s := range ss {
				tx.PutSession(s)
			}
			return nil
		})
	}
	put(store.Session{ID: "a", User: "u1", LastSeen: t0}, store.Session{ID: "b", User: "u1", LastSeen: t0},
		store.Session{ID: "c", User: "u2", LastSeen: t0}, store.Session{ID: "d", LastSeen: t0})
	check("started", map[string][]string{"u1": {"a", "b"}, "u2": {"c"}})
	if got := byUser("u1", "a"); !reflect.DeepEqual(got, []string{"b"}) {
		t.Errorf("user u1 after a lists %v, want [b]", got)
	}

	mustUpdate(t, e, func(tx store.Tx) error {
		return tx.(store.Toucher).TouchSession(store.Session{ID: "a", User: "u1", LastSeen: t0.Add(time.Minute)})
	})
	put(store.Session{ID: "b", User: "u2", LastSeen: t0})
	check("heartbeat and a change of user", map[string][]string{"u1": {"a"}, "u2": {"b", "c"}})

	put(store.Session{ID: "c", User: "u2", LastSeen: t0, EndedAt: t0.Add(time.Minute), EndReason: "session_ended"})
	mustUpdate(t, e, func(tx store.Tx) error { return tx.DeleteSession("a") })
	check("ended and deleted", map[string][]string{"u1": nil, "u2": {"b"}})

	failed := errors.New("refused")
	err := e.Update(func(tx store.Tx) error {
		tx.PutSession(store.Session{ID: "e", User: "u1", LastSeen: t0})
		tx.PutSession(store.Session{ID: "b", User: "u1", LastSeen: t0})
		return failed
	}, nil)
	if err != failed {
		t.Fatalf("update = %v, want its own error", err)
	}
	check("rolled back", map[string][]string{"u1": nil, "u2": {"b"}})

	// The listing reads the index: a session missing from it is not listed.
	e.liveByUser.Delete(userItem{user: "u2", id: "b"})
	if got := byUser("u2", ""); len(got) != 0 {
		t.Fatalf("user u2 lists %v with b taken out of the index, want none: the listing walks the sessions", got)
	}
}

func TestSessionIndexes(t *testing.T) {
	t.Parallel()
	e := New(fixedClock, Options{AuditInMemory: true})
	mustUpdate(t, e, func(tx store.Tx) error {
		tx.PutSession(store.Session{ID: "a", User: "u1", LastSeen: t0, IdleTimeout: 5 * time.Minute})
		tx.PutSession(store.Session{ID: "b", User: "u2", LastSeen: t0, IdleTimeout: time.Minute})
		tx.PutSession(store.Session{ID: "c", User: "u1", LastSeen: t0})
		tx.PutSession(store.Session{ID: "d", User: "u1", LastSeen: t0, EndedAt: t0.Add(time.Minute), EndReason: "session_ended"})
		return nil
	})
	// A heartbeat moves b's deadline; ending a takes it out of the idle and live indexes.
	mustUpdate(t, e, func(tx store.Tx) error {
		tx.PutSession(store.Session{ID: "b", User: "u2", LastSeen: t0.Add(10 * time.Minute), IdleTimeout: time.Minute})
		return tx.PutSession(store.Session{ID: "a", User: "u1", LastSeen: t0, IdleTimeout: 5 * time.Minute, EndedAt: t0, EndReason: "session_expired"})
	})
	ids := func(ss []store.Session) []string {
		var out []string
		for _, s := range ss {
			out = append(out, s.ID)
		}
		return out
	}
	view(t, e, func(tx store.ReadTx) error {
		idle, _ := tx.IdleSessions(t0.Add(10*time.Minute), 0)
		if got := ids(idle); got != nil {
			t.Errorf("IdleSessions(+10m) = %v, want none", got)
		}
		idle, _ = tx.IdleSessions(t0.Add(11*time.Minute), 0)
		if got := ids(idle); !slices.Equal(got, []string{"b"}) {
			t.Errorf("IdleSessions(+11m) = %v, want [b]", got)
		}
		live, _ := tx.Sessions(store.SessionQuery{})
		if got := ids(live); !slices.Equal(got, []string{"b", "c"}) {
			t.Errorf("Sessions = %v, want [b c]", got)
		}
		live, _ = tx.Sessions(store.SessionQuery{After: "b", User: "u1"})
		if got := ids(live); !slices.Equal(got, []string{"c"}) {
			t.Errorf("Sessions(after b, u1) = %v, want [c]", got)
		}
		ended, _ := tx.EndedSessions(t0.Add(time.Minute), 0)
		if got := ids(ended); !slices.Equal(got, []string{"a"}) {
			t.Errorf("EndedSessions(+1m) = %v, want [a] (d ended at +1m, not before)", got)
		}
		s, ok, _ := tx.Session("a")
		if !ok || !s.Ended() {
			t.Errorf("Session(a) = %+v %v, want ended", s, ok)
		}
		return nil
	})
}

func TestAggregatesLostAndAudit(t *testing.T) {
	t.Parallel()
	e := New(fixedClock, Options{AuditInMemory: true})
	mustUpdate(t, e, func(tx store.Tx) error {
		tx.PutAggregate(store.Aggregate{Member: "asset/9", Root: "lease/3"})
		tx.PutAggregate(store.Aggregate{Member: "asset/1", Root: "lease/3"})
		tx.PutAggregate(store.Aggregate{Member: "asset/5", Root: "lease/4"})
		tx.PutAggregate(store.Aggregate{Member: "asset/5", Root: "lease/3"}) // re-pointed
		tx.PutLost(store.Lost{Lock: store.Lock{Key: "k/2", Session: "s", Token: 2}, At: t0.Add(2 * time.Minute)})
		tx.PutLost(store.Lost{Lock: store.Lock{Key: "k/1", Session: "s", Token: 1}, At: t0.Add(3 * time.Minute)})
		tx.PutLost(store.Lost{Lock: store.Lock{Key: "k/1", Session: "t", Token: 3}, At: t0.Add(time.Minute)})
		for i, ev := range []string{"acquired", "released", "acquired", "expired"} {
			key := []string{"order/4", "order/4/line/1", "order/42", "order/4"}[i]
			tx.AppendAudit(store.AuditEntry{At: t0.Add(time.Duration(i) * time.Minute), Event: ev,
				Lock: store.Lock{Key: key, Session: fmt.Sprint("s", i%2), User: "u"}})
		}
		return nil
	})
	view(t, e, func(tx store.ReadTx) error {
		aggs, _ := tx.Aggregates("lease/3")
		if want := []store.Aggregate{{Member: "asset/1", Root: "lease/3"}, {Member: "asset/5", Root: "lease/3"}, {Member: "asset/9", Root: "lease/3"}}; !reflect.DeepEqual(aggs, want) {
			t.Errorf("Aggregates(lease/3) = %v", aggs)
		}
		if aggs, _ := tx.Aggregates("lease/4"); len(aggs) != 0 {
			t.Errorf("Aggregates(lease/4) = %v, want none after re-pointing", aggs)
		}
		lost, _ := tx.Lost("s")
		if len(lost) != 2 || lost[0].Lock.Key != "k/2" || lost[1].Lock.Key != "k/1" {
			t.Errorf("Lost(s) = %v, want oldest first", lost)
		}
		before, _ := tx.LostBefore(t0.Add(3*time.Minute), 0)
		if len(before) != 2 || before[0].Lock.Session != "t" {
			t.Errorf("LostBefore = %v", before)
		}
		audit := func(q store.AuditQuery) (ids []uint64) {
			es, _ := tx.Audit(q)
			for _, e := range es {
				ids = append(ids, e.ID)
			}
			return ids
		}
		for _, c := range []struct {
			q    store.AuditQuery
			want []uint64
		}{
			{store.AuditQuery{}, []uint64{1, 2, 3, 4}},
			{store.AuditQuery{Key: "order/4"}, []uint64{1, 2, 4}},
			{store.AuditQuery{Key: "order/4", After: 1, Limit: 1}, []uint64{2}},
			{store.AuditQuery{Session: "s1"}, []uint64{2, 4}},
			{store.AuditQuery{Event: "acquired"}, []uint64{1, 3}},
			{store.AuditQuery{Since: t0.Add(2 * time.Minute)}, []uint64{3, 4}},
			{store.AuditQuery{User: "nobody"}, nil},
		} {
			if got := audit(c.q); !slices.Equal(got, c.want) {
				t.Errorf("Audit(%+v) = %v, want %v", c.q, got, c.want)
			}
		}
		return nil
	})
	var pruned int
	mustUpdate(t, e, func(tx store.Tx) (err error) { pruned, err = tx.PruneAudit(t0.Add(2*time.Minute), 0); return err })
	if pruned != 2 {
		t.Fatalf("pruned %d, want 2", pruned)
	}
	mustUpdate(t, e, func(tx store.Tx) error {
		id, _ := tx.AppendAudit(store.AuditEntry{At: t0})
		if id != 5 {
			t.Errorf("ID after pruning = %d, want 5", id)
		}
		return nil
	})
}

func TestRestoreRebuildsState(t *testing.T) {
	t.Parallel()
	src := seed(t)
	var log []Change
	src.Update(func(tx store.Tx) error {
		tx.DeleteLock("order/2", "s2")
		tx.NextToken()
		return nil
	}, func(c []Change) { log = append(log, c...) })
	// Replaying a full dump of src into a fresh engine gives the same state.
	dst := New(fixedClock, Options{AuditInMemory: true})
	var dump []Change
	src.locks.Ascend(func(it keyItem) bool {
		l := it.rec.lock()
		dump = append(dump, Change{Kind: KindLock, Lock: &l})
		return true
	})
	for _, r := range src.sessions {
		s := r.session()
		dump = append(dump, Change{Kind: KindSession, Session: &s})
	}
	for m, r := range src.aggRoot {
		dump = append(dump, Change{Kind: KindAggregate, Aggregate: &store.Aggregate{Member: m, Root: r}})
	}
	src.lost.Ascend(func(it lostItem) bool {
		l := it.rec.lost()
		dump = append(dump, Change{Kind: KindLost, Lost: &l})
		return true
	})
	src.audit.Ascend(func(it auditItem) bool { dump = append(dump, Change{Kind: KindAudit, Audit: it.entry}); return true })
	tok, aud := src.Counters()
	dump = append(dump, Change{Kind: KindCounter, Counter: CounterToken, Value: tok}, Change{Kind: KindCounter, Counter: CounterAudit, Value: aud})
	for _, c := range dump {
		dst.Restore(c)
	}
	if a, b := takeSnapshot(t, src), takeSnapshot(t, dst); !reflect.DeepEqual(a, b) {
		t.Fatalf("restored state differs:\n%+v\n%+v", a, b)
	}
	if len(log) != 2 {
		t.Fatalf("change log %v", log)
	}
}

// A transaction bigger than undoCap grows the buffers the next ones reuse.
// They are kept while such transactions keep coming, so that each does not
// grow them again from nothing, and dropped once keep.For small ones have
// followed the last, so that one huge sweep does not pin them.
func TestBigTransactionsKeepTheirBuffers(t *testing.T) {
	e := New(fixedClock, Options{})
	n := 0
	big := func() {
		t.Helper()
		mustUpdate(t, e, func(tx store.Tx) error {
			for range undoCap + 1 {
				n++
				if err := tx.PutLock(lockOn(fmt.Sprintf("order/%d", n), "s-1", time.Hour)); err != nil {
					return err
				}
			}
			return nil
		})
	}
	small := func() {
		t.Helper()
		mustUpdate(t, e, func(tx store.Tx) error { return tx.PutLock(lockOn("order/small", "s-1", time.Hour)) })
	}

	big()
	grown := cap(e.tx.undo)
	if grown <= undoCap {
		t.Fatalf("after a transaction of %d writes the undo log holds %d, want more than undoCap", undoCap+1, grown)
	}
	big()
	if cap(e.tx.undo) < grown {
		t.Fatalf("a second big transaction found the undo log shrunk to %d, want %d kept", cap(e.tx.undo), grown)
	}
	for range keep.For - 1 {
		small()
	}
	if cap(e.tx.undo) < grown {
		t.Fatalf("after %d small transactions the undo log holds %d, want the %d kept until %d", keep.For-1, cap(e.tx.undo), grown, keep.For)
	}
	if e.tx.seen == nil {
		t.Fatal("the map of records a big transaction grew was dropped before the last big transaction's window ended")
	}
	small()
	if c := cap(e.tx.undo); c > undoCap {
		t.Fatalf("after %d small transactions the undo log still holds %d, want it dropped", keep.For, c)
	}
	if e.tx.seen != nil {
		t.Fatalf("after %d small transactions the map of records is still the big transaction's", keep.For)
	}
}
