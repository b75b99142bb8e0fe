package holdfast

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
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
// If Batch returns an error, every answer the operations gave inside fn is
// void, successes included: the store did not commit, or, if the error is
// ErrUnavailable, may have (as for any operation; see store.Store's
// Update). fn may be
// called more than once: where the store reads ahead, first to learn what
// the operations touch (their answers then are void); again if the store
// retries the transaction; if an operation fails for a reason other
// than a refusal, the batch runs again with one transaction per
// operation, so that its failure undoes only its own writes, unless the
// store could not answer at all (store.ErrUnavailable), which fails the
// whole batch at once; and, for Config.Observer, to learn the operations
// of a batch the store failed before running it (their answers are void
// then too). The answers of the last call are the ones that count. Like
// a single operation's, a batch's transaction may still commit after ctx
// ends, once it is under way. A panic in fn, or in one of its operations,
// is raised again by Batch, with the stack where it happened in its
// message, and nothing of the batch is kept; fn must not end its
// goroutine otherwise (runtime.Goexit, as testing's FailNow does), since
// that goroutine may be another caller's.
func (m *Manager) Batch(ctx context.Context, fn func(ctx context.Context)) error {
	if batchOf(ctx) != nil {
		fn(ctx)
		return nil
	}
	// Where the store reads ahead, a batch queues for a group's
	// transaction like single operations, so that batches and single
	// calls that arrive together share its round trips and its commit; it
	// learns first, on its own goroutine, what it touches and how many
	// operations it holds, which bound its group's size. Elsewhere the
	// store merges concurrent commits itself, and a batch commits alone
	// at once.
	r := &batchRun{m: m, ctx: ctx, fn: fn, b: batch{m: m}}
	p := newPending(ctx, "batch", scope{batch: r}, r, m.started())
	if !m.prepares.Load() {
		m.commitAlone(p)
	} else if r.gather(); r.panicked == nil {
		if g, lead := m.groups.join(p); lead {
			m.lead(p, g)
		}
	}
	err, start := p.err, p.start
	p.recycle()
	if r.panicked != nil {
		r.b.reset(nil)
		panic(r.panicked)
	}
	if r.b.failed != nil && errors.Is(err, r.b.failed) && !storeDown(err) {
		// One operation failed other than by refusing, so the batch's
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
	if len(r.b.ops) == 0 && err != nil && m.cfg.Observer != nil {
		// It never ran: it waited in the queue too long, its caller gave
		// up there, or the store failed before running anything. Its
		// operations are observed all the same, by their names, learnt
		// only now so that a batch that runs keeps none.
		for _, name := range r.names() {
			m.observe(name, start, err)
		}
	}
	r.b.reset(nil)
	return err
}

// batchRun is a Batch as one operation of a group: a run calls fn with
// the group's transaction, on the goroutine of whoever leads the group.
type batchRun struct {
	m   *Manager
	ctx context.Context
	fn  func(ctx context.Context)
	b   batch // the state of the last run

	touched  touched // what the operations touch
	size     int     // how many operations fn makes
	gathered bool    // touched and size are known
	// panicked is what fn panicked with, to be raised again on the
	// Batch caller's goroutine rather than on the group leader's.
	panicked *recovered
}

// run runs the batch's operations in o's transaction; its leader
// publishes their audit entries if it commits (giveBack).
func (r *batchRun) run(o *op) error {
	r.b.reset(o.tx)
	if r.panicked == nil {
		r.call(&r.b)
	}
	if r.panicked != nil {
		r.b.failed = errPanicked
	}
	return r.b.failed
}

// gather learns what the operations touch from a call of fn that runs
// none of them.
func (r *batchRun) gather() {
	g := &batch{m: r.m, touched: &r.touched}
	r.call(g)
	r.size, r.gathered = g.size, true
}

// names learns the operations' names from a call of fn that runs none of
// them, for a batch that never ran.
func (r *batchRun) names() []string {
	g := &batch{m: r.m, touched: &touched{}, naming: true}
	r.call(g)
	return g.names
}

// call calls fn in b, keeping a panic, and where it came from, for the
// Batch caller.
func (r *batchRun) call(b *batch) {
	defer func() {
		if v := recover(); v != nil && r.panicked == nil {
			if p, ok := v.(*recovered); ok { // an operation's, raised by update
				r.panicked = p
				return
			}
			r.panicked = &recovered{value: v, stack: debug.Stack()}
		}
	}()
	r.fn(context.WithValue(r.ctx, batchKey{}, b))
}

// recovered is what a batch's fn or an operation panicked with, raised
// again on its caller's goroutine: it may have run on another, so its
// stack goes along.
type recovered struct {
	value any
	stack []byte
}

func (p *recovered) Error() string {
	return fmt.Sprintf("%v\n\ngoroutine of the panic:\n%s", p.value, p.stack)
}

// Unwrap gives the value of the panic, if an error.
func (p *recovered) Unwrap() error {
	err, _ := p.value.(error)
	return err
}

// weight is how many operations p stands for in its group.
func (p *pending) weight() int {
	if r := p.scope.batch; r != nil {
		return max(r.size, 1)
	}
	return 1
}

// operations is how many operations p ran in its last transaction: a
// batch's, or one.
func (p *pending) operations() int {
	if r := p.scope.batch; r != nil {
		return len(r.b.ops)
	}
	return 1
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
	// running none of them; size counts them, and names names them when
	// naming is set.
	touched *touched
	size    int
	naming  bool
	names   []string
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
		return b.gathering(name)
	}
	if b.failed != nil {
		return b.skip(name)
	}
	p := newPending(nil, name, sc, do, time.Time{})
	b.ops = append(b.ops, p)
	if p.run(b.m, b.tx) {
		if p.panicked != nil {
			// Raised in fn, as if the operation had not been caught:
			// the whole batch fails, and Batch raises it on its caller.
			panic(p.panicked)
		}
		b.failed = p.err
	}
	return p.err
}

// gathering counts an operation of a call that only gathers, and keeps
// its name when asked to (batchRun.names).
func (b *batch) gathering(name string) error {
	b.size++
	if b.naming {
		b.names = append(b.names, name)
	}
	return errGathering
}

// skip answers an operation that comes after one that failed the batch's
// transaction; it is observed with that failure.
func (b *batch) skip(name string) error {
	p := newPending(nil, name, scope{}, nil, time.Time{})
	p.err = b.failed
	b.ops = append(b.ops, p)
	return b.failed
}

// view runs one read-only operation of the batch in its transaction.
func (b *batch) view(name string, fn func(o *readOp) error) error {
	if b.touched != nil {
		return b.gathering(name)
	}
	if b.failed != nil {
		return b.skip(name)
	}
	err := fn(newReadOp(b.m, b.tx))
	if err != nil && !isRefusal(err) {
		b.failed = err
	}
	p := newPending(nil, name, scope{}, nil, time.Time{})
	p.err = err
	b.ops = append(b.ops, p)
	return err
}

// reset readies b for a run in tx, recycling the operations of the last.
func (b *batch) reset(tx store.Tx) {
	for _, p := range b.ops {
		p.recycle()
	}
	clear(b.ops)
	b.tx, b.ops, b.failed = tx, b.ops[:0], nil
}
