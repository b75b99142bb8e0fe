package storetest

import (
	"testing"
	"time"

	"github.com/holdfast/holdfast"
)

var renewCases = []testCase{
	{"SetsExpiry", testRenewSetsExpiry},
	{"AllWhenNoKeys", testRenewAllWhenNoKeys},
	{"AllOfEndedSession", testRenewAllOfEndedSession},
	{"NotHeldRenewsNothing", testRenewNotHeldRenewsNothing},
	{"Expired", testRenewExpired},
}

var verifyCases = []testCase{
	{"Live", testVerifyLive},
	{"StaleToken", testVerifyStaleToken},
	{"LostReasons", testVerifyLostReasons},
}

var releaseCases = []testCase{
	{"OwnLocksOnly", testReleaseOwnLocksOnly},
	{"NotHeld", testReleaseNotHeld},
	{"StaleToken", testReleaseStaleToken},
	{"TokenNeedsOneKey", testReleaseTokenNeedsOneKey},
}

func (e *env) renew(session string, ttl time.Duration, ks ...string) []holdfast.Lock {
	e.t.Helper()
	res, err := e.m.Renew(e.t.Context(), holdfast.RenewRequest{Session: session, Keys: ks, TTL: holdfast.Duration(ttl)})
	if err != nil {
		e.t.Fatalf("Renew(%s, %v): %v", session, ks, err)
	}
	return res.Locks
}

// Renew sets expires_at to now + ttl: later or earlier than before, capped
// by the type's maximum, the type's default when no ttl is given. The
// token never changes.
func testRenewSetsExpiry(e *env) {
	l := e.grant(exclusive("ticket/1", owner("bob")))
	for _, step := range []struct {
		ttl, want time.Duration
	}{
		{30 * time.Minute, 30 * time.Minute},
		{5 * time.Hour, ticketMaxTTL},
		{0, ticketTTL},
		{time.Minute, time.Minute},
	} {
		e.advance(5 * time.Minute)
		want := l
		want.ExpiresAt = e.now().Add(step.want)
		wantLocks(e.t, "renewed with ttl "+step.ttl.String(), e.renew("s-bob", step.ttl, "ticket/1"), []holdfast.Lock{want})
		wantLocks(e.t, "listed after renew", e.locks(holdfast.LockQuery{Key: "ticket/1"}), []holdfast.Lock{want})
	}
}

func testRenewAllWhenNoKeys(e *env) {
	bob := owner("bob")
	a := e.grant(exclusive("order/1", bob))
	b := e.grant(shared("page/1", bob))
	e.grant(exclusive("order/2", owner("carol")))
	e.advance(time.Hour)
	a.ExpiresAt = e.now().Add(3 * time.Hour)
	b.ExpiresAt = e.now().Add(3 * time.Hour)
	wantLocks(e.t, "renew of all", byKeySession(e.renew("s-bob", 3*time.Hour)), []holdfast.Lock{a, b})
	if got := e.locks(holdfast.LockQuery{Session: "s-carol"}); len(got) != 1 || !got[0].ExpiresAt.Equal(start.Add(builtinTTL)) {
		e.t.Fatalf("another session's lock was renewed: %s", fmtLocks(got))
	}
}

// API.md: renew without keys renews "all of the session's locks", and is
// 409 lock_lost for a session no longer held, with the reason, as its
// heartbeat is. A session never seen, or forgotten, held nothing and lost
// nothing: 200 with no locks.
func testRenewAllOfEndedSession(e *env) {
	renewAll := func(session string) ([]holdfast.Lock, error) {
		res, err := e.m.Renew(e.t.Context(), holdfast.RenewRequest{Session: session, TTL: holdfast.Duration(time.Hour)})
		if err != nil {
			return nil, err
		}
		return res.Locks, nil
	}
	bob := e.grant(exclusive("order/1", owner("bob")))
	if _, err := e.m.EndSession(e.t.Context(), holdfast.EndSessionRequest{Session: "s-bob"}); err != nil {
		e.t.Fatal(err)
	}
	carol := e.idleAcquire("order/2", owner("carol"))
	e.grant(exclusive("order/4", owner("dave")))
	if _, err := e.m.EndSession(e.t.Context(), holdfast.EndSessionRequest{Session: "s-dave"}); err != nil {
		e.t.Fatal(err)
	}
	e.heartbeat("s-erin")
	e.advance(idle + time.Second)

	_, err := renewAll("s-bob")
	le := e.wantLost("renew of all after EndSession", err, holdfast.LostSessionEnded)
	wantLocks(e.t, "released with the ended session", le.Released, []holdfast.Lock{bob})
	_, err = renewAll("s-carol")
	le = e.wantLost("renew of all after the idle timeout", err, holdfast.LostSessionExpired)
	wantLocks(e.t, "released with the idle session", le.Released, []holdfast.Lock{carol})
	e.grant(exclusive("order/2", owner("frank"))) // the renew did not keep carol's

	for _, s := range []string{"s-nobody", "s-erin"} { // never seen; live, holding nothing
		if got, err := renewAll(s); err != nil || len(got) != 0 {
			e.t.Fatalf("renew of all for %s: %s, %v; want no locks", s, fmtLocks(got), err)
		}
	}
	again := e.grant(exclusive("order/3", owner("bob"))) // started anew
	got, err := renewAll("s-bob")
	if err != nil {
		e.t.Fatalf("renew of all after the session started anew: %v", err)
	}
	again.ExpiresAt = e.now().Add(time.Hour)
	wantLocks(e.t, "renewed after the session started anew", got, []holdfast.Lock{again})

	e.advance(lostRetention + time.Hour)
	e.sweep()
	if got, err := renewAll("s-dave"); err != nil || len(got) != 0 {
		e.t.Fatalf("renew of all for a session forgotten after the retention: %s, %v; want no locks", fmtLocks(got), err)
	}
}

func testRenewNotHeldRenewsNothing(e *env) {
	bob := e.grant(exclusive("order/1", owner("bob")))
	e.grant(exclusive("order/2", owner("carol")))
	e.advance(10 * time.Minute)
	_, err := e.m.Renew(e.t.Context(), holdfast.RenewRequest{Session: "s-bob", Keys: keys("order/1", "order/2"), TTL: holdfast.Duration(5 * time.Hour)})
	le := e.wantLost("renew of a key not held", err, holdfast.LostNeverHeld)
	if le.Lock != nil {
		e.t.Errorf("never-held key reported with lock %s", fmtLock(*le.Lock))
	}
	wantLocks(e.t, "after the refused renew", e.locks(holdfast.LockQuery{Session: "s-bob"}), []holdfast.Lock{bob})
}

func testRenewExpired(e *env) {
	req := exclusive("order/1", owner("bob"))
	req.TTL = holdfast.Duration(time.Minute)
	bob := e.grant(req)
	e.advance(2 * time.Minute)
	_, err := e.m.Renew(e.t.Context(), holdfast.RenewRequest{Session: "s-bob", Keys: keys("order/1")})
	le := e.wantLost("renew after expiry", err, holdfast.LostExpired)
	if le.Lock == nil {
		e.t.Fatal("expired renew does not name the lost grant")
	}
	wantLock(e.t, "lost grant", *le.Lock, bob)
	e.grant(exclusive("order/1", owner("carol")))
}

func testVerifyLive(e *env) {
	bob := e.grant(exclusive("order/1", owner("bob")))
	e.wantLive("verify", bob)
	e.setAggregate("asset/9", "lease/3")
	member := e.grant(exclusive("asset/9", owner("bob")))
	res, err := e.verify("asset/9", "s-bob", member.Token)
	if err != nil {
		e.t.Fatalf("verify by member key: %v", err)
	}
	if res.Lock.Key != "lease/3" || res.Lock.Token != member.Token {
		e.t.Fatalf("verify by member key: %s, want the lease/3 grant", fmtLock(res.Lock))
	}
}

func testVerifyStaleToken(e *env) {
	bob := e.grant(exclusive("order/1", owner("bob")))
	for _, token := range []uint64{bob.Token - 1, bob.Token + 1, bob.Token + 1000} {
		if token == 0 {
			continue
		}
		_, err := e.verify("order/1", "s-bob", token)
		e.wantStale("verify with another token", err, bob)
	}
}

func testVerifyLostReasons(e *env) {
	ctx := func(t *testing.T) *env { t.Parallel(); return e.fresh(t) }
	e.t.Run("Expired", func(t *testing.T) {
		e := ctx(t)
		req := exclusive("order/1", owner("bob"))
		req.TTL = holdfast.Duration(time.Minute)
		bob := e.grant(req)
		e.advance(time.Minute + time.Second)
		e.wantLostLock("verify after expiry", bob, holdfast.LostExpired)
	})
	e.t.Run("Released", func(t *testing.T) {
		e := ctx(t)
		bob := e.grant(exclusive("order/1", owner("bob")))
		e.release("s-bob", "order/1")
		e.wantLostLock("verify after release", bob, holdfast.LostReleased)
	})
	e.t.Run("ForceReleased", func(t *testing.T) {
		e := ctx(t)
		bob := e.grant(exclusive("order/1", owner("bob")))
		e.forceRelease(holdfast.ForceReleaseRequest{Keys: keys("order/1"), Reason: "Bob is on leave", Actor: "alice"})
		le := e.wantLostLock("verify after force release", bob, holdfast.LostForceReleased)
		if le.Actor != "alice" || le.ForceReason != "Bob is on leave" {
			e.t.Fatalf("actor %q force_reason %q, want alice and the reason", le.Actor, le.ForceReason)
		}
	})
	e.t.Run("TakenOver", func(t *testing.T) {
		e := ctx(t)
		old := e.grant(exclusive("order/1", tab("u-bob", "s-tab1")))
		req := exclusive("order/1", tab("u-bob", "s-tab2"))
		req.Takeover = true
		e.grant(req)
		e.wantLostLock("verify after takeover", old, holdfast.LostTakenOver)
	})
	e.t.Run("SessionEnded", func(t *testing.T) {
		e := ctx(t)
		bob := e.grant(exclusive("order/1", owner("bob")))
		if _, err := e.m.EndSession(t.Context(), holdfast.EndSessionRequest{Session: "s-bob"}); err != nil {
			t.Fatal(err)
		}
		e.wantLostLock("verify after the session ended", bob, holdfast.LostSessionEnded)
	})
	e.t.Run("NeverHeld", func(t *testing.T) {
		e := ctx(t)
		e.grant(exclusive("order/1", owner("carol")))
		for _, key := range []string{"order/1", "order/2"} {
			_, err := e.verify(key, "s-bob", 1)
			le := e.wantLost("verify of a key never held", err, holdfast.LostNeverHeld)
			if le.Lock != nil {
				t.Fatalf("never-held key reported with lock %s", fmtLock(*le.Lock))
			}
		}
	})
}

func testReleaseOwnLocksOnly(e *env) {
	bob := e.grant(shared("page/1", owner("bob")))
	carol := e.grant(shared("page/1", owner("carol")))
	res := e.release("s-bob", "page/1")
	wantLocks(e.t, "released", res.Released, []holdfast.Lock{bob})
	wantLocks(e.t, "left", e.locks(holdfast.LockQuery{Key: "page/1"}), []holdfast.Lock{carol})
}

func testReleaseNotHeld(e *env) {
	bob := e.grant(exclusive("order/1", owner("bob")))
	e.grant(exclusive("order/2", owner("carol")))
	res := e.release("s-bob", "order/2", "order/1", "order/3")
	wantLocks(e.t, "released", res.Released, []holdfast.Lock{bob})
	if len(res.NotHeld) != 2 || res.NotHeld[0] != "order/2" || res.NotHeld[1] != "order/3" {
		e.t.Fatalf("not_held %v, want [order/2 order/3]", res.NotHeld)
	}
	if got := e.locks(holdfast.LockQuery{Key: "order/2"}); len(got) != 1 {
		e.t.Fatalf("another session's lock: %s", fmtLocks(got))
	}
	res = e.release("s-nobody", "order/1")
	if len(res.Released) != 0 || len(res.NotHeld) != 1 || res.NotHeld[0] != "order/1" {
		e.t.Fatalf("release by a stranger: %+v", res)
	}
}

func testReleaseStaleToken(e *env) {
	bob := e.grant(exclusive("order/1", owner("bob")))
	_, err := e.m.Release(e.t.Context(), holdfast.ReleaseRequest{Session: "s-bob", Keys: keys("order/1"), Token: bob.Token + 1})
	e.wantStale("release with another token", err, bob)
	e.wantLive("after a refused release", bob)
	res, err := e.m.Release(e.t.Context(), holdfast.ReleaseRequest{Session: "s-bob", Keys: keys("order/1"), Token: bob.Token})
	if err != nil {
		e.t.Fatalf("release with the right token: %v", err)
	}
	wantLocks(e.t, "released", res.Released, []holdfast.Lock{bob})
}

// A token names one grant, so it goes with exactly one key (API.md: "with
// one key only").
func testReleaseTokenNeedsOneKey(e *env) {
	res := e.acquire(holdfast.AcquireRequest{Keys: keys("order/1", "order/2"), Owner: owner("bob")})
	_, err := e.m.Release(e.t.Context(), holdfast.ReleaseRequest{Session: "s-bob", Keys: keys("order/1", "order/2"), Token: res.Locks[0].Token})
	e.wantInvalid("release of two keys with a token", err, "token")
	wantLocks(e.t, "after the refused release", e.locks(holdfast.LockQuery{Session: "s-bob"}), res.Locks)
}
