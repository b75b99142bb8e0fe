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
// leaves when a batch comes back, when it is full, or at the latest after
// linger. The server runs a batch in one durable commit, so many callers
// share one request and one fsync.
type coalescer struct {
	c      *Client
	linger time.Duration
	max    int

	mu       sync.Mutex
	pending  []pendingOp
	inFlight int
	timer    *time.Timer // sends pending after linger; nil when none
}

// maxInFlight is how many batches may be on their way at once: two keep
// the server busy with one while the other travels.
const maxInFlight = 2

type pendingOp struct {
	op   Op
	done chan Result // buffered: the sender never waits for the caller
}

// resultChans recycles the channels that carry one result to its caller,
// which were a good part of the coalescer's allocations.
var resultChans = sync.Pool{New: func() any { return make(chan Result, 1) }}

func newCoalescer(c *Client, linger time.Duration, max int) *coalescer {
	if max <= 0 || max > maxBatchOps {
		max = maxBatchOps
	}
	return &coalescer{c: c, linger: linger, max: max}
}

// maxBatchOps is the most operations the server takes in one batch.
const maxBatchOps = 1000

// do runs op as part of a batch and returns its result, or the context's
// error if ctx ends first (the operation may still be carried out, as a
// request cut off in flight may).
func (k *coalescer) do(ctx context.Context, op Op) Result {
	p := pendingOp{op: op, done: resultChans.Get().(chan Result)}
	k.mu.Lock()
	k.pending = append(k.pending, p)
	var batch []pendingOp
	switch {
	case k.inFlight < maxInFlight || len(k.pending) >= k.max:
		batch = k.takeLocked()
	case k.timer == nil:
		k.timer = time.AfterFunc(k.linger, k.lingerOver)
	}
	k.mu.Unlock()
	if batch != nil {
		go k.send(batch)
	}
	select {
	case r := <-p.done:
		resultChans.Put(p.done)
		return r
	case <-ctx.Done():
		// The result will still be sent: the channel is not reused.
		return Result{Err: &holdfast.UnavailableError{Err: ctx.Err()}}
	}
}

// lingerOver sends what has waited for a batch to come back long enough.
func (k *coalescer) lingerOver() {
	k.mu.Lock()
	k.timer = nil
	var batch []pendingOp
	if len(k.pending) > 0 {
		batch = k.takeLocked()
	}
	k.mu.Unlock()
	if batch != nil {
		k.send(batch)
	}
}

// takeLocked takes the next batch of pending operations and counts it in
// flight.
func (k *coalescer) takeLocked() []pendingOp {
	if k.timer != nil {
		k.timer.Stop()
		k.timer = nil
	}
	n := min(len(k.pending), k.max)
	batch := k.pending[:n:n]
	k.pending = k.pending[n:]
	if len(k.pending) == 0 {
		k.pending = nil
	}
	k.inFlight++
	return batch
}

// send carries batches until none is waiting: each batch that comes back
// sends what gathered meanwhile. An error of the batch as a whole
// (transport, authentication) is every operation's error, as it would have
// been had each been sent alone.
func (k *coalescer) send(batch []pendingOp) {
	for batch != nil {
		ops := make([]Op, len(batch))
		for i, p := range batch {
			ops[i] = p.op
		}
		// No caller's context may cut the others' request short; each
		// caller stops waiting on its own context instead.
		results, err := k.c.Batch(context.Background(), ops)
		for i, p := range batch {
			if err != nil {
				p.done <- Result{Err: err}
				continue
			}
			p.done <- results[i]
		}
		k.mu.Lock()
		k.inFlight--
		batch = nil
		if len(k.pending) > 0 {
			batch = k.takeLocked()
		}
		k.mu.Unlock()
	}
}
