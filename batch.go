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
// This is what serves POST /v1/batch.
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
	start := m.started()
	var (
		b *batch
		t *touched
	)
	err := m.store.Update(ctx, func(tx store.Tx) error {
		if pr, ok := tx.(store.Preparer); ok {
			if t == nil {
				t = &touched{}
				fn(context.WithValue(ctx, batchKey{}, &batch{m: m, touched: t}))
			}
			if err := pr.Prepare(t.keys, t.sessions, t.reporting); err != nil {
				return err
			}
		}
		b = &batch{m: m, tx: tx}
		fn(context.WithValue(ctx, batchKey{}, b))
		return b.failed
	})
	if b != nil && b.failed != nil && errors.Is(err, b.failed) {
		fn(ctx)
		return nil
	}
	if b == nil {
		return classify(err)
	}
	m.settle(b.ops, err)
	for _, p := range b.ops {
		m.observe(p.name, start, p.err)
		p.recycle()
	}
	return classify(err)
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
