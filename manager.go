package holdfast

import (
	"context"
	"errors"
	"sync"

	"github.com/holdfast/holdfast/store"
)

// Manager is the lock manager: it owns the meaning of every lock operation
// and keeps its records in a store.Store, one transaction per operation.
type Manager struct {
	store store.Store
	cfg   Config

	events events

	stop     chan struct{}
	stopOnce sync.Once
	swept    sync.WaitGroup
}

var _ Service = (*Manager)(nil)

var errTODO = errors.New("not implemented yet")

// New returns a Manager over s and starts its background sweep.
func New(s store.Store, cfg Config) (*Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m := &Manager{store: s, cfg: cfg, stop: make(chan struct{})}
	return m, nil
}

// Close stops the background sweep. It does not close the store.
func (m *Manager) Close() error {
	m.stopOnce.Do(func() { close(m.stop) })
	m.swept.Wait()
	return nil
}

// Ping reports whether the store can confirm durability now.
func (m *Manager) Ping(ctx context.Context) error { return errTODO }

// Sweep removes expired locks, ends idle sessions and prunes old records.
func (m *Manager) Sweep(ctx context.Context) error { return errTODO }

// Subscribe delivers every audit entry committed from now on whose key is
// prefix or below it ("" for all). The channel is closed when cancel is
// called or when the subscriber falls too far behind; resume from the last
// seen entry's ID with Audit.
func (m *Manager) Subscribe(prefix string) (entries <-chan AuditEntry, cancel func()) {
	return m.events.subscribe(prefix)
}

func (m *Manager) Acquire(ctx context.Context, req AcquireRequest) (*AcquireResult, error) {
	return nil, errTODO
}
func (m *Manager) Release(ctx context.Context, req ReleaseRequest) (*ReleaseResult, error) {
	return nil, errTODO
}
func (m *Manager) Renew(ctx context.Context, req RenewRequest) (*RenewResult, error) {
	return nil, errTODO
}
func (m *Manager) Verify(ctx context.Context, req VerifyRequest) (*VerifyResult, error) {
	return nil, errTODO
}
func (m *Manager) Locks(ctx context.Context, q LockQuery) (*LockPage, error) { return nil, errTODO }
func (m *Manager) Heartbeat(ctx context.Context, req HeartbeatRequest) (*HeartbeatResult, error) {
	return nil, errTODO
}
func (m *Manager) EndSession(ctx context.Context, req EndSessionRequest) (*EndSessionResult, error) {
	return nil, errTODO
}
func (m *Manager) Sessions(ctx context.Context, q SessionQuery) (*SessionPage, error) {
	return nil, errTODO
}
func (m *Manager) SetAggregate(ctx context.Context, a Aggregate) (*Aggregate, error) {
	return nil, errTODO
}
func (m *Manager) RemoveAggregate(ctx context.Context, req RemoveAggregateRequest) error {
	return errTODO
}
func (m *Manager) Aggregates(ctx context.Context, root string) (*AggregateList, error) {
	return nil, errTODO
}
func (m *Manager) ForceRelease(ctx context.Context, req ForceReleaseRequest) (*ForceReleaseResult, error) {
	return nil, errTODO
}
func (m *Manager) Audit(ctx context.Context, q AuditQuery) (*AuditPage, error) {
	return nil, errTODO
}
