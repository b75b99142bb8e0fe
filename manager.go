package holdfast

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/holdfast/holdfast/store"
)

// Manager is the lock manager: it owns the meaning of every lock operation
// and keeps its records in a store.Store, every operation inside one
// transaction, so every decision is atomic in the store. Concurrent
// operations share transactions, and so durable commits.
type Manager struct {
	store  store.Store
	cfg    Config
	events events
	order  publishOrder
	groups grouper
	// prepares is set once a transaction has shown that the store reads
	// ahead (store.Preparer).
	prepares atomic.Bool
	commits  CommitObserver // cfg.Observer, if it wants commits too
	// firstTx is the store's time of the first transaction, in Unix
	// nanoseconds (0 before it): where the restart grace counts from.
	firstTx atomic.Int64

	stop     chan struct{}
	stopOnce sync.Once
	swept    sync.WaitGroup
}

var _ Service = (*Manager)(nil)

// New returns a Manager over s and starts its background sweep.
func New(s store.Store, cfg Config) (*Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m := &Manager{store: s, cfg: cfg, stop: make(chan struct{})}
	m.commits, _ = cfg.Observer.(CommitObserver)
	m.groups.limit, m.order.ordered = maxInFlight, merges(s)
	if m.order.ordered {
		m.groups.limit = math.MaxInt
	}
	if b, ok := s.(store.Bounded); ok {
		m.groups.maxWait = b.TransactionTimeout()
	}
	if cfg.SweepInterval > 0 {
		m.swept.Add(1)
		go m.sweepLoop()
	}
	return m, nil
}

// Close stops the background sweep. It does not close the store.
func (m *Manager) Close() error {
	m.stopOnce.Do(func() { close(m.stop) })
	m.swept.Wait()
	return nil
}

// Ping reports whether the store can confirm durability now.
func (m *Manager) Ping(ctx context.Context) error {
	if err := m.store.Ping(ctx); err != nil {
		return &UnavailableError{RetryAfter: time.Second, Err: err}
	}
	return nil
}

// Subscribe delivers every audit entry committed from now on whose key is
// under prefix ("" for all; see UnderPrefix). An entry is delivered once
// its transaction is durable and, over a store.Merger (the embedded
// stores, memstore), after every entry committed before it, so in the order of
// their IDs: there an operation may return a moment before its entry is
// sent, and a subscription made just after it returned may still receive
// it. The channel is closed when cancel is called or when the subscriber
// falls too far behind; resume from the last seen entry's ID with Audit.
// It is closed too when a transaction fails after its operations ran (a
// commit whose answer was lost, a disk that stalled before making it
// durable): the store may have committed it, or may still, and its entries
// are never delivered, so a subscriber learns of them from Audit.
func (m *Manager) Subscribe(prefix string) (entries <-chan AuditEntry, cancel func()) {
	return m.events.subscribe(prefix)
}

// update runs fn in one store transaction and, once it is durable,
// publishes the audit entries it wrote. Operations that arrive while
// another group's operations run share the next transaction (see
// grouper); sc names what fn will touch, for stores that read ahead.
func (m *Manager) update(ctx context.Context, name string, sc scope, fn func(o *op) error) error {
	return m.apply(ctx, name, sc, opFunc(fn))
}

// operation is what an update runs in its transaction: a closure (opFunc),
// or, for the operations that make most of the traffic (acquire, release,
// heartbeat), a struct that holds the request and the result, so that
// running one costs a single allocation instead of one each for the
// closure, the request it captures and the result.
type operation interface {
	run(o *op) error
}

// opFunc runs a closure as an operation.
type opFunc func(o *op) error

func (f opFunc) run(o *op) error { return f(o) }

// apply is update for an operation of any kind.
func (m *Manager) apply(ctx context.Context, name string, sc scope, do operation) error {
	if b := batchOf(ctx); b != nil {
		return b.update(name, sc, do)
	}
	p := newPending(ctx, name, sc, do, m.started())
	if g, lead := m.groups.join(p); lead {
		m.lead(p, g)
	}
	err, panicked := p.err, p.panicked
	m.observe(name, p.start, err)
	p.recycle()
	if panicked != nil {
		panic(panicked)
	}
	return err
}

// isRefusal reports whether err is a decision about the request (locked,
// lost, stale) rather than a reason to abort the transaction. Operations
// only refuse before they write anything the refusal would contradict.
func isRefusal(err error) bool {
	return errors.Is(err, ErrLocked) || errors.Is(err, ErrLockLost) || errors.Is(err, ErrStaleToken)
}

// view runs fn in a read-only store transaction.
func (m *Manager) view(ctx context.Context, name string, fn func(o *readOp) error) error {
	if b := batchOf(ctx); b != nil {
		return b.view(name, fn)
	}
	start := m.started()
	err := m.store.View(ctx, func(tx store.ReadTx) error {
		return fn(newReadOp(m, tx))
	})
	err = classify(err)
	m.observe(name, start, err)
	return err
}

// started is when an operation started, when an Observer wants to know.
func (m *Manager) started() time.Time {
	if m.cfg.Observer == nil {
		return time.Time{}
	}
	return time.Now()
}

func (m *Manager) observe(name string, start time.Time, err error) {
	if m.cfg.Observer != nil {
		m.cfg.Observer.Observe(name, time.Since(start), err)
	}
}

// classify keeps the Manager's own errors and turns every other failure of
// the store into ErrUnavailable: when the store cannot answer, nothing is
// decided, and callers must not take silence for a grant.
func classify(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrLocked), errors.Is(err, ErrLockLost), errors.Is(err, ErrStaleToken),
		errors.Is(err, ErrInvalid), errors.Is(err, ErrNotFound), errors.Is(err, ErrUnavailable):
		return err
	default:
		return &UnavailableError{RetryAfter: time.Second, Err: err}
	}
}
