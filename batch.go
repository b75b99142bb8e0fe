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
// more than once (the store may retry, and an operation that fails for a
// reason other than a refusal makes the batch run again with one
// transaction per operation, so that its failure undoes only its own
// writes); the answers of the last call are the ones that count.
func (m *Manager) Batch(ctx context.Context, fn func(ctx context.Context)) error {
	if batchOf(ctx) != nil {
		fn(ctx)
		return nil
	}
	start := time.Now()
	var b *batch
	err := m.store.Update(ctx, func(tx store.Tx) error {
		b = &batch{m: m, tx: tx}
		fn(context.WithValue(ctx, batchKey{}, b))
		return b.failed
	})
	if b != nil && b.failed != nil && errors.Is(err, b.failed) {
		fn(ctx)
		return nil
	}
	err = classify(err)
	if err == nil {
		m.events.publish(b.audit)
	}
	if b != nil {
		for _, d := range b.done {
			if err != nil {
				d.err = err
			}
			m.observe(d.name, start, d.err)
		}
	}
	return err
}

// batch is the shared transaction of a Batch.
type batch struct {
	m     *Manager
	tx    store.Tx
	audit []AuditEntry // published once the batch is durable
	done  []doneOp
	// failed is set by an operation that failed other than by refusing;
	// the batch is then run again, one transaction per operation.
	failed error
}

type doneOp struct {
	name string
	err  error
}

type batchKey struct{}

func batchOf(ctx context.Context) *batch {
	b, _ := ctx.Value(batchKey{}).(*batch)
	return b
}

// update runs one operation of the batch in its transaction.
func (b *batch) update(name string, fn func(o *op) error) error {
	if b.failed != nil {
		return b.failed
	}
	o := newOp(b.m, b.tx)
	err := fn(o)
	if err != nil && !isRefusal(err) {
		b.failed = err
		return err
	}
	b.audit = append(b.audit, o.audit...)
	b.done = append(b.done, doneOp{name, err})
	return err
}

// view runs one read-only operation of the batch in its transaction.
func (b *batch) view(name string, fn func(o *readOp) error) error {
	if b.failed != nil {
		return b.failed
	}
	err := fn(newReadOp(b.m, b.tx))
	if err != nil {
		b.failed = err
		return err
	}
	b.done = append(b.done, doneOp{name, nil})
	return nil
}
