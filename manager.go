package holdfast

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/holdfast/holdfast/store"
)

// Manager is the lock manager: it owns the meaning of every lock operation
// and keeps its records in a store.Store, one transaction per operation, so
// every decision is atomic in the store.
type Manager struct {
	store  store.Store
	cfg    Config
	events events

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
// under prefix ("" for all; see UnderPrefix). The channel is closed when cancel is
// called or when the subscriber falls too far behind; resume from the last
// seen entry's ID with Audit.
func (m *Manager) Subscribe(prefix string) (entries <-chan AuditEntry, cancel func()) {
	return m.events.subscribe(prefix)
}

// update runs fn in one store transaction and, once it is durable,
// publishes the audit entries it wrote.
func (m *Manager) update(ctx context.Context, name string, fn func(o *op) error) error {
	if b := batchOf(ctx); b != nil {
		return b.update(name, fn)
	}
	start := time.Now()
	var (
		published []AuditEntry
		refusal   error
	)
	err := m.store.Update(ctx, func(tx store.Tx) error {
		o := newOp(m, tx)
		refusal = fn(o)
		if refusal != nil && !isRefusal(refusal) {
			return refusal
		}
		// A refusal is an answer, not a failure: what the operation wrote
		// before refusing (the session's activity, the removal of records
		// found expired) is true either way and is kept.
		published = o.audit
		return nil
	})
	err = classify(err)
	if err == nil {
		m.events.publish(published)
		err = refusal
	}
	m.observe(name, start, err)
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
	start := time.Now()
	err := m.store.View(ctx, func(tx store.ReadTx) error {
		return fn(newReadOp(m, tx))
	})
	err = classify(err)
	m.observe(name, start, err)
	return err
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
