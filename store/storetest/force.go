package storetest

import (
	"time"

	"github.com/holdfast/holdfast"
)

var forceCases = []testCase{
	{"ReasonRequired", testForceReasonRequired},
	{"ByKeys", testForceByKeys},
	{"BySession", testForceBySession},
	{"ByKeysAndSession", testForceByKeysAndSession},
	{"HolderIsTold", testForceHolderIsTold},
}

func (e *env) forceRelease(req holdfast.ForceReleaseRequest) []holdfast.Lock {
	e.t.Helper()
	res, err := e.m.ForceRelease(e.t.Context(), req)
	if err != nil {
		e.t.Fatalf("ForceRelease(%+v): %v", req, err)
	}
	return res.Released
}

func testForceReasonRequired(e *env) {
	bob := e.grant(exclusive("order/1", owner("bob")))
	_, err := e.m.ForceRelease(e.t.Context(), holdfast.ForceReleaseRequest{Keys: keys("order/1"), Actor: "alice"})
	e.wantInvalid("force release without a reason", err, "reason")
	_, err = e.m.ForceRelease(e.t.Context(), holdfast.ForceReleaseRequest{Reason: "cleanup", Actor: "alice"})
	e.wantInvalid("force release of nothing", err, "")
	e.wantLive("after refused force releases", bob)
}

func testForceByKeys(e *env) {
	bob := e.grant(shared("page/1", owner("bob")))
	carol := e.grant(shared("page/1", owner("carol")))
	dave := e.grant(exclusive("page/2", owner("dave")))
	got := e.forceRelease(holdfast.ForceReleaseRequest{Keys: keys("page/1"), Reason: "stuck", Actor: "alice"})
	wantLocks(e.t, "force released", byKeySession(got), []holdfast.Lock{bob, carol})
	wantLocks(e.t, "left", e.locks(holdfast.LockQuery{Prefix: "page"}), []holdfast.Lock{dave})
	e.grant(exclusive("page/1", owner("erin")))
}

func testForceBySession(e *env) {
	res := e.acquire(holdfast.AcquireRequest{Keys: keys("order/1", "order/2"), Owner: owner("bob")})
	carol := e.grant(exclusive("order/3", owner("carol")))
	got := e.forceRelease(holdfast.ForceReleaseRequest{Session: "s-bob", Reason: "Bob is on leave", Actor: "alice"})
	wantLocks(e.t, "force released", byKeySession(got), res.Locks)
	wantLocks(e.t, "left", e.locks(holdfast.LockQuery{Prefix: "order"}), []holdfast.Lock{carol})
}

// Keys and session together select the session's locks on those keys:
// each narrows what the admin releases, as filters do everywhere else.
func testForceByKeysAndSession(e *env) {
	bob1 := e.grant(shared("page/1", owner("bob")))
	carol := e.grant(shared("page/1", owner("carol")))
	bob2 := e.grant(exclusive("page/2", owner("bob")))
	got := e.forceRelease(holdfast.ForceReleaseRequest{Keys: keys("page/1"), Session: "s-bob", Reason: "stuck", Actor: "alice"})
	wantLocks(e.t, "force released", got, []holdfast.Lock{bob1})
	wantLocks(e.t, "left", e.locks(holdfast.LockQuery{Prefix: "page"}), []holdfast.Lock{carol, bob2})
}

func testForceHolderIsTold(e *env) {
	bob := e.grant(exclusive("order/1", owner("bob")))
	e.advance(time.Minute)
	e.forceRelease(holdfast.ForceReleaseRequest{Keys: keys("order/1"), Reason: "Bob is on leave", Actor: "alice"})

	le := e.wantLostLock("verify", bob, holdfast.LostForceReleased)
	if le.Actor != "alice" || le.ForceReason != "Bob is on leave" {
		e.t.Fatalf("verify: actor %q force_reason %q", le.Actor, le.ForceReason)
	}
	_, err := e.m.Renew(e.t.Context(), holdfast.RenewRequest{Session: "s-bob", Keys: keys("order/1")})
	le = e.wantLost("renew", err, holdfast.LostForceReleased)
	if le.Actor != "alice" || le.ForceReason != "Bob is on leave" || le.Lock == nil || le.Lock.Token != bob.Token {
		e.t.Fatalf("renew: %+v", le)
	}
	want := []holdfast.LostLock{{Lock: bob, Reason: holdfast.LostForceReleased, Actor: "alice", ForceReason: "Bob is on leave"}}
	wantLost(e, "heartbeat", e.heartbeat("s-bob").Lost, want)
	wantLost(e, "second heartbeat", e.heartbeat("s-bob").Lost, nil)

	entries := e.audit(holdfast.AuditQuery{Event: holdfast.EventForceReleased})
	if len(entries) != 1 {
		e.t.Fatalf("force_released entries: %+v", entries)
	}
	en := entries[0]
	wantLock(e.t, "audited lock", en.Lock, bob)
	if en.Actor != "alice" || en.Reason != "Bob is on leave" || !time.Time(en.At).Equal(e.now()) {
		e.t.Fatalf("audit entry: actor %q reason %q at %s", en.Actor, en.Reason, fmtTime(time.Time(en.At)))
	}
}
