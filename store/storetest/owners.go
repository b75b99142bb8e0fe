package storetest

import (
	"time"

	"github.com/holdfast/holdfast"
)

var ownerCases = []testCase{
	{"ReentrantKeepsToken", testReentrantKeepsToken},
	{"TakeoverSameUser", testTakeoverSameUser},
	{"TakeoverEverySharedHolder", testTakeoverEverySharedHolder},
	{"TakeoverRefusedOtherUser", testTakeoverRefusedOtherUser},
	{"TakeoverRefusedEmptyUser", testTakeoverRefusedEmptyUser},
	{"TakeoverRefusedMixedHolders", testTakeoverRefusedMixedHolders},
}

func testReentrantKeepsToken(e *env) {
	bob := owner("bob")
	req := exclusive("order/1", bob)
	req.TTL = holdfast.Duration(time.Hour)
	first := e.grant(req)

	e.advance(10 * time.Minute)
	req.TTL = holdfast.Duration(2 * time.Hour)
	later := e.grant(req)
	want := first
	want.ExpiresAt = e.now().Add(2 * time.Hour)
	wantLock(e.t, "re-acquire with a later expiry", later, want)

	e.advance(time.Minute)
	req.TTL = holdfast.Duration(time.Minute)
	again := e.grant(req)
	wantLock(e.t, "re-acquire with an earlier expiry keeps the later one", again, want)
	wantLocks(e.t, "listed once", e.locks(holdfast.LockQuery{Key: "order/1"}), []holdfast.Lock{want})
}

func testTakeoverSameUser(e *env) {
	tab1, tab2 := tab("u-bob", "s-tab1"), tab("u-bob", "s-tab2")
	old := e.grant(exclusive("order/1", tab1))
	e.advance(time.Minute)
	req := exclusive("order/1", tab2)
	req.Takeover = true
	got := e.grant(req)
	want := holdfast.Lock{Key: "order/1", RequestedKey: "order/1", Mode: holdfast.Exclusive, Owner: tab2,
		AcquiredAt: e.now(), ExpiresAt: e.now().Add(builtinTTL), Token: got.Token}
	wantLock(e.t, "takeover grant", got, want)
	if got.Token <= old.Token {
		e.t.Fatalf("takeover token %d is not above the old %d", got.Token, old.Token)
	}
	wantLocks(e.t, "after takeover", e.locks(holdfast.LockQuery{Key: "order/1"}), []holdfast.Lock{got})

	e.wantLostLock("old tab's verify", old, holdfast.LostTakenOver)
	_, err := e.m.Renew(e.t.Context(), holdfast.RenewRequest{Session: "s-tab1", Keys: keys("order/1")})
	e.wantLost("old tab's renew", err, holdfast.LostTakenOver)

	hb := e.heartbeat("s-tab1")
	wantLost(e, "old tab's heartbeat", hb.Lost, []holdfast.LostLock{{Lock: old, Reason: holdfast.LostTakenOver}})
	hb = e.heartbeat("s-tab1")
	wantLost(e, "old tab's second heartbeat", hb.Lost, nil)
	e.wantLostLock("old tab's verify after its heartbeat", old, holdfast.LostTakenOver)
}

func testTakeoverEverySharedHolder(e *env) {
	tab1, tab3 := tab("u-bob", "s-tab1"), tab("u-bob", "s-tab3")
	a := e.grant(shared("page/1", tab1))
	b := e.grant(shared("page/1", tab3))
	req := exclusive("page/1", tab("u-bob", "s-tab2"))
	req.Takeover = true
	got := e.grant(req)
	wantLocks(e.t, "after takeover", e.locks(holdfast.LockQuery{Key: "page/1"}), []holdfast.Lock{got})
	e.wantLostLock("first reader", a, holdfast.LostTakenOver)
	e.wantLostLock("second reader", b, holdfast.LostTakenOver)
}

func testTakeoverRefusedOtherUser(e *env) {
	bob := e.grant(exclusive("order/1", owner("bob")))
	req := exclusive("order/1", owner("carol"))
	req.Takeover = true
	le := e.refused(req)
	wantConflicts(e.t, le.Conflicts, []holdfast.Conflict{{Key: "order/1", RequestedKey: "order/1", Holders: []holdfast.Lock{bob}}})
	e.wantLive("holder after a refused takeover", bob)
}

func testTakeoverRefusedEmptyUser(e *env) {
	anon1 := holdfast.Owner{Session: "s-anon1"}
	anon2 := holdfast.Owner{Session: "s-anon2"}
	held := e.grant(exclusive("order/1", anon1))
	for _, o := range []holdfast.Owner{anon2, tab("u-bob", "s-bob")} {
		req := exclusive("order/1", o)
		req.Takeover = true
		e.refused(req)
	}
	named := e.grant(exclusive("order/2", holdfast.Owner{Session: "s-named", User: "u-bob"}))
	req := exclusive("order/2", anon2)
	req.Takeover = true
	e.refused(req)
	e.wantLive("anonymous holder", held)
	e.wantLive("named holder", named)
}

func testTakeoverRefusedMixedHolders(e *env) {
	mine := e.grant(shared("page/1", tab("u-bob", "s-tab1")))
	carol := e.grant(shared("page/1", owner("carol")))
	req := exclusive("page/1", tab("u-bob", "s-tab2"))
	req.Takeover = true
	le := e.refused(req)
	wantConflicts(e.t, le.Conflicts, []holdfast.Conflict{{Key: "page/1", RequestedKey: "page/1", Holders: []holdfast.Lock{mine, carol}}})
	e.wantLive("own tab after a refused takeover", mine)
	e.wantLive("other user after a refused takeover", carol)
}

// wantLost requires a heartbeat's lost list to be exactly want.
func wantLost(e *env, what string, got, want []holdfast.LostLock) {
	e.t.Helper()
	if len(got) != len(want) {
		e.t.Fatalf("%s: lost %+v, want %+v", what, got, want)
	}
	for i := range want {
		g, w := got[i], want[i]
		wantLock(e.t, what+": lost lock", g.Lock, w.Lock)
		// API.md defines actor and force_reason for force releases only.
		if g.Reason != w.Reason || (w.Reason == holdfast.LostForceReleased && (g.Actor != w.Actor || g.ForceReason != w.ForceReason)) {
			e.t.Fatalf("%s: lost %s reason=%s actor=%q force_reason=%q, want reason=%s actor=%q force_reason=%q",
				what, g.Lock.Key, g.Reason, g.Actor, g.ForceReason, w.Reason, w.Actor, w.ForceReason)
		}
	}
}
