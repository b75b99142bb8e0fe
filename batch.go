package holdfast

import (
	"context"
	"errors"
	"time"

	"github.com/holdfast/holdfast/store"
)

// Batch runs fn so that every operation it makes through the Manager with
// the context it is given shares one store transaction, and so one durable
// commit: the operations run in the order fn makes them, each answering
// exactly as it would alone, and none is durable before Batch returns.
// Operations and batches of other callers queued at the same moment may
// share the transaction too, as single operations share theirs; fn may
// then be called on another caller's goroutine, while Batch waits. This
// is what serves POST /v1/batch.
//
// If Batch returns an error, the store did not commit: every answer the
// operations gave inside fn is void, successes included. fn may be called
// more than once (the store may retry, a store that reads ahead first
// learns from a call what the operations touch, and an operation that
// fails for a reason other than a refusal makes the batch run again with
// one transaction per operation, so that its failure undoes only its own
// writes); the answers of the last call are the ones that count.
func (m *Manager) Batch(ctx context.Context, fn func(ctx context.Context)) error {
	if batchOf(ctx) != nil {
		fn(ctx)
		return nil
	}
	// A batch queues for a group's transaction like one operation, so
	// that batches and single calls that arrive together share a commit.
	r := &batchRun{m: m, ctx: ctx, fn: fn}
	p := newPending(ctx, "batch", scope{batch: r}, r, m.started())
	if g, lead := m.groups.join(p); lead {
		m.lead(p, g)
	}
	err, start := p.err, p.start
	p.recycle()
	if r.b.failed != nil {
		// One operation failed other than by refusing, so its
		// transaction did not commit: each runs again in its own.
		r.b.reset(nil)
		fn(ctx)
		return nil
	}
	for _, q := range r.b.ops {
		if err != nil {
			q.err = err
		}
		m.observe(q.name, start, q.err)
	}
	r.b.reset(nil)
	return err
}

// batchRun is a Batch as one operation of a group: a run calls fn with
// the group's transaction.
type batchRun struct {
	m   *Manager
	ctx context.Context
	fn  func(ctx context.Context)
	b   batch // the state of the last run

	touched  touched // what the operations touch, once gathered
	gathered bool
}

// run runs the batch's operations in o's transaction and gives o their
// audit entries, which are published if the transaction commits.
func (r *batchRun) run(o *op) error {
	r.b.reset(o.tx)
	r.b.m = r.m
	r.fn(context.WithValue(r.ctx, batchKey{}, &r.b))
	for _, q := range r.b.ops {
		o.audit = append(o.audit, q.op.audit...)
	}
	return r.b.failed
}

// gather adds what the batch's operations touch to t, for
// store.Preparer; the first call learns it from a call of fn that runs
// none of them.
func (r *batchRun) gather(t *touched) {
	if !r.gathered {
		r.gathered = true
		r.fn(context.WithValue(r.ctx, batchKey{}, &batch{m: r.m, touched: &r.touched}))
	}
	t.keys = append(t.keys, r.touched.keys...)
	t.sessions = append(t.sessions, r.touched.sessions...)
	t.reporting = append(t.reporting, r.touched.reporting...)
}

// batch is the shared transaction of a Batch.
type batch struct {
	m   *Manager
	tx  store.Tx
	ops []*pending // run in this transaction, in order
	// failed is set by an operation that failed other than by refusing;
	// the batch is then run again, one transaction per operation.
	failed error
	// touched, when set, only gathers what the operations would touch,
	// running none of them.
	touched *touched
}

// errGathering answers the operations of a batch's first call when it
// only gathers what they touch; the next call's answers replace it.
var errGathering = errors.New("holdfast: gathering what a batch touches")

type batchKey struct{}

func batchOf(ctx context.Context) *batch {
	b, _ := ctx.Value(batchKey{}).(*batch)
	return b
}

// update runs one operation of the batch in its transaction.
func (b *batch) update(name string, sc scope, do operation) error {
	if b.touched != nil {
		b.touched.add(sc)
		return errGathering
	}
	if b.failed != nil {
		return b.failed
	}
	p := newPending(nil, name, sc, do, time.Time{})
	if p.run(b.m, b.tx) {
		b.failed = p.err
		err := p.err
		p.recycle()
		return err
	}
	b.ops = append(b.ops, p)
	return p.err
}

// view runs one read-only operation of the batch in its transaction.
func (b *batch) view(name string, fn func(o *readOp) error) error {
	if b.touched != nil {
		return errGathering
	}
	if b.failed != nil {
		return b.failed
	}
	err := fn(newReadOp(b.m, b.tx))
	if err != nil {
		b.failed = err
		return err
	}
	b.ops = append(b.ops, newPending(nil, name, scope{}, nil, time.Time{}))
	return nil
}

// reset readies b for a run in tx, recycling the operations of the last.
func (b *batch) reset(tx store.Tx) {
	for _, p := range b.ops {
		p.recycle()
	}
	clear(b.ops)
	b.tx, b.ops, b.failed = tx, b.ops[:0], nil
}
