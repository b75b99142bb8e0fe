package client

import (
	"context"
	"sync"
	"time"

	"github.com/holdfast/holdfast"
)

// coalescer gathers the operations that callers make concurrently into
// POST /v1/batch requests, as a group commit does: while fewer than
// maxInFlight batches are on their way an operation leaves at once, so a
// lone caller waits for nobody; otherwise it joins the next batch, which
// leaves when a batch comes back, when it is full, after linger while
// fewer than maxLingerInFlight are on their way, or after maxGather while
// fewer than maxHung are. The server runs a batch
// in one durable commit, so many callers share one request and one fsync.
type coalescer struct {
	c      *Client
	linger time.Duration
	max    int
	timer  *time.Timer // runs lingerOver; armed says whether it is set

	mu       sync.Mutex
	next     *batch // gathers operations; nil when none waits
	free     []*batch
	inFlight int
	armed    bool
}

// batch is a request of /v1/batch as it gathers, and what its callers
// wait on. Batches are reused, buffers and all: a coalesced call then
// allocates little beyond its result.
type batch struct {
	since   time.Time // when its first operation came
	body    []byte
	ops     []Op
	keys    []string      // the ops' keys, copied: a caller may reuse its slice once it stops waiting
	done    []chan Result // buffered: the sender never waits for a caller
	results []Result
}

// add writes op, whose body encode appends, into the batch.
func (b *batch) add(op Op, encode func([]byte) []byte, done chan Result) {
	if len(b.ops) == 0 {
		b.since = time.Now()
		b.body = append(b.body[:0], batchStart...)
	} else {
		b.body = append(b.body, ',')
	}
	b.body = appendEnvelope(b.body, op.name, encode)
	if keys := op.echo.keys; len(keys) > 0 {
		n := len(b.keys)
		b.keys = append(b.keys, keys...)
		op.echo.keys = b.keys[n:len(b.keys):len(b.keys)]
	}
	b.ops = append(b.ops, op)
	b.done = append(b.done, done)
}

// maxInFlight is how many batches may be on their way at once: two keep
// the server busy with one while the other travels.
const maxInFlight = 2

// maxLingerInFlight bounds the batches that the linger sends before one
// comes back. Unbounded, a server slower than the linger received a batch
// every linger, ever smaller, each paying its request and commit: the
// slower the server, the more work it was given.
const maxLingerInFlight = 2 * maxInFlight

// maxGather bounds how long an operation waits for a batch to come back
// before its own leaves regardless: batches that hang (a server that
// stopped answering, a connection dropped without a word, which TCP
// keepalive notices only after minutes) must not hold up the callers that
// come after them, whose single calls would have gone on a connection of
// their own. A server that answers at all answers far sooner; one slower
// than this is sent one more batch a second, up to maxHung.
const maxGather = time.Second

// maxHung bounds the batches on their way at all. Batches are sent
// without a deadline (each carries many callers' operations), so one that
// a server never answers keeps its connection until TCP gives up on it:
// past this, a gathering batch waits for one to come back, and callers
// without a deadline of their own wait with it.
const maxHung = 2 * maxLingerInFlight

// maxFree bounds the batches kept for reuse; more than one per batch in
// flight and the one gathering would never serve.
const maxFree = maxLingerInFlight + 1

// resultChans recycles the channels that carry one result to its caller,
// which were a good part of the coalescer's allocations.
var resultChans = sync.Pool{New: func() any { return make(chan Result, 1) }}

func newCoalescer(c *Client, linger time.Duration, max int) *coalescer {
	if max <= 0 || max > maxBatchOps {
		max = maxBatchOps
	}
	k := &coalescer{c: c, linger: linger, max: max}
	k.timer = time.AfterFunc(time.Hour, k.lingerOver)
	k.timer.Stop()
	return k
}

// maxBatchOps is the most operations the server takes in one batch.
const maxBatchOps = 1000

// do runs op, whose body encode appends, as part of a batch and returns
// its result, or the context's error if ctx ends first (the operation may
// still be carried out, as a request cut off in flight may).
func (k *coalescer) do(ctx context.Context, op Op, encode func([]byte) []byte) Result {
	if err := ctx.Err(); err != nil {
		// Not sent, as a single call's request is not once its context
		// has ended.
		return Result{Err: &holdfast.UnavailableError{Err: err}}
	}
	done := resultChans.Get().(chan Result)
	k.mu.Lock()
	if k.next == nil {
		k.next = k.newBatchLocked()
	}
	k.next.add(op, encode, done)
	var b *batch
	switch {
	case k.inFlight < maxInFlight || len(k.next.ops) >= k.max:
		b = k.takeLocked()
	case !k.armed:
		k.armed = true
		k.timer.Reset(k.linger)
	}
	k.mu.Unlock()
	if b != nil {
		go k.send(b)
	}
	select {
	case r := <-done:
		resultChans.Put(done)
		return r
	case <-ctx.Done():
		// The result will still be sent: the channel is not reused.
		return Result{Err: &holdfast.UnavailableError{Err: ctx.Err()}}
	}
}

func (k *coalescer) newBatchLocked() *batch {
	if n := len(k.free); n > 0 {
		b := k.free[n-1]
		k.free = k.free[:n-1]
		return b
	}
	return &batch{}
}

// lingerOver sends what has waited for a batch to come back long enough,
// unless enough are on their way: the next to come back sends it then, or
// this again once it has waited maxGather. A run that comes late, after
// the batch left another way, at worst sends the next one early.
func (k *coalescer) lingerOver() {
	k.mu.Lock()
	k.armed = false
	var b *batch
	if k.next != nil {
		waited := time.Since(k.next.since)
		switch {
		case k.inFlight < maxLingerInFlight, waited >= maxGather && k.inFlight < maxHung:
			b = k.takeLocked()
		case waited < maxGather:
			k.armed = true
			k.timer.Reset(maxGather - waited)
		}
	}
	k.mu.Unlock()
	if b != nil {
		k.send(b)
	}
}

// takeLocked takes the gathering batch and counts it in flight.
func (k *coalescer) takeLocked() *batch {
	if k.armed {
		k.timer.Stop()
		k.armed = false
	}
	b := k.next
	k.next = nil
	k.inFlight++
	return b
}

// send carries batches until none is waiting: each batch that comes back
// sends what gathered meanwhile. An error of the batch as a whole
// (transport, authentication) is every operation's error, as it would have
// been had each been sent alone.
func (k *coalescer) send(b *batch) {
	for b != nil {
		b.body = append(b.body, batchEnd...)
		// No caller's context may cut the others' request short; each
		// caller stops waiting on its own context instead.
		results, err := k.c.sendBatch(context.Background(), b.body, b.ops, b.results[:0])
		for i, done := range b.done {
			if err != nil {
				done <- Result{Err: err}
				continue
			}
			done <- results[i]
		}
		if err == nil {
			b.results = results
		} else {
			// The server may have answered before it read the whole body,
			// and the transport may still be sending it: the next batch
			// gathers in a buffer of its own.
			b.body = nil
		}
		// Drop what the callers now hold, for the collector.
		clear(b.ops)
		clear(b.keys)
		clear(b.done)
		clear(b.results)
		b.ops, b.keys, b.done, b.results = b.ops[:0], b.keys[:0], b.done[:0], b.results[:0]

		k.mu.Lock()
		k.inFlight--
		if len(k.free) < maxFree {
			k.free = append(k.free, b)
		}
		b = nil
		if k.next != nil {
			b = k.takeLocked()
		}
		k.mu.Unlock()
	}
}
