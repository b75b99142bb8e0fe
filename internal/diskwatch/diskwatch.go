// Package diskwatch notices when the disk under an embedded store stops
// completing its writes: a write or fdatasync still under way after a
// bound. The store then fails closed while it lasts: its callers,
// those already waiting for that write among them, fail with
// store.ErrUnavailable (a 503 with Retry-After) rather than wait with no
// end, and its Ping fails, so that /readyz takes the server out of its load
// balancer. Once the write completes the store serves again; a write that
// fails instead fails the store until it is reopened, as before.
package diskwatch

import (
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/holdfast/holdfast/store"
)

// defaultLimit is the embedded stores' bound by default, the same as
// PostgreSQL's (pgstore.DefaultTimeout): far above what a write and its
// fdatasync take on a disk that works, below a person's patience.
const defaultLimit = 5 * time.Second

// Watch times a store's writes and syncs, each in one of a fixed number of
// slots (one per goroutine that writes).
type Watch struct {
	name  string // the store, for errors and logs
	limit time.Duration
	log   *slog.Logger
	// base is when the watch began; times are kept as durations since
	// it, on the monotonic clock, so that a step of the wall clock
	// neither hides a stall nor makes one up.
	base time.Time

	started []atomic.Int64 // per slot: when its write began, since base plus 1; 0: idle
	// cur is the episode callers wait against: its ch is closed once a
	// stall is declared, after err is set. A new one replaces it when
	// the stall ends.
	cur atomic.Pointer[episode]

	mu   sync.Mutex // orders declaring and ending stalls
	stop chan struct{}
	done chan struct{}
}

type episode struct {
	ch    chan struct{}
	err   error
	since time.Duration // when the stalled write began, since base
}

func newEpisode() *episode { return &episode{ch: make(chan struct{})} }

// New starts a Watch of slots slots that declares a stall once a write
// has been under way for limit: defaultLimit when zero, none when
// negative (the stores' Config.Timeout). Close stops it.
func New(name string, limit time.Duration, slots int, log *slog.Logger) *Watch {
	if limit == 0 {
		limit = defaultLimit
	}
	w := &Watch{name: name, limit: limit, log: log, base: time.Now(), started: make([]atomic.Int64, slots),
		stop: make(chan struct{}), done: make(chan struct{})}
	w.cur.Store(newEpisode())
	if limit <= 0 {
		close(w.done)
		return w
	}
	go w.loop(checkEvery(limit))
	return w
}

// checkEvery is how often the watch looks at its slots: a stall is
// declared at most this long after the bound has passed.
func checkEvery(limit time.Duration) time.Duration {
	return min(max(limit/4, time.Millisecond), time.Second)
}

// Close stops the watch, once; it does not end a stall.
func (w *Watch) Close() {
	close(w.stop)
	<-w.done
}

// Limit is the bound the watch applies, negative for none.
func (w *Watch) Limit() time.Duration { return w.limit }

func (w *Watch) elapsed() time.Duration { return time.Since(w.base) }

// Begin notes that slot's goroutine starts a write or sync now.
func (w *Watch) Begin(slot int) { w.started[slot].Store(int64(w.elapsed()) + 1) }

// End notes that slot's write or sync has returned (after the store has
// recorded its failure, if it failed), and ends the stall if that write
// was the last one stalled.
func (w *Watch) End(slot int) {
	began := w.started[slot].Swap(0)
	// A write that took the limit or longer may have been found stalled
	// by a check that read its slot before it was cleared, whatever Err
	// says now: check again, after that one.
	if w.limit > 0 && began != 0 && w.elapsed()-time.Duration(began-1) >= w.limit {
		w.check()
	}
}

// Err is the stall, wrapping store.ErrUnavailable, while one lasts; nil
// otherwise.
func (w *Watch) Err() error {
	ep := w.cur.Load()
	select {
	case <-ep.ch:
		return ep.err
	default:
		return nil
	}
}

// Wait waits until durable is closed (nil) or a stall is declared (the
// stall's error); a durable already closed wins. It does not end with its
// caller's context: the commit it waits for is made, and a caller that
// went away must not have it count as failed (its events would not be
// published); the limit bounds the wait instead.
func (w *Watch) Wait(durable <-chan struct{}) error {
	select {
	case <-durable:
		return nil
	default:
	}
	ep := w.cur.Load()
	select {
	case <-durable:
		return nil
	case <-ep.ch:
		select {
		case <-durable:
			return nil
		default:
			return ep.err
		}
	}
}

func (w *Watch) loop(every time.Duration) {
	defer close(w.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			w.check()
		case <-w.stop:
			return
		}
	}
}

// oldest is when the oldest write under way began, since base; ok is
// false when none is.
func (w *Watch) oldest() (began time.Duration, ok bool) {
	var first int64
	for i := range w.started {
		if at := w.started[i].Load(); at != 0 && (first == 0 || at < first) {
			first = at
		}
	}
	return time.Duration(first - 1), first != 0
}

// check declares a stall when a write has been under way for the limit or
// longer, and ends the one declared when none has.
func (w *Watch) check() {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.elapsed()
	began, busy := w.oldest()
	stalled := w.limit > 0 && busy && now-began >= w.limit
	ep := w.cur.Load()
	declared := ep.err != nil
	switch {
	case stalled && !declared:
		ep.since = began
		// When the write began stays true while the stall lasts.
		at := w.base.Add(began).UTC().Format("15:04:05.000 UTC")
		ep.err = fmt.Errorf("%s: %w: the disk has not completed a write begun at %s, past the bound of %s",
			w.name, store.ErrUnavailable, at, w.limit)
		close(ep.ch)
		w.log.Error(w.name+": the disk has not completed a write within the bound; failing every request with 503 until it does",
			slog.String("write_began", at), slog.Duration("bound", w.limit))
	case !stalled && declared:
		w.log.Warn(w.name+": the disk completed the stalled write; serving again",
			slog.Duration("stalled_for", (now-ep.since).Round(time.Millisecond)))
		w.cur.Store(newEpisode())
	}
}
