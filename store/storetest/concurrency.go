package storetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/holdfast/holdfast"
)

var concurrencyCases = []testCase{
	{"RandomOperations", testRandomOperations},
}

// concurrencyKeys is a small key space with ancestors and descendants, so
// that random requests collide often and across levels.
var concurrencyKeys = []string{"page/1", "page/1/s/1", "page/1/s/2", "page/1/s/2/p/1", "page/2", "page/2/s/1", "page/3"}

// Workers acquire, release, renew, heartbeat, end sessions and
// force-release at random, moving the clock as they go so that locks
// expire and idle sessions end in the middle of it all, while a checker
// lists every lock, over and over, and requires that no two sessions ever
// hold conflicting live locks. Every grant's token must be above every
// token granted before the request began, unless the session already held
// that key with that token (re-entrance).
func testRandomOperations(e *env) {
	const workers, ops = 8, 300
	var (
		maxToken atomic.Uint64 // highest token of a completed grant
		done     = make(chan struct{})
		wg       sync.WaitGroup
		mu       sync.Mutex
		failures []string
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		failures = append(failures, fmt.Sprintf(format, args...))
	}
	raise := func(t uint64) {
		for {
			cur := maxToken.Load()
			if t <= cur || maxToken.CompareAndSwap(cur, t) {
				return
			}
		}
	}

	checked := make(chan int)
	go func() {
		seen := map[[2]string]uint64{}
		n := 0
		defer func() { checked <- n }()
		for {
			select {
			case <-done:
				return
			default:
			}
			page, err := e.m.Locks(e.t.Context(), holdfast.LockQuery{Limit: 1000})
			if err != nil {
				fail("Locks: %v", err)
				return
			}
			if msg := conflictIn(page.Locks); msg != "" {
				fail("listing %d: %s", n, msg)
				return
			}
			for _, l := range page.Locks {
				id := [2]string{l.Key, l.Owner.Session}
				if l.Token < seen[id] {
					fail("listing %d: %s has token %d after %d", n, l.Key, l.Token, seen[id])
				}
				seen[id] = l.Token
			}
			n++
		}
	}()

	for w := range workers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 1))
			o := owner(fmt.Sprintf("w%d", w))
			held := map[string]uint64{} // key → token, as far as this worker knows
			ctx := e.t.Context()
			pick := func() string { return concurrencyKeys[r.IntN(len(concurrencyKeys))] }
			for range ops {
				e.advance(200 * time.Millisecond)
				switch p := r.IntN(100); {
				case p < 50:
					req := holdfast.AcquireRequest{Keys: keys(pick()), Owner: o, TTL: holdfast.Duration(time.Duration(5+r.IntN(60)) * time.Second)}
					if r.IntN(2) == 0 {
						req.Keys = append(req.Keys, pick())
					}
					if r.IntN(2) == 0 {
						req.Mode = holdfast.Shared
					}
					if r.IntN(4) == 0 {
						req.IdleTimeout = holdfast.Duration(20 * time.Second)
					}
					before := maxToken.Load()
					res, err := e.m.Acquire(ctx, req)
					if errors.Is(err, holdfast.ErrLocked) {
						continue
					}
					if err != nil {
						fail("Acquire: %v", err)
						return
					}
					for _, l := range res.Locks {
						if l.Token <= before && held[l.Key] != l.Token {
							fail("grant %s: token %d not above %d, and not a re-entrant keep", fmtLock(l), l.Token, before)
						}
						held[l.Key] = l.Token
						raise(l.Token)
					}
				case p < 70:
					k := pick()
					if _, err := e.m.Release(ctx, holdfast.ReleaseRequest{Session: o.Session, Keys: keys(k)}); err != nil {
						fail("Release: %v", err)
						return
					}
					delete(held, k)
				case p < 78:
					_, err := e.m.Renew(ctx, holdfast.RenewRequest{Session: o.Session})
					if err != nil && !errors.Is(err, holdfast.ErrLockLost) {
						fail("Renew: %v", err)
						return
					}
				case p < 85:
					_, err := e.m.Heartbeat(ctx, holdfast.HeartbeatRequest{Session: o.Session})
					if err != nil && !errors.Is(err, holdfast.ErrLockLost) {
						fail("Heartbeat: %v", err)
						return
					}
				case p < 95:
					_, err := e.m.ForceRelease(ctx, holdfast.ForceReleaseRequest{Keys: keys(pick()), Reason: "chaos", Actor: o.Session})
					if err != nil {
						fail("ForceRelease: %v", err)
						return
					}
				default:
					if _, err := e.m.EndSession(ctx, holdfast.EndSessionRequest{Session: o.Session}); err != nil {
						fail("EndSession: %v", err)
						return
					}
					clear(held)
				}
			}
		})
	}
	wg.Wait()
	close(done)
	listings := <-checked
	for _, f := range failures {
		e.t.Error(f)
	}
	if msg := conflictIn(e.locks(holdfast.LockQuery{})); msg != "" {
		e.t.Errorf("final listing: %s", msg)
	}
	e.t.Logf("%d workers × %d operations, %d listings checked", workers, ops, listings)
}

// conflictIn describes the first pair of conflicting locks of different
// sessions, or returns "".
func conflictIn(ls []holdfast.Lock) string {
	for i, a := range ls {
		for _, b := range ls[i+1:] {
			if a.Owner.Session == b.Owner.Session || (a.Mode == holdfast.Shared && b.Mode == holdfast.Shared) {
				continue
			}
			if holdfast.Covers(a.Key, b.Key) || holdfast.Covers(b.Key, a.Key) {
				return "conflicting holders " + fmtLock(a) + " and " + fmtLock(b)
			}
		}
	}
	return ""
}
