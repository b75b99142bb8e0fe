package storetest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/holdfast/holdfast"
)

var listingCases = []testCase{
	{"ByKeyIsConflictSet", testLocksByKey},
	{"ByPrefix", testLocksByPrefix},
	{"BySessionAndUser", testLocksBySessionAndUser},
	{"SortedByKeyThenSession", testLocksSorted},
	{"Pagination", testLocksPagination},
	{"ExpiredNotListed", testExpiredNotListed},
	{"ExpiredSkippedAcrossPages", testExpiredSkippedAcrossPages},
	{"Sessions", testSessionsListing},
}

func testLocksByKey(e *env) {
	bob := owner("bob")
	parent := e.grant(exclusive("order/42", bob))
	child := e.grant(exclusive("order/42/line/7", bob))
	sibling := e.grant(exclusive("order/42/line/8", bob))
	e.grant(exclusive("order/4", owner("carol")))
	e.grant(exclusive("order/420", owner("carol")))
	e.grant(exclusive("order/43/line/7", owner("carol")))

	wantLocks(e.t, "key order/42/line/7", e.locks(holdfast.LockQuery{Key: "order/42/line/7"}), []holdfast.Lock{parent, child})
	wantLocks(e.t, "key order/42", e.locks(holdfast.LockQuery{Key: "order/42"}), []holdfast.Lock{parent, child, sibling})
	wantLocks(e.t, "key order/42/line", e.locks(holdfast.LockQuery{Key: "order/42/line"}), []holdfast.Lock{parent, child, sibling})
	if got := e.locks(holdfast.LockQuery{Key: "order"}); len(got) != 6 {
		e.t.Fatalf("key order: %s, want all six", fmtLocks(got))
	}
	if got := e.locks(holdfast.LockQuery{Key: "order/5"}); len(got) != 0 {
		e.t.Fatalf("key order/5: %s, want none", fmtLocks(got))
	}
}

// Only hierarchical prefixes are checked: whether prefix order/42 also
// lists order/420 is left open by API.md.
func testLocksByPrefix(e *env) {
	a := e.grant(exclusive("order/42", owner("bob")))
	b := e.grant(exclusive("order/42/line/7", owner("bob")))
	e.grant(exclusive("order/43", owner("carol")))
	e.grant(exclusive("order/4", owner("carol")))
	p := e.grant(exclusive("policy/1", owner("carol")))
	wantLocks(e.t, "prefix order/42", e.locks(holdfast.LockQuery{Prefix: "order/42"}), []holdfast.Lock{a, b})
	wantLocks(e.t, "prefix policy", e.locks(holdfast.LockQuery{Prefix: "policy"}), []holdfast.Lock{p})
	if got := e.locks(holdfast.LockQuery{}); len(got) != 5 {
		e.t.Fatalf("no filter: %s, want all five", fmtLocks(got))
	}
}

func testLocksBySessionAndUser(e *env) {
	t1 := e.grant(exclusive("order/1", tab("u-bob", "s-tab1")))
	t2 := e.grant(exclusive("order/2", tab("u-bob", "s-tab2")))
	t1b := e.grant(exclusive("order/3", tab("u-bob", "s-tab1")))
	e.grant(exclusive("order/4", owner("carol")))
	wantLocks(e.t, "session s-tab1", e.locks(holdfast.LockQuery{Session: "s-tab1"}), []holdfast.Lock{t1, t1b})
	wantLocks(e.t, "user u-bob", e.locks(holdfast.LockQuery{User: "u-bob"}), []holdfast.Lock{t1, t2, t1b})
	wantLocks(e.t, "user and session", e.locks(holdfast.LockQuery{User: "u-bob", Session: "s-tab2"}), []holdfast.Lock{t2})
	if got := e.locks(holdfast.LockQuery{User: "u-nobody"}); len(got) != 0 {
		e.t.Fatalf("unknown user: %s", fmtLocks(got))
	}
}

func testLocksSorted(e *env) {
	c := e.grant(shared("page/1", owner("carol")))
	a := e.grant(shared("page/1", owner("alice")))
	b := e.grant(shared("page/1", owner("bob")))
	z := e.grant(exclusive("page/0/z", owner("zed")))
	d := e.grant(exclusive("order/9", owner("dave")))
	wantLocks(e.t, "all locks", e.locks(holdfast.LockQuery{}), []holdfast.Lock{d, z, a, b, c})
}

func testLocksPagination(e *env) {
	var want []holdfast.Lock
	for _, name := range []string{"alice", "bob", "carol"} {
		want = append(want, e.grant(shared("page/1", owner(name))))
	}
	want = append(want, e.grant(exclusive("page/2", owner("dave"))), e.grant(exclusive("page/3", owner("erin"))))
	var got []holdfast.Lock
	q := holdfast.LockQuery{Prefix: "page", Limit: 2}
	for pages := 1; ; pages++ {
		page, err := e.m.Locks(e.t.Context(), q)
		if err != nil {
			e.t.Fatal(err)
		}
		if len(page.Locks) != min(2, len(want)-len(got)) {
			e.t.Fatalf("page %d: %s", pages, fmtLocks(page.Locks))
		}
		got = append(got, page.Locks...)
		if page.Next == nil {
			break
		}
		if pages > 3 {
			e.t.Fatalf("more than three pages of two for five locks")
		}
		q.After = *page.Next
	}
	wantLocks(e.t, "pages", got, want)

	// API.md: limit defaults to 100.
	many := make([]string, 150)
	for i := range many {
		many[i] = fmt.Sprintf("order/%03d", i)
	}
	e.acquire(holdfast.AcquireRequest{Keys: many, Owner: owner("frank")})
	page, err := e.m.Locks(e.t.Context(), holdfast.LockQuery{Prefix: "order"})
	if err != nil {
		e.t.Fatal(err)
	}
	if len(page.Locks) != 100 || page.Next == nil || page.Locks[99].Key != "order/099" {
		e.t.Fatalf("no limit: %d locks, next %v; want the first 100 and a cursor", len(page.Locks), page.Next)
	}
}

// An expired lock is free (API.md: "free to any other session at once"),
// so listings, which people read to learn who holds what, leave it out
// before any sweep runs; so are the locks of a session past its idle
// timeout.
func testExpiredNotListed(e *env) {
	req := exclusive("order/1", owner("bob"))
	req.TTL = holdfast.Duration(time.Minute)
	e.grant(req)
	e.idleAcquire("order/2", owner("carol"))
	dave := e.grant(exclusive("order/3", owner("dave")))
	e.advance(idle + time.Second)
	wantLocks(e.t, "all locks", e.locks(holdfast.LockQuery{}), []holdfast.Lock{dave})
	wantLocks(e.t, "key order", e.locks(holdfast.LockQuery{Key: "order"}), []holdfast.Lock{dave})
	if got := e.locks(holdfast.LockQuery{Session: "s-bob"}); len(got) != 0 {
		e.t.Fatalf("session s-bob: %s", fmtLocks(got))
	}
	if got := e.sessions(holdfast.SessionQuery{Session: "s-carol"}); len(got) != 0 {
		e.t.Fatalf("idle session listed: %+v", got)
	}
}

// A page of live locks is filled past expired records that the store
// still returns: the listing reads on until it has a page, and its
// cursor resumes after what it read, not what it kept.
func testExpiredSkippedAcrossPages(e *env) {
	var live []holdfast.Lock
	for i, expires := range []bool{true, true, false, true, true, false, false, true} {
		req := exclusive(fmt.Sprintf("skip/%d", i), owner(fmt.Sprintf("o%d", i)))
		if expires {
			req.TTL = holdfast.Duration(time.Minute)
			e.grant(req)
			continue
		}
		live = append(live, e.grant(req))
	}
	e.advance(2 * time.Minute)
	page, err := e.m.Locks(e.t.Context(), holdfast.LockQuery{Prefix: "skip", Limit: 2})
	if err != nil {
		e.t.Fatal(err)
	}
	wantLocks(e.t, "first page", page.Locks, live[:2])
	if page.Next == nil {
		e.t.Fatal("first page: no cursor, with a live lock left")
	}
	wantLocks(e.t, "all pages", e.locks(holdfast.LockQuery{Prefix: "skip", Limit: 2}), live)
}

func testSessionsListing(e *env) {
	e.grant(exclusive("order/1", tab("u-bob", "s-b1")))
	e.grant(exclusive("order/2", tab("u-bob", "s-b1")))
	brief := exclusive("order/6", tab("u-bob", "s-b1"))
	brief.TTL = holdfast.Duration(30 * time.Second)
	e.grant(brief) // expired by the listing: not counted
	edge := exclusive("order/7", tab("u-bob", "s-b1"))
	edge.TTL = holdfast.Duration(time.Minute)
	e.grant(edge) // expires the instant of the listing: not counted either
	e.advance(time.Minute)
	e.idleAcquire("order/3", tab("u-bob", "s-b2"))
	e.grant(exclusive("order/4", owner("carol")))
	e.heartbeat("s-a")
	e.grant(exclusive("order/5", owner("dave")))
	if _, err := e.m.EndSession(e.t.Context(), holdfast.EndSessionRequest{Session: "s-dave"}); err != nil {
		e.t.Fatal(err)
	}

	ids := func(ss []holdfast.SessionInfo) []string {
		out := make([]string, len(ss))
		for i, s := range ss {
			out[i] = s.ID
		}
		return out
	}
	all := e.sessions(holdfast.SessionQuery{})
	if got := ids(all); !slices.Equal(got, []string{"s-a", "s-b1", "s-b2", "s-carol"}) {
		e.t.Fatalf("sessions: %v", got)
	}
	expires := holdfast.Time(e.now().Add(idle))
	wantInfo := []holdfast.SessionInfo{
		{ID: "s-a", LastSeen: holdfast.Time(e.now())},
		{ID: "s-b1", User: "u-bob", Name: "u-bob", LastSeen: holdfast.Time(start), Locks: 2},
		{ID: "s-b2", User: "u-bob", Name: "u-bob", LastSeen: holdfast.Time(e.now()), IdleTimeout: holdfast.Duration(idle), ExpiresAt: &expires, Locks: 1},
		{ID: "s-carol", User: "u-carol", Name: "carol", LastSeen: holdfast.Time(e.now()), Locks: 1},
	}
	for i, w := range wantInfo {
		if !sameSession(all[i], w) {
			e.t.Fatalf("session %d: %+v, want %+v", i, all[i], w)
		}
	}
	if got := ids(e.sessions(holdfast.SessionQuery{User: "u-bob"})); !slices.Equal(got, []string{"s-b1", "s-b2"}) {
		e.t.Fatalf("user u-bob: %v", got)
	}
	page, err := e.m.Sessions(e.t.Context(), holdfast.SessionQuery{Limit: 3})
	if err != nil {
		e.t.Fatal(err)
	}
	if got := ids(page.Sessions); !slices.Equal(got, []string{"s-a", "s-b1", "s-b2"}) || page.Next == nil {
		e.t.Fatalf("first page of 3: %v next %v", got, page.Next)
	}
	page, err = e.m.Sessions(e.t.Context(), holdfast.SessionQuery{Limit: 3, After: *page.Next})
	if err != nil {
		e.t.Fatal(err)
	}
	if got := ids(page.Sessions); !slices.Equal(got, []string{"s-carol"}) || page.Next != nil {
		e.t.Fatalf("second page of 3: %v next %v", got, page.Next)
	}

	// In a batch the listing runs in the batch's transaction, and counts
	// the locks the batch has granted before it.
	var (
		inBatch  *holdfast.SessionPage
		batchErr error
	)
	err = e.m.Batch(e.t.Context(), func(ctx context.Context) {
		// Every call is made even after one fails (as on a store that
		// reads ahead, whose first run answers none), so that a store
		// learns of all of them.
		_, acquireErr := e.m.Acquire(ctx, exclusive("order/8", owner("carol")))
		_, releaseErr := e.m.Release(ctx, holdfast.ReleaseRequest{Keys: []string{"order/1"}, Session: "s-b1"})
		var listErr error
		inBatch, listErr = e.m.Sessions(ctx, holdfast.SessionQuery{})
		batchErr = errors.Join(acquireErr, releaseErr, listErr)
	})
	if err == nil {
		err = batchErr
	}
	if err != nil {
		e.t.Fatal(err)
	}
	held := map[string]int{}
	for _, s := range inBatch.Sessions {
		held[s.ID] = s.Locks
	}
	if want := map[string]int{"s-a": 0, "s-b1": 1, "s-b2": 1, "s-carol": 2}; !maps.Equal(held, want) {
		e.t.Fatalf("locks held, listed in a batch after granting order/8 to carol and releasing bob's order/1: %v, want %v", held, want)
	}
}
