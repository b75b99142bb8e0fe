package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
)

var sessionCases = []testCase{
	{"IdleTimeoutFreesLocks", testIdleTimeoutFreesLocks},
	{"HeartbeatKeepsAlive", testHeartbeatKeepsAlive},
	{"AnyRequestIsActivity", testAnyRequestIsActivity},
	{"LatestIdleTimeoutWins", testLatestIdleTimeoutWins},
	{"SweepRemovesFromListings", testSweepRemovesFromListings},
	{"HeartbeatAfterEnd", testHeartbeatAfterEnd},
	{"HeartbeatAfterIdle", testHeartbeatAfterIdle},
	{"AcquireRestartsEndedSession", testAcquireRestartsEndedSession},
	{"EndedHeartbeatTellsOnlyTheEnd", testEndedHeartbeatTellsOnlyTheEnd},
	{"RestartKeepsUntoldLosses", testRestartKeepsUntoldLosses},
	{"HeartbeatStartsSession", testHeartbeatStartsSession},
	{"EndUnknownSession", testEndUnknownSession},
	{"HeartbeatReportsExpiredLock", testHeartbeatReportsExpiredLock},
	{"SweepLooksPastSessionsKeptAlive", testSweepLooksPastSessionsKeptAlive},
}

const idle = 5 * time.Minute

// idleAcquire acquires key for o with the suite's idle timeout.
func (e *env) idleAcquire(key string, o holdfast.Owner) holdfast.Lock {
	e.t.Helper()
	req := exclusive(key, o)
	req.IdleTimeout = holdfast.Duration(idle)
	return e.grant(req)
}

// Nothing sweeps here: the idle session's locks are free to the next
// acquire as soon as its idle deadline passes.
func testIdleTimeoutFreesLocks(e *env) {
	bob := e.idleAcquire("order/1", owner("bob"))
	e.advance(idle - time.Second)
	e.refused(exclusive("order/1", owner("carol")))
	e.advance(2 * time.Second)
	carol := e.grant(exclusive("order/1", owner("carol")))
	wantLocks(e.t, "after the idle timeout", e.locks(holdfast.LockQuery{Key: "order/1"}), []holdfast.Lock{carol})
	_, err := e.m.Heartbeat(e.t.Context(), holdfast.HeartbeatRequest{Session: "s-bob"})
	le := e.wantLost("late heartbeat of the idle session", err, holdfast.LostSessionExpired)
	wantLocks(e.t, "released by the idle timeout", le.Released, []holdfast.Lock{bob})
	e.wantLostLock("late verify of the idle session", bob, holdfast.LostSessionExpired)
}

func testHeartbeatKeepsAlive(e *env) {
	bob := e.idleAcquire("order/1", owner("bob"))
	for range 4 {
		e.advance(idle - time.Minute)
		hb := e.heartbeat("s-bob")
		if !time.Time(hb.Session.LastSeen).Equal(e.now()) {
			e.t.Fatalf("heartbeat last_seen %s, want now %s", fmtTime(time.Time(hb.Session.LastSeen)), fmtTime(e.now()))
		}
		if hb.Session.ExpiresAt == nil || !time.Time(*hb.Session.ExpiresAt).Equal(e.now().Add(idle)) {
			e.t.Fatalf("heartbeat expires_at %v, want %s", hb.Session.ExpiresAt, fmtTime(e.now().Add(idle)))
		}
		if hb.Session.Locks != 1 {
			e.t.Fatalf("heartbeat counts %d locks, want 1", hb.Session.Locks)
		}
	}
	e.refused(exclusive("order/1", owner("carol")))
	e.wantLive("kept alive by heartbeats", bob)
}

// "Any other request of that session" (API.md) keeps it alive; each of the
// session's requests is checked on its own store.
func testAnyRequestIsActivity(e *env) {
	requests := map[string]func(e *env){
		"Acquire": func(e *env) { e.grant(exclusive("order/2", owner("bob"))) },
		"Renew": func(e *env) {
			if _, err := e.m.Renew(e.t.Context(), holdfast.RenewRequest{Session: "s-bob"}); err != nil {
				e.t.Fatalf("Renew: %v", err)
			}
		},
		"Verify": func(e *env) {
			l := e.locks(holdfast.LockQuery{Key: "order/1"})
			if len(l) != 1 {
				e.t.Fatalf("locks %s", fmtLocks(l))
			}
			e.wantLive("verify", l[0])
		},
		"Release": func(e *env) { e.release("s-bob", "order/9") },
		// A refused acquire takes no lock, but it is a request of the
		// session all the same.
		"RefusedAcquire": func(e *env) {
			e.grant(exclusive("order/8", owner("carol")))
			e.refused(exclusive("order/8", owner("bob")))
		},
	}
	for name, request := range requests {
		e.t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := e.fresh(t)
			e.idleAcquire("order/1", owner("bob"))
			e.advance(idle - time.Minute)
			request(e)
			e.advance(idle - time.Minute)
			e.refused(exclusive("order/1", owner("carol")))
		})
	}
}

func testLatestIdleTimeoutWins(e *env) {
	e.idleAcquire("order/1", owner("bob"))
	hb, err := e.m.Heartbeat(e.t.Context(), holdfast.HeartbeatRequest{Session: "s-bob", IdleTimeout: holdfast.Duration(time.Hour)})
	if err != nil {
		e.t.Fatal(err)
	}
	if time.Duration(hb.Session.IdleTimeout) != time.Hour {
		e.t.Fatalf("idle timeout %s after asking for 1h", time.Duration(hb.Session.IdleTimeout))
	}
	e.advance(30 * time.Minute)
	e.refused(exclusive("order/1", owner("carol")))
	s := e.session("s-bob")
	if time.Duration(s.IdleTimeout) != time.Hour || s.ExpiresAt == nil || !time.Time(*s.ExpiresAt).Equal(start.Add(time.Hour)) {
		e.t.Fatalf("session %+v, want idle 1h expiring at %s", s, fmtTime(start.Add(time.Hour)))
	}
}

func testSweepRemovesFromListings(e *env) {
	req := exclusive("order/1", owner("bob"))
	req.TTL = holdfast.Duration(time.Minute)
	e.grant(req)
	e.idleAcquire("order/2", owner("carol"))
	dave := e.grant(exclusive("order/3", owner("dave")))
	e.advance(idle + time.Second)
	e.sweep()
	wantLocks(e.t, "after the sweep", e.locks(holdfast.LockQuery{Prefix: "order"}), []holdfast.Lock{dave})
	got := e.sessions(holdfast.SessionQuery{})
	ids := make([]string, len(got))
	for i, s := range got {
		ids[i] = s.ID
	}
	if len(ids) != 2 || ids[0] != "s-bob" || ids[1] != "s-dave" {
		e.t.Fatalf("live sessions after the sweep: %v, want [s-bob s-dave]", ids)
	}
}

func testHeartbeatAfterEnd(e *env) {
	bob := e.grant(exclusive("order/1", owner("bob")))
	if _, err := e.m.EndSession(e.t.Context(), holdfast.EndSessionRequest{Session: "s-bob"}); err != nil {
		e.t.Fatal(err)
	}
	_, err := e.m.Heartbeat(e.t.Context(), holdfast.HeartbeatRequest{Session: "s-bob"})
	le := e.wantLost("heartbeat after EndSession", err, holdfast.LostSessionEnded)
	wantLocks(e.t, "released", le.Released, []holdfast.Lock{bob})
}

func testHeartbeatAfterIdle(e *env) {
	bob := e.idleAcquire("order/1", owner("bob"))
	e.advance(idle + time.Second)
	_, err := e.m.Heartbeat(e.t.Context(), holdfast.HeartbeatRequest{Session: "s-bob"})
	le := e.wantLost("heartbeat after the idle timeout", err, holdfast.LostSessionExpired)
	wantLocks(e.t, "released", le.Released, []holdfast.Lock{bob})
	e.grant(exclusive("order/1", owner("carol")))
}

func testAcquireRestartsEndedSession(e *env) {
	e.grant(exclusive("order/1", owner("bob")))
	if _, err := e.m.EndSession(e.t.Context(), holdfast.EndSessionRequest{Session: "s-bob"}); err != nil {
		e.t.Fatal(err)
	}
	e.advance(time.Minute)
	again := e.grant(exclusive("order/2", owner("bob")))
	hb := e.heartbeat("s-bob")
	if hb.Session.ID != "s-bob" || hb.Session.Locks != 1 || len(hb.Lost) != 0 {
		e.t.Fatalf("restarted session: %+v lost %+v, want one lock and nothing lost", hb.Session, hb.Lost)
	}
	wantLocks(e.t, "restarted session's locks", e.locks(holdfast.LockQuery{Session: "s-bob"}), []holdfast.Lock{again})
	e.session("s-bob")
}

// The 409 that tells a heartbeat its session ended lists in released the
// locks that went with the session, and only those: a lock lost before, a
// force release say, it does not tell (API.md: the force-released holder's
// "next heartbeat lists it under lost"). So the first heartbeat of the
// session started anew by an acquire lists that loss, once, with who and
// why. Renew and verify still name the grants of either life.
func testEndedHeartbeatTellsOnlyTheEnd(e *env) {
	ends := map[string]struct {
		end    func(e *env)
		reason holdfast.LostReason
	}{
		"EndSession": {func(e *env) {
			if _, err := e.m.EndSession(e.t.Context(), holdfast.EndSessionRequest{Session: "s-bob"}); err != nil {
				e.t.Fatal(err)
			}
		}, holdfast.LostSessionEnded},
		"IdleTimeout": {func(e *env) { e.advance(idle + time.Second) }, holdfast.LostSessionExpired},
	}
	for name, end := range ends {
		e.t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := e.fresh(t)
			forced := e.idleAcquire("order/1", owner("bob"))
			kept := e.idleAcquire("order/2", owner("bob"))
			e.advance(time.Minute)
			e.forceRelease(holdfast.ForceReleaseRequest{Keys: keys("order/1"), Reason: "Bob is on leave", Actor: "alice"})
			end.end(e)
			_, err := e.m.Heartbeat(t.Context(), holdfast.HeartbeatRequest{Session: "s-bob"})
			le := e.wantLost("heartbeat of the ended session", err, end.reason)
			wantLocks(t, "released with the session", le.Released, []holdfast.Lock{kept})

			e.advance(time.Minute)
			again := e.grant(exclusive("order/3", owner("bob")))
			hb := e.heartbeat("s-bob")
			want := []holdfast.LostLock{{Lock: forced, Reason: holdfast.LostForceReleased, Actor: "alice", ForceReason: "Bob is on leave"}}
			wantLost(e, "first heartbeat of the session started anew", hb.Lost, want)
			wantLost(e, "second heartbeat of the session started anew", e.heartbeat("s-bob").Lost, nil)
			if hb.Session.Locks != 1 {
				t.Fatalf("session started anew counts %d locks, want 1 (%s)", hb.Session.Locks, fmtLock(again))
			}
			fl := e.wantLostLock("verify of the force-released grant", forced, holdfast.LostForceReleased)
			if fl.Actor != "alice" || fl.ForceReason != "Bob is on leave" {
				t.Fatalf("verify: actor %q force_reason %q", fl.Actor, fl.ForceReason)
			}
			_, err = e.m.Renew(t.Context(), holdfast.RenewRequest{Session: "s-bob", Keys: keys("order/1")})
			e.wantLost("renew of the force-released key", err, holdfast.LostForceReleased)
			e.wantLostLock("verify of the grant lost with the session", kept, end.reason)
		})
	}
}

// A session that ends by its idle timeout and is started again by an
// acquire, with no heartbeat in between, has not been told of a loss from
// before: its next heartbeat lists it, once. The locks that went with the
// session are not listed (a heartbeat of the ended session would have
// said so); renew and verify still name them.
func testRestartKeepsUntoldLosses(e *env) {
	forced := e.idleAcquire("order/1", owner("bob"))
	kept := e.idleAcquire("order/2", owner("bob"))
	e.advance(time.Minute)
	e.forceRelease(holdfast.ForceReleaseRequest{Keys: keys("order/1"), Reason: "Bob is on leave", Actor: "alice"})
	e.advance(idle + time.Second)
	e.grant(exclusive("order/3", owner("bob")))
	want := []holdfast.LostLock{{Lock: forced, Reason: holdfast.LostForceReleased, Actor: "alice", ForceReason: "Bob is on leave"}}
	wantLost(e, "first heartbeat after the restart", e.heartbeat("s-bob").Lost, want)
	wantLost(e, "second heartbeat after the restart", e.heartbeat("s-bob").Lost, nil)
	e.wantLostLock("verify of the grant lost with the session", kept, holdfast.LostSessionExpired)
}

func testHeartbeatStartsSession(e *env) {
	hb := e.heartbeat("s-new")
	want := holdfast.SessionInfo{ID: "s-new", LastSeen: holdfast.Time(start)}
	if !sameSession(hb.Session, want) || len(hb.Lost) != 0 {
		e.t.Fatalf("first heartbeat: %+v lost %+v, want %+v", hb.Session, hb.Lost, want)
	}
	if got := e.session("s-new"); !sameSession(got, want) {
		e.t.Fatalf("listed: %+v, want %+v", got, want)
	}
	res, err := e.m.Heartbeat(e.t.Context(), holdfast.HeartbeatRequest{Session: "s-idle", IdleTimeout: holdfast.Duration(idle)})
	if err != nil {
		e.t.Fatal(err)
	}
	expires := holdfast.Time(start.Add(idle))
	want = holdfast.SessionInfo{ID: "s-idle", LastSeen: holdfast.Time(start), IdleTimeout: holdfast.Duration(idle), ExpiresAt: &expires}
	if !sameSession(res.Session, want) {
		e.t.Fatalf("first heartbeat with idle timeout: %+v, want %+v", res.Session, want)
	}
}

func testEndUnknownSession(e *env) {
	for range 2 {
		res, err := e.m.EndSession(e.t.Context(), holdfast.EndSessionRequest{Session: "s-nobody"})
		if err != nil {
			e.t.Fatalf("EndSession of an unknown session: %v", err)
		}
		if len(res.Released) != 0 {
			e.t.Fatalf("EndSession of an unknown session released %s", fmtLocks(res.Released))
		}
	}
}

// The holder learns at its next heartbeat that its lock expired, even
// before a sweep has removed it.
func testHeartbeatReportsExpiredLock(e *env) {
	req := exclusive("order/1", owner("bob"))
	req.TTL = holdfast.Duration(time.Minute)
	bob := e.grant(req)
	kept := e.grant(exclusive("order/2", owner("bob")))
	e.advance(2 * time.Minute)
	hb := e.heartbeat("s-bob")
	wantLost(e, "heartbeat after expiry", hb.Lost, []holdfast.LostLock{{Lock: bob, Reason: holdfast.LostExpired}})
	if hb.Session.Locks != 1 {
		e.t.Fatalf("session counts %d locks, want 1 (%s)", hb.Session.Locks, fmtLock(kept))
	}
	e.sweep()
	wantLost(e, "heartbeat after the sweep", e.heartbeat("s-bob").Lost, nil)
}

// sameSession compares session descriptions, times by instant.
func sameSession(a, b holdfast.SessionInfo) bool {
	if (a.ExpiresAt == nil) != (b.ExpiresAt == nil) {
		return false
	}
	if a.ExpiresAt != nil && !time.Time(*a.ExpiresAt).Equal(time.Time(*b.ExpiresAt)) {
		return false
	}
	return a.ID == b.ID && a.User == b.User && a.Name == b.Name && a.IdleTimeout == b.IdleTimeout &&
		a.Locks == b.Locks && time.Time(a.LastSeen).Equal(time.Time(b.LastSeen))
}

// More sessions kept alive than one batch of the sweep come before an idle
// one in the order of their first deadlines: the sweep still ends the idle
// one, and ends the others at their later deadlines.
func testSweepLooksPastSessionsKeptAlive(e *env) {
	const kept = 120 // more than the sweep takes at a time
	for i := range kept {
		e.idleAcquire(fmt.Sprintf("order/a%03d", i), owner(fmt.Sprintf("a%03d", i)))
	}
	e.idleAcquire("order/z", owner("zoe")) // after them in the order of ids
	expired := func() int {
		return len(e.audit(holdfast.AuditQuery{Event: holdfast.EventSessionExpired}))
	}

	e.advance(idle / 2)
	for i := range kept {
		e.heartbeat(fmt.Sprintf("s-a%03d", i))
	}
	e.advance(idle/2 + time.Second)
	e.sweep()
	if got := e.audit(holdfast.AuditQuery{Event: holdfast.EventSessionExpired}); len(got) != 1 || got[0].Lock.Key != "order/z" {
		e.t.Fatalf("session_expired entries after the first sweep: %+v, want order/z's alone", got)
	}
	if n := len(e.sessions(holdfast.SessionQuery{})); n != kept {
		e.t.Fatalf("%d live sessions after the first sweep, want %d", n, kept)
	}

	e.advance(idle/2 - 2*time.Second) // a second before their deadlines
	e.sweep()
	if n := expired(); n != 1 {
		e.t.Fatalf("%d session_expired entries before the kept sessions' deadlines, want 1", n)
	}
	e.advance(2 * time.Second)
	e.sweep()
	if n := expired(); n != kept+1 {
		e.t.Fatalf("%d session_expired entries past the kept sessions' deadlines, want %d", n, kept+1)
	}
}
