package storetest

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/holdfast/holdfast"
)

var seedCases = []testCase{
	{"RaceOneWinner", testRaceOneWinner},
	{"AcquireAfterRelease", testAcquireAfterRelease},
	{"AcquireAfterExpiry", testAcquireAfterExpiry},
	{"SessionEndReleasesAll", testSessionEndReleasesAll},
	{"TokensAlwaysGrow", testTokensAlwaysGrow},
}

// 64 sessions race for one key, round after round: exactly one wins each
// round, every other one is refused naming the winner.
func testRaceOneWinner(e *env) {
	const racers, rounds = 64, 20
	var last uint64
	for round := range rounds {
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			winners []holdfast.Lock
			losers  []*holdfast.LockedError
			others  []error
		)
		gate := make(chan struct{})
		for i := range racers {
			wg.Go(func() {
				<-gate
				o := owner(fmt.Sprintf("racer%02d", i))
				res, err := e.m.Acquire(e.t.Context(), exclusive("order/race", o))
				mu.Lock()
				defer mu.Unlock()
				var le *holdfast.LockedError
				switch {
				case err == nil:
					winners = append(winners, res.Locks...)
				case errors.As(err, &le):
					losers = append(losers, le)
				default:
					others = append(others, err)
				}
			})
		}
		close(gate)
		wg.Wait()
		if len(others) > 0 {
			e.t.Fatalf("round %d: unexpected errors: %v", round, others)
		}
		if len(winners) != 1 || len(losers) != racers-1 {
			e.t.Fatalf("round %d: %d winners %s and %d refused, want exactly one winner", round, len(winners), fmtLocks(winners), len(losers))
		}
		w := winners[0]
		for _, le := range losers {
			wantConflicts(e.t, le.Conflicts, []holdfast.Conflict{{Key: "order/race", RequestedKey: "order/race", Holders: []holdfast.Lock{w}}})
		}
		if w.Token <= last {
			e.t.Fatalf("round %d: token %d after %d", round, w.Token, last)
		}
		last = w.Token
		wantLocks(e.t, "released by the winner", e.release(w.Owner.Session, "order/race").Released, []holdfast.Lock{w})
	}
}

func testAcquireAfterRelease(e *env) {
	bob := e.grant(exclusive("order/1", owner("bob")))
	res := e.release("s-bob", "order/1")
	wantLocks(e.t, "released", res.Released, []holdfast.Lock{bob})
	carol := e.grant(exclusive("order/1", owner("carol")))
	if carol.Token <= bob.Token {
		e.t.Fatalf("next holder's token %d is not above %d", carol.Token, bob.Token)
	}
	e.wantLostLock("released holder's verify", bob, holdfast.LostReleased)
}

// Expired is free at once: no sweep runs between the expiry and the next
// acquire.
func testAcquireAfterExpiry(e *env) {
	req := exclusive("order/1", owner("bob"))
	req.TTL = holdfast.Duration(time.Minute)
	bob := e.grant(req)
	e.refused(exclusive("order/1", owner("carol")))
	e.advance(time.Minute + time.Second)
	carol := e.grant(exclusive("order/1", owner("carol")))
	if carol.Token <= bob.Token {
		e.t.Fatalf("next holder's token %d is not above %d", carol.Token, bob.Token)
	}
	wantLocks(e.t, "after expiry", e.locks(holdfast.LockQuery{Key: "order/1"}), []holdfast.Lock{carol})
	e.wantLostLock("expired holder's verify", bob, holdfast.LostExpired)
	wantLost(e, "expired holder's heartbeat", e.heartbeat("s-bob").Lost, []holdfast.LostLock{{Lock: bob, Reason: holdfast.LostExpired}})
	wantLost(e, "expired holder's next heartbeat", e.heartbeat("s-bob").Lost, nil)
}

func testSessionEndReleasesAll(e *env) {
	bob := owner("bob")
	res := e.acquire(holdfast.AcquireRequest{Keys: keys("order/1", "order/2"), Owner: bob})
	more := e.grant(shared("page/1", bob))
	end, err := e.m.EndSession(e.t.Context(), holdfast.EndSessionRequest{Session: bob.Session})
	if err != nil {
		e.t.Fatalf("EndSession: %v", err)
	}
	all := append(append([]holdfast.Lock(nil), res.Locks...), more)
	wantLocks(e.t, "released by the session's end", byKeySession(end.Released), byKeySession(all))
	if got := e.locks(holdfast.LockQuery{Session: bob.Session}); len(got) != 0 {
		e.t.Fatalf("ended session still lists %s", fmtLocks(got))
	}
	if got := e.sessions(holdfast.SessionQuery{Session: bob.Session}); len(got) != 0 {
		e.t.Fatalf("ended session still listed: %+v", got)
	}
	e.acquire(holdfast.AcquireRequest{Keys: keys("order/1", "order/2", "page/1"), Owner: owner("carol")})
}

func testTokensAlwaysGrow(e *env) {
	var tokens []uint64
	take := func(req holdfast.AcquireRequest) {
		for _, l := range e.acquire(req).Locks {
			tokens = append(tokens, l.Token)
		}
	}
	take(exclusive("order/1", owner("bob")))
	take(exclusive("order/2", owner("carol")))
	take(holdfast.AcquireRequest{Keys: keys("order/5", "order/3", "order/4"), Owner: owner("bob")})
	e.release("s-bob", "order/1")
	take(exclusive("order/1", owner("carol")))
	take(shared("page/1", owner("dave")))
	take(exclusive("page/1", owner("dave"))) // upgrade
	e.advance(3 * time.Hour)                 // everything expires
	take(exclusive("order/2", owner("erin")))
	take(exclusive("order/2/line/1", owner("erin")))
	wantTokensIncrease(e.t, "tokens in grant order", tokens)
}
