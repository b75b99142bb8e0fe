package storetest

import (
	"errors"
	"slices"

	"github.com/holdfast/holdfast"
)

var hierarchyCases = []testCase{
	{"AncestorBlocksDescendant", testAncestorBlocksDescendant},
	{"DescendantBlocksAncestor", testDescendantBlocksAncestor},
	{"StringPrefixIsNotAncestor", testStringPrefixIsNotAncestor},
	{"SameSessionAncestorAndDescendant", testSameSessionAncestorAndDescendant},
	{"SharedAlongThePath", testSharedAlongThePath},
}

var aggregateCases = []testCase{
	{"MemberLocksRoot", testMemberLocksRoot},
	{"BelowMember", testBelowMember},
	{"Chain", testAggregateChain},
	{"CycleRefused", testAggregateCycleRefused},
	{"LockedMemberRefused", testAggregateLockedMemberRefused},
	{"Remove", testAggregateRemove},
	{"ListByRoot", testAggregateListByRoot},
	{"ReleaseByMember", testReleaseByMember},
}

func testAncestorBlocksDescendant(e *env) {
	bob := e.grant(exclusive("order/42", owner("bob")))
	le := e.refused(exclusive("order/42/line/7", owner("carol")))
	wantConflicts(e.t, le.Conflicts, []holdfast.Conflict{{Key: "order/42/line/7", RequestedKey: "order/42/line/7", Holders: []holdfast.Lock{bob}}})
	le = e.refused(exclusive("order", owner("carol")))
	wantConflicts(e.t, le.Conflicts, []holdfast.Conflict{{Key: "order", RequestedKey: "order", Holders: []holdfast.Lock{bob}}})
}

func testDescendantBlocksAncestor(e *env) {
	bob := e.grant(exclusive("order/42/line/7", owner("bob")))
	le := e.refused(exclusive("order/42", owner("carol")))
	wantConflicts(e.t, le.Conflicts, []holdfast.Conflict{{Key: "order/42", RequestedKey: "order/42", Holders: []holdfast.Lock{bob}}})
	e.grant(exclusive("order/42/line/8", owner("carol")))
}

func testStringPrefixIsNotAncestor(e *env) {
	e.grant(exclusive("order/42", owner("bob")))
	for _, k := range []string{"order/4", "order/420", "order/43", "order/42x/line/7"} {
		e.grant(exclusive(k, owner("carol")))
	}
}

func testSameSessionAncestorAndDescendant(e *env) {
	bob := owner("bob")
	parent := e.grant(exclusive("order/42", bob))
	child := e.grant(exclusive("order/42/line/7", bob))
	res := e.acquire(holdfast.AcquireRequest{Keys: keys("order/43/line/1", "order/43"), Owner: bob})
	if len(res.Locks) != 2 {
		e.t.Fatalf("ancestor and descendant in one request: %s", fmtLocks(res.Locks))
	}
	wantLocks(e.t, "bob's locks", e.locks(holdfast.LockQuery{Session: bob.Session}),
		[]holdfast.Lock{parent, child, res.Locks[0], res.Locks[1]})
}

func testSharedAlongThePath(e *env) {
	bob := e.grant(shared("page/1", owner("bob")))
	carol := e.grant(shared("page/1/section/2", owner("carol")))
	le := e.refused(exclusive("page/1/section/2/para/3", owner("dave")))
	wantConflicts(e.t, le.Conflicts, []holdfast.Conflict{{Key: "page/1/section/2/para/3", RequestedKey: "page/1/section/2/para/3", Holders: []holdfast.Lock{bob, carol}}})
}

func testMemberLocksRoot(e *env) {
	e.setAggregate("asset/9", "lease/3")
	bob := e.grant(exclusive("asset/9", owner("bob")))
	want := holdfast.Lock{Key: "lease/3", RequestedKey: "asset/9", Mode: holdfast.Exclusive, Owner: owner("bob"),
		AcquiredAt: start, ExpiresAt: start.Add(builtinTTL), Token: bob.Token}
	wantLock(e.t, "member grant", bob, want)
	// Read back later (as a holder, in listings, by verify) the lock names
	// only the key it covers: requested_key belongs to the acquire that
	// asked, and the store keeps no other name for a lock.
	bob = readBack(bob)

	le := e.refused(exclusive("lease/3", owner("carol")))
	wantConflicts(e.t, le.Conflicts, []holdfast.Conflict{{Key: "lease/3", RequestedKey: "lease/3", Holders: []holdfast.Lock{bob}}})
	le = e.refused(exclusive("asset/9", owner("carol")))
	wantConflicts(e.t, le.Conflicts, []holdfast.Conflict{{Key: "lease/3", RequestedKey: "asset/9", Holders: []holdfast.Lock{bob}}})
	e.grant(exclusive("asset/90", owner("carol")))
	wantLocks(e.t, "locks on the root", e.locks(holdfast.LockQuery{Key: "lease/3"}), []holdfast.Lock{bob})
	e.wantLive("verify by the root key", bob)
}

func testBelowMember(e *env) {
	e.setAggregate("asset/9", "lease/3")
	bob := e.grant(exclusive("asset/9/part/1", owner("bob")))
	if bob.Key != "lease/3/part/1" || bob.RequestedKey != "asset/9/part/1" {
		e.t.Fatalf("grant below a member: %s, want key lease/3/part/1 requested as asset/9/part/1", fmtLock(bob))
	}
	bob = readBack(bob)
	e.refused(exclusive("lease/3", owner("carol")))
	le := e.refused(exclusive("asset/9", owner("carol")))
	wantConflicts(e.t, le.Conflicts, []holdfast.Conflict{{Key: "lease/3", RequestedKey: "asset/9", Holders: []holdfast.Lock{bob}}})
	e.grant(exclusive("lease/3/part/2", owner("carol")))
}

func testAggregateChain(e *env) {
	e.setAggregate("asset/9", "lease/3")
	e.setAggregate("lease/3", "contract/1")
	bob := e.grant(exclusive("asset/9", owner("bob")))
	if bob.Key != "contract/1" || bob.RequestedKey != "asset/9" {
		e.t.Fatalf("grant through a chain: %s, want key contract/1 requested as asset/9", fmtLock(bob))
	}
	bob = readBack(bob)
	le := e.refused(exclusive("lease/3", owner("carol")))
	wantConflicts(e.t, le.Conflicts, []holdfast.Conflict{{Key: "contract/1", RequestedKey: "lease/3", Holders: []holdfast.Lock{bob}}})
}

func testAggregateCycleRefused(e *env) {
	ctx := e.t.Context()
	e.setAggregate("asset/1", "lease/1")
	_, err := e.m.SetAggregate(ctx, holdfast.Aggregate{Member: "lease/1", Root: "asset/1"})
	e.wantInvalid("two-step cycle", err, "")
	_, err = e.m.SetAggregate(ctx, holdfast.Aggregate{Member: "asset/2", Root: "asset/2"})
	e.wantInvalid("member mapped to itself", err, "")
	e.setAggregate("lease/1", "contract/1")
	_, err = e.m.SetAggregate(ctx, holdfast.Aggregate{Member: "contract/1", Root: "asset/1"})
	e.wantInvalid("three-step cycle", err, "")

	list, err := e.m.Aggregates(ctx, "")
	if err != nil {
		e.t.Fatal(err)
	}
	want := []holdfast.Aggregate{{Member: "asset/1", Root: "lease/1"}, {Member: "lease/1", Root: "contract/1"}}
	if !slices.Equal(list.Aggregates, want) {
		e.t.Fatalf("after refused cycles: %+v, want %+v", list.Aggregates, want)
	}
	if l := e.grant(exclusive("asset/1", owner("bob"))); l.Key != "contract/1" {
		e.t.Fatalf("after refused cycles asset/1 locks %s, want contract/1", l.Key)
	}
}

func testAggregateRemove(e *env) {
	ctx := e.t.Context()
	e.setAggregate("asset/9", "lease/3")
	if err := e.m.RemoveAggregate(ctx, holdfast.RemoveAggregateRequest{Member: "asset/9"}); err != nil {
		e.t.Fatalf("RemoveAggregate: %v", err)
	}
	list, err := e.m.Aggregates(ctx, "")
	if err != nil {
		e.t.Fatal(err)
	}
	if len(list.Aggregates) != 0 {
		e.t.Fatalf("after remove: %+v", list.Aggregates)
	}
	bob := e.grant(exclusive("asset/9", owner("bob")))
	if bob.Key != "asset/9" || bob.RequestedKey != "asset/9" {
		e.t.Fatalf("after remove: %s, want asset/9 itself", fmtLock(bob))
	}
	e.grant(exclusive("lease/3", owner("carol")))
}

func testAggregateListByRoot(e *env) {
	e.setAggregate("asset/9", "lease/3")
	e.setAggregate("asset/10", "lease/3")
	e.setAggregate("asset/11", "lease/4")
	list, err := e.m.Aggregates(e.t.Context(), "lease/3")
	if err != nil {
		e.t.Fatal(err)
	}
	want := []holdfast.Aggregate{{Member: "asset/10", Root: "lease/3"}, {Member: "asset/9", Root: "lease/3"}}
	if !slices.Equal(list.Aggregates, want) {
		e.t.Fatalf("Aggregates(lease/3) = %+v, want %+v", list.Aggregates, want)
	}
	all, err := e.m.Aggregates(e.t.Context(), "")
	if err != nil {
		e.t.Fatal(err)
	}
	want = []holdfast.Aggregate{{Member: "asset/10", Root: "lease/3"}, {Member: "asset/11", Root: "lease/4"}, {Member: "asset/9", Root: "lease/3"}}
	if !slices.Equal(all.Aggregates, want) {
		e.t.Fatalf("Aggregates() = %+v, want %+v", all.Aggregates, want)
	}
}

// Release names keys the way acquire does: the member resolves to the root.
func testReleaseByMember(e *env) {
	e.setAggregate("asset/9", "lease/3")
	bob := e.grant(exclusive("asset/9", owner("bob")))
	res := e.release("s-bob", "asset/9")
	wantLocks(e.t, "released by member", res.Released, []holdfast.Lock{bob})
	if len(res.NotHeld) != 0 {
		e.t.Fatalf("not_held %v", res.NotHeld)
	}
	e.grant(exclusive("lease/3", owner("carol")))
}

// readBack is a grant as later answers show it: under the key it covers.
func readBack(l holdfast.Lock) holdfast.Lock {
	l.RequestedKey = l.Key
	return l
}

// A member that is locked (or covered by a lock) cannot be mapped onto a
// root: another session could then lock the same record through the root.
func testAggregateLockedMemberRefused(e *env) {
	ctx := e.t.Context()
	bob := e.grant(exclusive("asset/9", owner("bob")))
	_, err := e.m.SetAggregate(ctx, holdfast.Aggregate{Member: "asset/9", Root: "lease/3"})
	var le *holdfast.LockedError
	if !errors.As(err, &le) {
		e.t.Fatalf("mapping a locked member: %v, want ErrLocked", err)
	}
	wantConflicts(e.t, le.Conflicts, []holdfast.Conflict{{Key: "asset/9", RequestedKey: "asset/9", Holders: []holdfast.Lock{bob}}})
	carol := e.grant(exclusive("lease/3", owner("carol")))
	if carol.Key != "lease/3" {
		e.t.Fatalf("carol locked %s", carol.Key)
	}
	e.refused(exclusive("asset/9", owner("dave")))
	e.release("s-bob", "asset/9")

	above := e.grant(exclusive("asset", owner("erin")))
	_, err = e.m.SetAggregate(ctx, holdfast.Aggregate{Member: "asset/10", Root: "lease/4"})
	if !errors.As(err, &le) || len(le.Conflicts) != 1 || len(le.Conflicts[0].Holders) != 1 || le.Conflicts[0].Holders[0].Token != above.Token {
		e.t.Fatalf("mapping a member covered by a lock on its ancestor: %v, want ErrLocked naming that lock", err)
	}
	e.release("s-erin", "asset")
	e.setAggregate("asset/9", "lease/3")
	e.refused(exclusive("asset/9", owner("dave")))
}
