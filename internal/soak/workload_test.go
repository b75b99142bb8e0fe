package soak_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/client"
	"github.com/holdfast/holdfast/server"
)

const (
	sessions = 10_000
	workers  = 8
	keys     = 500
	// editors is how many sessions of each worker acquire and release;
	// the others only heartbeat, like open but idle pages.
	editors = 100
	// Each round, each worker's pages come and go: some editors log out,
	// some idle pages are closed without a word (their sessions idle out),
	// and some visitors lock and release one key without an idle timeout,
	// never to return.
	logouts   = 2
	abandoned = 5
	visitors  = 20
)

// The store's clock moves on by step with every round, so that the
// retention of ended sessions and lost locks (24 hours) passes every two
// rounds and the soak reaches, in a few rounds, the steady state a server
// reaches after a day. Idle timeouts and lock lifetimes are sized in
// rounds: rounds end together, so every page heartbeats once a round.
const (
	step        = 12 * time.Hour
	idleTimeout = 18 * time.Hour // a round and a half
	lockTTL     = 24 * time.Hour // two rounds: editors who wait longer lose the lock
)

// clock is the store's clock: the real time plus step for every round
// done.
type clock struct{ rounds atomic.Int64 }

func (c *clock) now() time.Time {
	return time.Now().Add(time.Duration(c.rounds.Load()) * step)
}

// counts are the outcomes of the soak's operations.
type counts struct {
	heartbeats, lostReported, grants, refusals, releases, expiredBeforeRelease,
	logouts, abandoned, visitors, errors atomic.Int64
	firstError atomic.Value
}

func (c *counts) fail(err error) {
	c.errors.Add(1)
	c.firstError.CompareAndSwap(nil, err.Error())
}

// worker drives one eighth of the pages: sessions it heartbeats every
// round, of which the first editors also lock and release.
type worker struct {
	c     *client.Client
	id    int
	rng   *rand.Rand
	pages []string
	held  map[string]string // session → key
	born  int               // sessions this worker has started
	n     *counts
}

func newWorker(c *client.Client, id int, n *counts) *worker {
	w := &worker{c: c, id: id, rng: rand.New(rand.NewPCG(uint64(id), 42)), held: map[string]string{}, n: n}
	for range sessions / workers {
		w.pages = append(w.pages, w.newSession())
	}
	return w
}

func (w *worker) newSession() string {
	w.born++
	return fmt.Sprintf("soak-%d-%d", w.id, w.born)
}

// round heartbeats every page in batches, lets a random few editors
// acquire a key (often taken) or release the one they hold, then lets
// pages come and go.
func (w *worker) round(ctx context.Context) {
	for i := 0; i < len(w.pages); i += server.MaxBatchOps {
		var ops []client.Op
		for _, s := range w.pages[i:min(i+server.MaxBatchOps, len(w.pages))] {
			ops = append(ops, client.HeartbeatOp(holdfast.HeartbeatRequest{Session: s, IdleTimeout: holdfast.Duration(idleTimeout)}))
		}
		results, err := w.c.Batch(ctx, ops)
		if err != nil {
			w.n.fail(err)
			return
		}
		for _, r := range results {
			if r.Err != nil {
				w.n.fail(r.Err)
				continue
			}
			w.n.heartbeats.Add(1)
			w.n.lostReported.Add(int64(len(r.Heartbeat.Lost)))
		}
	}
	for range 50 {
		s := w.pages[w.rng.IntN(editors)]
		if key, ok := w.held[s]; ok {
			w.release(ctx, s, key)
			delete(w.held, s)
			continue
		}
		key := fmt.Sprintf("soak/%d", w.rng.IntN(keys))
		if w.acquire(ctx, holdfast.AcquireRequest{Keys: []string{key}, Owner: holdfast.Owner{Session: s, Name: s}, TTL: holdfast.Duration(lockTTL)}) {
			w.held[s] = key
		}
	}
	for range logouts {
		i := w.rng.IntN(editors)
		if _, err := w.c.EndSession(ctx, holdfast.EndSessionRequest{Session: w.pages[i]}); err != nil {
			w.n.fail(err)
		}
		delete(w.held, w.pages[i])
		w.pages[i] = w.newSession()
		w.n.logouts.Add(1)
	}
	for range abandoned {
		w.pages[editors+w.rng.IntN(len(w.pages)-editors)] = w.newSession()
		w.n.abandoned.Add(1)
	}
	for range visitors {
		s, key := w.newSession(), fmt.Sprintf("soak/%d", w.rng.IntN(keys))
		if w.acquire(ctx, holdfast.AcquireRequest{Keys: []string{key}, Owner: holdfast.Owner{Session: s, Name: s}}) {
			w.release(ctx, s, key)
		}
		w.n.visitors.Add(1)
	}
}

// acquire reports whether the lock was granted; a refusal is expected.
func (w *worker) acquire(ctx context.Context, req holdfast.AcquireRequest) bool {
	_, err := w.c.Acquire(ctx, req)
	switch {
	case err == nil:
		w.n.grants.Add(1)
		return true
	case errors.Is(err, holdfast.ErrLocked):
		w.n.refusals.Add(1)
	default:
		w.n.fail(err)
	}
	return false
}

func (w *worker) release(ctx context.Context, s, key string) {
	res, err := w.c.Release(ctx, holdfast.ReleaseRequest{Session: s, Keys: []string{key}})
	if err != nil {
		w.n.fail(err)
		return
	}
	w.n.releases.Add(1)
	if len(res.NotHeld) > 0 {
		w.n.expiredBeforeRelease.Add(1)
	}
}
