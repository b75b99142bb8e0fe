package storetest

import (
	"slices"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/store"
)

var retentionCases = []testCase{
	{"LostLocks", testLostLocksRemembered},
	{"EndedSessions", testEndedSessionsRemembered},
	{"AuditPruned", testAuditPruned},
	{"LostBounded", testLostBounded},
}

// API.md: "Ended sessions and lost locks are remembered for at least 24
// hours". After 23 hours (and a sweep) the reason is still known; a day
// past the retention, after a sweep, it is gone.
func testLostLocksRemembered(e *env) {
	bob := e.grant(exclusive("order/1", owner("bob")))
	e.forceRelease(holdfast.ForceReleaseRequest{Keys: keys("order/1"), Reason: "stuck", Actor: "alice"})
	e.advance(23 * time.Hour)
	e.sweep()
	le := e.wantLostLock("verify 23 hours later", bob, holdfast.LostForceReleased)
	if le.Actor != "alice" || le.ForceReason != "stuck" {
		e.t.Fatalf("actor %q force_reason %q", le.Actor, le.ForceReason)
	}
	e.advance(lostRetention + 2*time.Hour)
	e.sweep()
	_, err := e.verify("order/1", "s-bob", bob.Token)
	e.wantLost("verify after the retention", err, holdfast.LostNeverHeld)
}

func testEndedSessionsRemembered(e *env) {
	for _, name := range []string{"bob", "carol"} {
		e.grant(exclusive("order/"+name, owner(name)))
		if _, err := e.m.EndSession(e.t.Context(), holdfast.EndSessionRequest{Session: "s-" + name}); err != nil {
			e.t.Fatal(err)
		}
	}
	e.advance(23 * time.Hour)
	e.sweep()
	_, err := e.m.Heartbeat(e.t.Context(), holdfast.HeartbeatRequest{Session: "s-bob"})
	e.wantLost("heartbeat 23 hours after the end", err, holdfast.LostSessionEnded)

	e.advance(lostRetention + 2*time.Hour)
	e.sweep()
	hb := e.heartbeat("s-carol") // forgotten: a heartbeat starts it afresh
	if hb.Session.ID != "s-carol" || hb.Session.Locks != 0 || len(hb.Lost) != 0 {
		e.t.Fatalf("heartbeat after the retention: %+v lost %+v", hb.Session, hb.Lost)
	}
}

// Audit entries older than the retention (default 30 days) are pruned by
// the sweep, oldest first; newer ones stay, in both orders.
func testAuditPruned(e *env) {
	e.grant(exclusive("order/1", owner("bob")))
	e.release("s-bob", "order/1")
	e.advance(20 * 24 * time.Hour)
	carol := e.grant(exclusive("order/2", owner("carol")))
	e.advance(11 * 24 * time.Hour) // bob's entries are 31 days old, carol's 11
	e.sweep()
	// Carol's lock (2 h) expired meanwhile: that is recorded now, and kept.
	got := e.audit(holdfast.AuditQuery{})
	e.wantAudit("after the sweep", got, "acquired order/2 s-carol", "expired order/2 s-carol")
	if got[0].Lock.Token != carol.Token {
		e.t.Fatalf("kept %+v, want carol's grant", got[0])
	}
	newest, err := e.m.Audit(e.t.Context(), holdfast.AuditQuery{Newest: true})
	if err != nil {
		e.t.Fatal(err)
	}
	if want := []string{"expired order/2 s-carol", "acquired order/2 s-carol"}; !slices.Equal(auditSigs(newest.Entries), want) {
		e.t.Fatalf("newest first after the sweep: %q, want %q", auditSigs(newest.Entries), want)
	}
}

// A session that locks and releases the same key again and again keeps
// one lost record for it, not one per release; a late verify of an older
// grant still learns that the key was released. A loss the session has not
// been told about yet (a force release) is kept until its heartbeat.
func testLostBounded(e *env) {
	first := e.grant(exclusive("order/1", owner("bob")))
	e.release("s-bob", "order/1")
	for range 20 {
		e.grant(exclusive("order/1", owner("bob")))
		e.release("s-bob", "order/1")
	}
	forced := e.grant(exclusive("order/1", owner("bob")))
	e.forceRelease(holdfast.ForceReleaseRequest{Keys: keys("order/1"), Reason: "stuck", Actor: "alice"})
	e.grant(exclusive("order/1", owner("bob")))
	e.release("s-bob", "order/1")

	var lost []store.Lost
	err := e.store.View(e.t.Context(), func(tx store.ReadTx) (err error) {
		lost, err = tx.Lost("s-bob")
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	if len(lost) != 2 {
		e.t.Fatalf("%d lost records for one key after 23 releases, want 2 (the unreported force release and the latest release)", len(lost))
	}
	_, err = e.verify("order/1", "s-bob", first.Token)
	e.wantLost("verify of the first grant", err, holdfast.LostReleased)
	hb := e.heartbeat("s-bob")
	if len(hb.Lost) != 1 || hb.Lost[0].Reason != holdfast.LostForceReleased || hb.Lost[0].Lock.Token != forced.Token {
		e.t.Fatalf("heartbeat lost %+v, want the force release of token %d", hb.Lost, forced.Token)
	}
}
