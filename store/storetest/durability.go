package storetest

import (
	"slices"
	"time"

	"github.com/holdfast/holdfast"
)

var durabilityCases = []testCase{
	{"EverythingSurvivesReopen", testEverythingSurvivesReopen},
	{"TokensGrowAcrossReopens", testTokensGrowAcrossReopens},
	{"RaiseTokens", testRaiseTokens},
	{"RaisedTokensSurviveReopen", testRaisedTokensSurviveReopen},
}

func (e *env) needReopen() {
	if e.h.Reopen == nil {
		e.t.Skip("the store keeps nothing across Close (Harness.Reopen is nil)")
	}
}

func testEverythingSurvivesReopen(e *env) {
	e.needReopen()
	var maxToken uint64
	note := func(ls ...holdfast.Lock) {
		for _, l := range ls {
			maxToken = max(maxToken, l.Token)
		}
	}

	req := exclusive("policy/1", owner("Bob Smith"))
	req.Note, req.TTL = "underwriting review", holdfast.Duration(time.Hour)
	bob := e.grant(req)
	carol := e.idleAcquire("order/2", owner("carol"))
	carolShared := e.grant(shared("page/1", owner("carol")))
	dave := e.grant(exclusive("order/3", owner("dave")))
	if _, err := e.m.EndSession(e.t.Context(), holdfast.EndSessionRequest{Session: "s-dave"}); err != nil {
		e.t.Fatal(err)
	}
	erin := e.grant(exclusive("order/4", owner("erin")))
	e.forceRelease(holdfast.ForceReleaseRequest{Keys: keys("order/4"), Reason: "Erin is on leave", Actor: "alice"})
	e.setAggregate("asset/9", "lease/3")
	frank := e.grant(exclusive("order/5", owner("frank")))
	e.release("s-frank", "order/5") // the highest token is held by nobody now
	note(bob, carol, carolShared, dave, erin, frank)
	live := e.locks(holdfast.LockQuery{})
	audit := e.audit(holdfast.AuditQuery{})

	e.reopen()

	gotAudit := e.audit(holdfast.AuditQuery{})
	if !slices.Equal(auditSigs(gotAudit), auditSigs(audit)) {
		e.t.Fatalf("audit after reopen:\n %q\nbefore:\n %q", auditSigs(gotAudit), auditSigs(audit))
	}
	for i := range audit {
		if gotAudit[i].ID != audit[i].ID || !time.Time(gotAudit[i].At).Equal(time.Time(audit[i].At)) ||
			gotAudit[i].Actor != audit[i].Actor || gotAudit[i].Reason != audit[i].Reason {
			e.t.Fatalf("audit entry %d after reopen %+v, before %+v", i, gotAudit[i], audit[i])
		}
		wantLock(e.t, "audited lock after reopen", gotAudit[i].Lock, audit[i].Lock)
	}
	wantLocks(e.t, "locks after reopen", e.locks(holdfast.LockQuery{}), live)
	wantLocks(e.t, "locks listed before reopen", live, byKeySession([]holdfast.Lock{bob, carol, carolShared}))
	e.wantLive("bob after reopen", bob)

	s := e.session("s-carol")
	if time.Duration(s.IdleTimeout) != idle || s.Locks != 2 || s.ExpiresAt == nil || !time.Time(*s.ExpiresAt).Equal(start.Add(idle)) {
		e.t.Fatalf("carol's session after reopen: %+v", s)
	}

	_, err := e.m.Heartbeat(e.t.Context(), holdfast.HeartbeatRequest{Session: "s-dave"})
	le := e.wantLost("ended session after reopen", err, holdfast.LostSessionEnded)
	wantLocks(e.t, "ended session's locks", le.Released, []holdfast.Lock{dave})

	le = e.wantLostLock("force-released lock after reopen", erin, holdfast.LostForceReleased)
	if le.Actor != "alice" || le.ForceReason != "Erin is on leave" {
		e.t.Fatalf("actor %q force_reason %q after reopen", le.Actor, le.ForceReason)
	}
	e.wantLostLock("released lock after reopen", frank, holdfast.LostReleased)

	if l := e.grant(exclusive("asset/9", owner("gina"))); l.Key != "lease/3" {
		e.t.Fatalf("aggregate after reopen: asset/9 locked %s", l.Key)
	}
	next := e.grant(exclusive("order/6", owner("gina")))
	if next.Token <= maxToken {
		e.t.Fatalf("first token after reopen %d, want above %d", next.Token, maxToken)
	}

	// The idle timeout still runs: carol's locks free once it passes.
	e.refused(exclusive("order/2", owner("gina")))
	e.advance(idle + time.Second)
	e.grant(exclusive("order/2", owner("gina")))

	if n := e.audit(holdfast.AuditQuery{}); len(n) <= len(audit) || n[len(audit)].ID <= audit[len(audit)-1].ID {
		e.t.Fatalf("audit entries after reopen do not continue the log: %q", auditSigs(n))
	}
}

func testTokensGrowAcrossReopens(e *env) {
	e.needReopen()
	var tokens []uint64
	for round := range 3 {
		for _, k := range []string{"order/1", "order/2"} {
			l := e.grant(exclusive(k, owner("bob")))
			tokens = append(tokens, l.Token)
			e.release("s-bob", k)
		}
		if round < 2 {
			e.reopen()
		}
	}
	wantTokensIncrease(e.t, "tokens across reopens", tokens)
}

// raiseTokens raises the token counter to floor, reporting whether it moved.
func (e *env) raiseTokens(floor uint64) bool {
	e.t.Helper()
	raised, err := e.m.RaiseTokens(e.t.Context(), floor)
	if err != nil {
		e.t.Fatalf("RaiseTokens(%d): %v", floor, err)
	}
	return raised
}

// A floor above the counter moves it: every later grant's token is above
// the floor, a re-entrant acquire keeps its token, and a floor below the
// counter moves nothing.
func testRaiseTokens(e *env) {
	held := e.grant(exclusive("order/1", owner("bob")))
	floor := held.Token + 1000
	if !e.raiseTokens(floor) {
		e.t.Fatalf("RaiseTokens(%d) after token %d reported no raise", floor, held.Token)
	}
	again := e.grant(exclusive("order/1", owner("bob")))
	if again.Token != held.Token {
		e.t.Errorf("re-entrant acquire after the raise: token %d, want %d kept", again.Token, held.Token)
	}
	next := e.grant(exclusive("order/2", owner("bob")))
	if next.Token <= floor {
		e.t.Fatalf("token after raising to %d: %d, want above the floor", floor, next.Token)
	}
	if e.raiseTokens(floor) || e.raiseTokens(held.Token) {
		e.t.Errorf("RaiseTokens to a floor at or below token %d reported a raise", next.Token)
	}
	last := e.grant(exclusive("order/3", owner("bob")))
	wantTokensIncrease(e.t, "tokens around the raises", []uint64{held.Token, next.Token, last.Token})

	_, err := e.m.RaiseTokens(e.t.Context(), holdfast.MaxTokenFloor+1)
	e.wantInvalid("RaiseTokens above MaxTokenFloor", err, "floor")
}

func testRaisedTokensSurviveReopen(e *env) {
	e.needReopen()
	e.grant(exclusive("order/1", owner("bob")))
	const floor = 1 << 40
	e.raiseTokens(floor)
	e.reopen()
	if l := e.grant(exclusive("order/2", owner("bob"))); l.Token <= floor {
		e.t.Fatalf("token after raising to %d and reopening: %d, want above the floor", uint64(floor), l.Token)
	}
}
