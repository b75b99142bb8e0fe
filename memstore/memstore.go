// Package memstore is a holdfast store.Store that keeps everything in
// process memory.
//
// It is not durable: every lock, session and audit entry is gone when the
// process exits, and it is visible to one process only. Use it for tests
// and for explicitly single-node, throwaway deployments; anything that
// must survive a restart or be shared by several servers needs a durable
// store (the embedded one, PostgreSQL, Redis or etcd).
package memstore

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/holdfast/holdfast/internal/memdb"
	"github.com/holdfast/holdfast/store"
)

// Config configures a Store.
type Config struct {
	// Now is the store's clock; default time.Now. Tests move it to expire
	// locks without sleeping.
	Now func() time.Time
}

// Store is an in-memory store.Store.
type Store struct {
	db     *memdb.Engine
	closed atomic.Bool
}

var (
	_ store.Store  = (*Store)(nil)
	_ store.Merger = (*Store)(nil)
)

// New returns an empty store.
func New(cfg Config) *Store {
	return &Store{db: memdb.New(cfg.Now, memdb.Options{AuditInMemory: true})}
}

var errClosed = fmt.Errorf("memstore: closed: %w", store.ErrUnavailable)

// Update runs fn in one atomic transaction.
func (s *Store) Update(ctx context.Context, fn func(store.Tx) error) error {
	if err := s.usable(ctx); err != nil {
		return err
	}
	return s.db.Update(fn, nil)
}

// View runs fn in a read transaction.
func (s *Store) View(ctx context.Context, fn func(store.ReadTx) error) error {
	if err := s.usable(ctx); err != nil {
		return err
	}
	return s.db.View(fn, nil)
}

// Ping fails only once the store is closed.
func (s *Store) Ping(ctx context.Context) error { return s.usable(ctx) }

// MergesCommits reports true: commits write nothing durable, so any number
// of them under way cost nothing more, and they are answered in the order
// they commit (store.Merger).
func (s *Store) MergesCommits() bool { return true }

// Close makes every later call fail with store.ErrUnavailable.
func (s *Store) Close() error {
	s.closed.Store(true)
	return nil
}

func (s *Store) usable(ctx context.Context) error {
	if s.closed.Load() {
		return errClosed
	}
	return ctx.Err()
}
