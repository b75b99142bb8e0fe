package storetest

import (
	"fmt"
	"strings"

	"github.com/holdfast/holdfast"
)

var multiKeyCases = []testCase{
	{"SortedDeduplicated", testMultiKeySortedDeduplicated},
	{"ResolvedThenDeduplicated", testMultiKeyResolvedThenDeduplicated},
	{"AllOrNothing", testMultiKeyAllOrNothing},
	{"EveryConflictEveryHolder", testEveryConflictEveryHolder},
	{"RefusalMessage", testRefusalMessage},
}

// Keys are granted in canonical order, each with its own new token, so the
// tokens of one request grow along the sorted keys.
func testMultiKeySortedDeduplicated(e *env) {
	bob := owner("bob")
	res := e.acquire(holdfast.AcquireRequest{Keys: keys("order/3", "order/1", "order/2", "order/1", "order/3"), Owner: bob})
	if len(res.Locks) != 3 {
		e.t.Fatalf("got %s, want three locks", fmtLocks(res.Locks))
	}
	for i, k := range []string{"order/1", "order/2", "order/3"} {
		want := holdfast.Lock{Key: k, RequestedKey: k, Mode: holdfast.Exclusive, Owner: bob,
			AcquiredAt: start, ExpiresAt: start.Add(builtinTTL), Token: res.Locks[i].Token}
		wantLock(e.t, "lock "+k, res.Locks[i], want)
	}
	wantTokensIncrease(e.t, "tokens along the sorted keys", []uint64{res.Locks[0].Token, res.Locks[1].Token, res.Locks[2].Token})
	wantLocks(e.t, "listing", e.locks(holdfast.LockQuery{Session: bob.Session}), res.Locks)
}

// Two names of one record (a member and its root) take one lock.
func testMultiKeyResolvedThenDeduplicated(e *env) {
	e.setAggregate("asset/9", "lease/3")
	res := e.acquire(holdfast.AcquireRequest{Keys: keys("asset/9", "lease/3"), Owner: owner("bob")})
	if len(res.Locks) != 1 || res.Locks[0].Key != "lease/3" || res.Locks[0].RequestedKey != "asset/9" {
		e.t.Fatalf("member and root together: %s, want one lock on lease/3 requested as asset/9, the first name", fmtLocks(res.Locks))
	}
	e.release(res.Locks[0].Owner.Session, "lease/3")
	// Among many keys too: the first name given is kept, whatever order
	// the rest come in.
	many := []string{"asset/9"}
	for i := 59; i >= 0; i-- {
		many = append(many, fmt.Sprintf("order/%02d", i))
	}
	res = e.acquire(holdfast.AcquireRequest{Keys: append(many, "lease/3"), Owner: owner("bob")})
	for _, l := range res.Locks {
		if l.Key == "lease/3" && l.RequestedKey != "asset/9" {
			e.t.Fatalf("among 62 keys, lease/3 was requested as %s, want asset/9, the first name", l.RequestedKey)
		}
	}
	if len(res.Locks) != 61 {
		e.t.Fatalf("62 names of 61 records took %d locks", len(res.Locks))
	}
}

func testMultiKeyAllOrNothing(e *env) {
	carol := e.grant(exclusive("order/2", owner("carol")))
	le := e.refused(holdfast.AcquireRequest{Keys: keys("order/1", "order/2", "order/3"), Owner: owner("bob")})
	wantConflicts(e.t, le.Conflicts, []holdfast.Conflict{{Key: "order/2", RequestedKey: "order/2", Holders: []holdfast.Lock{carol}}})
	if got := e.locks(holdfast.LockQuery{Session: "s-bob"}); len(got) != 0 {
		e.t.Fatalf("a refused acquire left %s", fmtLocks(got))
	}
	res := e.acquire(holdfast.AcquireRequest{Keys: keys("order/1", "order/3"), Owner: owner("dave")})
	if len(res.Locks) != 2 {
		e.t.Fatalf("dave got %s", fmtLocks(res.Locks))
	}
	if s := e.sessions(holdfast.SessionQuery{Session: "s-bob"}); len(s) == 1 && s[0].Locks != 0 {
		e.t.Fatalf("refused session counts %d locks", s[0].Locks)
	}
}

func testEveryConflictEveryHolder(e *env) {
	bob := e.grant(shared("page/5", owner("bob")))
	carol := e.grant(shared("page/5", owner("carol")))
	dave := e.grant(exclusive("page/6", owner("dave")))
	erin := e.grant(exclusive("page/8/x", owner("erin")))
	le := e.refused(holdfast.AcquireRequest{Keys: keys("page/8", "page/7", "page/6", "page/5"), Owner: owner("frank")})
	wantConflicts(e.t, le.Conflicts, []holdfast.Conflict{
		{Key: "page/5", RequestedKey: "page/5", Holders: []holdfast.Lock{bob, carol}},
		{Key: "page/6", RequestedKey: "page/6", Holders: []holdfast.Lock{dave}},
		{Key: "page/8", RequestedKey: "page/8", Holders: []holdfast.Lock{erin}},
	})
	if got := e.locks(holdfast.LockQuery{Session: "s-frank"}); len(got) != 0 {
		e.t.Fatalf("a refused acquire left %s", fmtLocks(got))
	}
}

func testRefusalMessage(e *env) {
	e.grant(exclusive("policy/12345", owner("Bob Smith")))
	le := e.refused(exclusive("policy/12345", owner("Alice")))
	for _, want := range []string{"policy/12345", "Bob Smith", "10:47 UTC", "12:47 UTC"} {
		if !strings.Contains(le.Message, want) || !strings.Contains(le.Error(), want) {
			e.t.Errorf("refusal %q does not mention %q", le.Message, want)
		}
	}
}
