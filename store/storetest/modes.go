package storetest

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/holdfast/holdfast"
)

var modeCases = []testCase{
	{"ExclusiveBlocksExclusive", testExclusiveBlocksExclusive},
	{"SharedWithShared", testSharedWithShared},
	{"SharedBlocksExclusive", testSharedBlocksExclusive},
	{"ExclusiveBlocksShared", testExclusiveBlocksShared},
	{"IntentExclusiveWrite", testIntentExclusiveWrite},
	{"IntentReadShowsCoveringHolder", testIntentReadShowsCoveringHolder},
	{"IntentExclusiveRead", testIntentExclusiveRead},
	{"IntentReadWrite", testIntentReadWrite},
	{"BuiltinTTL", testBuiltinTTL},
	{"TypeDefaultTTL", testTypeDefaultTTL},
	{"RequestTTL", testRequestTTL},
	{"MaxTTLCaps", testMaxTTLCaps},
	{"DurationsMustBePositive", testDurationsMustBePositive},
	{"TypeIdleTimeout", testTypeIdleTimeout},
}

var upgradeCases = []testCase{
	{"SoleReaderUpgrades", testSoleReaderUpgrades},
	{"RefusedWhileShared", testUpgradeRefusedWhileShared},
	{"SharedKeepsExclusive", testSharedKeepsExclusive},
}

func testExclusiveBlocksExclusive(e *env) {
	bob := owner("Bob Smith")
	req := exclusive("policy/1", bob)
	req.Note = "underwriting review"
	got := e.grant(req)
	want := holdfast.Lock{
		Key: "policy/1", RequestedKey: "policy/1", Mode: holdfast.Exclusive, Owner: bob,
		AcquiredAt: start, ExpiresAt: start.Add(builtinTTL), Token: got.Token, Note: "underwriting review",
	}
	wantLock(e.t, "grant without a mode", got, want)
	if got.Token == 0 {
		e.t.Fatal("grant has token 0")
	}

	le := e.refused(exclusive("policy/1", owner("carol")))
	wantConflicts(e.t, le.Conflicts, []holdfast.Conflict{{Key: "policy/1", RequestedKey: "policy/1", Holders: []holdfast.Lock{want}}})
	wantLocks(e.t, "locks after the refusal", e.locks(holdfast.LockQuery{Key: "policy/1"}), []holdfast.Lock{want})
}

func testSharedWithShared(e *env) {
	bob := e.grant(shared("page/1", owner("bob")))
	carol := e.grant(shared("page/1", owner("carol")))
	for _, l := range []holdfast.Lock{bob, carol} {
		if l.Mode != holdfast.Shared {
			e.t.Fatalf("grant %s: mode %s, want shared", fmtLock(l), l.Mode)
		}
	}
	if carol.Token == bob.Token {
		e.t.Fatalf("two grants share token %d", bob.Token)
	}
	wantLocks(e.t, "both readers listed", e.locks(holdfast.LockQuery{Key: "page/1"}), []holdfast.Lock{bob, carol})
}

func testSharedBlocksExclusive(e *env) {
	bob := e.grant(shared("page/1", owner("bob")))
	le := e.refused(exclusive("page/1", owner("carol")))
	wantConflicts(e.t, le.Conflicts, []holdfast.Conflict{{Key: "page/1", RequestedKey: "page/1", Holders: []holdfast.Lock{bob}}})
	le = e.refused(holdfast.AcquireRequest{Keys: keys("page/1"), Owner: owner("carol"), Intent: holdfast.IntentWrite})
	wantConflicts(e.t, le.Conflicts, []holdfast.Conflict{{Key: "page/1", RequestedKey: "page/1", Holders: []holdfast.Lock{bob}}})
}

func testExclusiveBlocksShared(e *env) {
	bob := e.grant(exclusive("page/1", owner("bob")))
	le := e.refused(shared("page/1", owner("carol")))
	wantConflicts(e.t, le.Conflicts, []holdfast.Conflict{{Key: "page/1", RequestedKey: "page/1", Holders: []holdfast.Lock{bob}}})
}

// readNothing acquires with intent read under exclusive-write and requires
// that no lock was taken and that the answer still says "locks": [] on the
// wire, as API.md writes it, rather than null.
func (e *env) readNothing(key string, o holdfast.Owner) []holdfast.Lock {
	e.t.Helper()
	res := e.acquire(holdfast.AcquireRequest{Keys: keys(key), Owner: o, Intent: holdfast.IntentRead})
	if len(res.Locks) != 0 {
		e.t.Fatalf("read under exclusive-write took locks %s, want none", fmtLocks(res.Locks))
	}
	b, err := json.Marshal(res)
	if err != nil {
		e.t.Fatal(err)
	}
	if !strings.Contains(string(b), `"locks":[]`) {
		e.t.Fatalf("read under exclusive-write encodes as %s, want \"locks\":[]", b)
	}
	return res.Holders
}

func testIntentExclusiveWrite(e *env) {
	carol := owner("carol")
	if h := e.readNothing("policy/1", carol); len(h) != 0 {
		e.t.Fatalf("read of a free record lists holders %s", fmtLocks(h))
	}
	if got := e.locks(holdfast.LockQuery{Key: "policy/1"}); len(got) != 0 {
		e.t.Fatalf("a read under exclusive-write left locks %s", fmtLocks(got))
	}

	bob := e.grant(holdfast.AcquireRequest{Keys: keys("policy/1"), Owner: owner("bob"), Intent: holdfast.IntentWrite})
	if bob.Mode != holdfast.Exclusive {
		e.t.Fatalf("write under exclusive-write: mode %s, want exclusive", bob.Mode)
	}
	wantLocks(e.t, "holders shown to a reader", e.readNothing("policy/1", carol), []holdfast.Lock{bob})
	wantLocks(e.t, "locks after the read", e.locks(holdfast.LockQuery{Key: "policy/1"}), []holdfast.Lock{bob})
}

// A reader of policy/7/rider/1 is shown the holder of policy/7: that lock
// covers the record read, so it is one of "the current holders" (API.md)
// in every sense that matters to the person reading.
func testIntentReadShowsCoveringHolder(e *env) {
	bob := e.grant(exclusive("policy/7", owner("bob")))
	wantLocks(e.t, "holders of a covered record", e.readNothing("policy/7/rider/1", owner("carol")), []holdfast.Lock{bob})
}

func testIntentExclusiveRead(e *env) {
	bob := e.grant(holdfast.AcquireRequest{Keys: keys("doc/1"), Owner: owner("bob"), Intent: holdfast.IntentRead})
	if bob.Mode != holdfast.Exclusive {
		e.t.Fatalf("read under exclusive-read: mode %s, want exclusive", bob.Mode)
	}
	le := e.refused(holdfast.AcquireRequest{Keys: keys("doc/1"), Owner: owner("carol"), Intent: holdfast.IntentRead})
	wantConflicts(e.t, le.Conflicts, []holdfast.Conflict{{Key: "doc/1", RequestedKey: "doc/1", Holders: []holdfast.Lock{bob}}})
	w := e.grant(holdfast.AcquireRequest{Keys: keys("doc/2"), Owner: owner("carol"), Intent: holdfast.IntentWrite})
	if w.Mode != holdfast.Exclusive {
		e.t.Fatalf("write under exclusive-read: mode %s, want exclusive", w.Mode)
	}
}

func testIntentReadWrite(e *env) {
	read := func(name string) holdfast.Lock {
		return e.grant(holdfast.AcquireRequest{Keys: keys("page/1"), Owner: owner(name), Intent: holdfast.IntentRead})
	}
	bob, carol := read("bob"), read("carol")
	for _, l := range []holdfast.Lock{bob, carol} {
		if l.Mode != holdfast.Shared {
			e.t.Fatalf("read under read-write: %s, want shared", fmtLock(l))
		}
	}
	le := e.refused(holdfast.AcquireRequest{Keys: keys("page/1"), Owner: owner("dave"), Intent: holdfast.IntentWrite})
	wantConflicts(e.t, le.Conflicts, []holdfast.Conflict{{Key: "page/1", RequestedKey: "page/1", Holders: []holdfast.Lock{bob, carol}}})
	w := e.grant(holdfast.AcquireRequest{Keys: keys("page/2"), Owner: owner("dave"), Intent: holdfast.IntentWrite})
	if w.Mode != holdfast.Exclusive {
		e.t.Fatalf("write under read-write: mode %s, want exclusive", w.Mode)
	}
}

// wantExpiry acquires key with ttl (0: none given) and requires the grant
// to expire at exactly now+want.
func (e *env) wantExpiry(key string, ttl, want time.Duration) {
	e.t.Helper()
	req := exclusive(key, owner("bob"))
	req.TTL = holdfast.Duration(ttl)
	l := e.grant(req)
	if !l.AcquiredAt.Equal(e.now()) {
		e.t.Errorf("%s: acquired_at %s, want now %s", key, fmtTime(l.AcquiredAt), fmtTime(e.now()))
	}
	if !l.ExpiresAt.Equal(e.now().Add(want)) {
		e.t.Errorf("%s with ttl %s: expires_at %s, want %s", key, ttl, fmtTime(l.ExpiresAt), fmtTime(e.now().Add(want)))
	}
}

func testBuiltinTTL(e *env) {
	e.wantExpiry("order/1", 0, builtinTTL)
}

func testTypeDefaultTTL(e *env) {
	e.wantExpiry("ticket/1", 0, ticketTTL)
}

func testRequestTTL(e *env) {
	e.wantExpiry("ticket/1", 30*time.Minute, 30*time.Minute)
	e.wantExpiry("order/1", 90*time.Second, 90*time.Second)
	e.wantExpiry("order/2", 250*time.Millisecond, 250*time.Millisecond)
}

func testMaxTTLCaps(e *env) {
	e.wantExpiry("ticket/1", 5*time.Hour, ticketMaxTTL)
	e.wantExpiry("order/1", 48*time.Hour, builtinMaxTTL)
}

// A negative duration cannot come over the wire (it fails to decode), but
// a Go caller can pass one; it is refused like any other bad duration.
func testDurationsMustBePositive(e *env) {
	req := exclusive("order/1", owner("bob"))
	req.TTL = holdfast.Duration(-time.Second)
	_, err := e.m.Acquire(e.t.Context(), req)
	e.wantInvalid("negative ttl", err, "ttl_seconds")

	req = exclusive("order/1", owner("bob"))
	req.IdleTimeout = holdfast.Duration(-time.Second)
	_, err = e.m.Acquire(e.t.Context(), req)
	e.wantInvalid("negative idle timeout", err, "idle_timeout_seconds")

	if got := e.locks(holdfast.LockQuery{Key: "order/1"}); len(got) != 0 {
		e.t.Fatalf("refused requests left locks %s", fmtLocks(got))
	}
}

// A session that locks a type configured with an idle timeout gets that
// timeout without asking, and is ended by it.
func testTypeIdleTimeout(e *env) {
	bob := e.grant(exclusive("desk/1", owner("bob")))
	s := e.session("s-bob")
	if time.Duration(s.IdleTimeout) != deskIdle {
		e.t.Fatalf("session idle timeout %s, want the type's %s", time.Duration(s.IdleTimeout), deskIdle)
	}
	if s.ExpiresAt == nil || !time.Time(*s.ExpiresAt).Equal(start.Add(deskIdle)) {
		e.t.Fatalf("session expires_at %v, want %s", s.ExpiresAt, fmtTime(start.Add(deskIdle)))
	}
	e.advance(deskIdle + time.Second)
	e.grant(exclusive("desk/1", owner("carol")))
	_, err := e.m.Heartbeat(e.t.Context(), holdfast.HeartbeatRequest{Session: "s-bob"})
	le := e.wantLost("heartbeat after the type's idle timeout", err, holdfast.LostSessionExpired)
	wantLocks(e.t, "released by the idle timeout", le.Released, []holdfast.Lock{bob})
}

func testSoleReaderUpgrades(e *env) {
	bob := owner("bob")
	before := e.grant(shared("page/1", bob))
	e.advance(time.Minute)
	after := e.grant(exclusive("page/1", bob))
	if after.Mode != holdfast.Exclusive || after.Key != "page/1" || after.Owner != bob {
		e.t.Fatalf("upgrade: got %s, want bob's exclusive lock on page/1", fmtLock(after))
	}
	if after.Token <= before.Token {
		e.t.Fatalf("upgrade kept or lowered the token: %d after %d", after.Token, before.Token)
	}
	wantLocks(e.t, "after the upgrade", e.locks(holdfast.LockQuery{Key: "page/1"}), []holdfast.Lock{after})
	e.refused(shared("page/1", owner("carol")))
	_, err := e.verify("page/1", bob.Session, before.Token)
	e.wantStale("verify with the shared grant's token", err, after)
}

func testUpgradeRefusedWhileShared(e *env) {
	bob := e.grant(shared("page/1", owner("bob")))
	carol := e.grant(shared("page/1", owner("carol")))
	le := e.refused(exclusive("page/1", owner("bob")))
	wantConflicts(e.t, le.Conflicts, []holdfast.Conflict{{Key: "page/1", RequestedKey: "page/1", Holders: []holdfast.Lock{carol}}})
	wantLocks(e.t, "after the refused upgrade", e.locks(holdfast.LockQuery{Key: "page/1"}), []holdfast.Lock{bob, carol})
}

func testSharedKeepsExclusive(e *env) {
	bob := owner("bob")
	ex := e.grant(exclusive("page/1", bob))
	again := e.grant(shared("page/1", bob))
	wantLock(e.t, "shared asked while holding exclusive", again, ex)
	e.refused(shared("page/1", owner("carol")))
}
