package client

import (
	"context"
	"sync"
	"time"

	"github.com/holdfast/holdfast"
)

// coalescer gathers the operations that callers make concurrently into
// POST /v1/batch requests: the first operation of a batch waits at most
// linger for others to join it, and a full batch leaves at once. The
// server runs a batch in one durable commit, so many callers share one
// request and one fsync.
type coalescer struct {
	c      *Client
	linger time.Duration
	max    int

	mu      sync.Mutex
	pending []pendingOp
	timer   *time.Timer // flushes pending after linger; nil when none
}

type pendingOp struct {
	op   Op
	done chan Result // buffered: the sender never waits for the caller
}

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
	p := pendingOp{op: op, done: make(chan Result, 1)}
	k.mu.Lock()
	k.pending = append(k.pending, p)
	switch {
	case len(k.pending) >= k.max:
		batch := k.takeLocked()
		k.mu.Unlock()
		go k.send(batch)
	case len(k.pending) == 1:
		k.timer = time.AfterFunc(k.linger, k.flush)
		k.mu.Unlock()
	default:
		k.mu.Unlock()
	}
	select {
	case r := <-p.done:
		return r
	case <-ctx.Done():
		return Result{Err: &holdfast.UnavailableError{Err: ctx.Err()}}
	}
}

// flush sends whatever is pending when the linger is over.
func (k *coalescer) flush() {
	k.mu.Lock()
	batch := k.takeLocked()
	k.mu.Unlock()
	if len(batch) > 0 {
		k.send(batch)
	}
}

func (k *coalescer) takeLocked() []pendingOp {
	if k.timer != nil {
		k.timer.Stop()
		k.timer = nil
	}
	batch := k.pending
	k.pending = nil
	return batch
}

// send carries one batch. An error of the batch as a whole (transport,
// authentication) is every operation's error, as it would have been had
// each been sent alone.
func (k *coalescer) send(batch []pendingOp) {
	ops := make([]Op, len(batch))
	for i, p := range batch {
		ops[i] = p.op
	}
	// No caller's context may cut the others' request short; each caller
	// stops waiting on its own context instead.
	results, err := k.c.Batch(context.Background(), ops)
	for i, p := range batch {
		if err != nil {
			p.done <- Result{Err: err}
			continue
		}
		p.done <- results[i]
	}
}
