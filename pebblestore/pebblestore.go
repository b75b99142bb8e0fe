// Package pebblestore is holdfast's embedded durable store: every record
// but the audit log is held in memory, where transactions run, and written
// to a Pebble database in a local directory before any answer that depends
// on it is given. The audit log is kept in Pebble only.
//
// Writes are group-committed and pipelined: the commits made while the
// previous group was being handed to Pebble form the next group, which is
// appended to the write-ahead log at once, without waiting for the fsync of
// the groups before it; Pebble syncs every group appended meanwhile with its
// next fsync. So many concurrent callers share each fsync, a lone caller
// pays exactly one, and the log is never idle while commits are waiting. If a write or fsync fails, the
// store fails closed: every later call returns an error wrapping
// store.ErrUnavailable until the process reopens the directory, which
// recovers the last durable state.
//
// One process at a time may open a directory. The store serves one node;
// several servers must share PostgreSQL or etcd instead.
package pebblestore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/holdfast/holdfast/internal/codec"
	"github.com/holdfast/holdfast/internal/diskwatch"
	"github.com/holdfast/holdfast/internal/gcpause"
	"github.com/holdfast/holdfast/internal/memdb"
	"github.com/holdfast/holdfast/store"
)

// Config configures a Store. The zero value is usable.
type Config struct {
	// Now is the store's clock; default time.Now.
	Now func() time.Time
	// Logger receives open statistics and write failures; default
	// slog.Default().
	Logger *slog.Logger
	// Timeout bounds how long one append or fsync of the log may take
	// before the store counts its disk as stalled: while one is, every
	// call fails with store.ErrUnavailable (those waiting for that write
	// included) and Ping fails, until it completes. A caller so failed
	// may still have its commit made, once the disk allows. Default 5s;
	// negative: none, and a disk that stops completing writes holds its
	// callers until it does.
	Timeout time.Duration
}

// Store is the embedded durable store.Store.
type Store struct {
	mem    *memdb.Engine
	db     *pebble.DB
	log    *slog.Logger
	unlock func() error // releases the directory lock
	// append writes one group to the log without waiting for its fsync,
	// and syncWait waits for that fsync; tests make them fail or hang.
	append   func(*pebble.Batch) error
	syncWait func(*pebble.Batch) error
	// decodeAudit decodes each audit entry a walk of the log reads; tests
	// hold a walk there.
	decodeAudit func(p []byte) (*store.AuditEntry, error)
	// watch times the appends (slot 0) and the fsyncs (slot 1); see
	// Config.Timeout.
	watch *diskwatch.Watch

	mu sync.Mutex
	// filling collects the commits that the next append will carry.
	filling *group
	// strict is the latest group holding a change that is not lazy: what
	// every read so far has seen is durable once it is.
	strict *group
	// spare is the memory of the records of the last group appended, for
	// the next group to fill.
	spare records
	// syncing carries appended groups, in log order, to the goroutine
	// that waits for their fsync.
	syncing chan *group
	// prunedThrough is the highest audit ID a committed PruneAudit
	// deleted, where the next one starts; used under the engine's write
	// lock.
	prunedThrough uint64

	// dbMu keeps Close from closing the database under a reader of the
	// audit log.
	dbMu     sync.RWMutex
	dbClosed bool

	// failed is set once a write failed; it never clears.
	failed error
	closed bool
	wake   chan struct{} // tells the committer that filling has work
	done   chan struct{} // closed when the committer has exited
}

// group is a set of commits written in one Pebble batch with one fsync.
type group struct {
	// records are what the commits wrote; the committer makes batch of
	// them when it appends the group, unless the group grew big enough to
	// fill batch as it came (see records).
	records records
	batch   *pebble.Batch
	// counters hold the last value of each counter committed in the
	// group; they are written once, when the group is appended.
	counters [memdb.NumCounters]uint64
	// durable is closed once the batch is fsync'd or has failed; err is
	// set before.
	durable chan struct{}
	err     error
}

var (
	_ store.Store  = (*Store)(nil)
	_ store.Merger = (*Store)(nil)
)

// engineDir is the subdirectory of a store's directory that Pebble owns.
const engineDir = "pebble"

// Present reports whether dir holds a store this package wrote, so that
// a server can keep serving such a directory with it instead of starting
// an empty store of another kind there. An error means it could not tell.
func Present(dir string) (bool, error) {
	_, err := os.Stat(filepath.Join(dir, engineDir))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// Open opens (or creates) the store in dir and loads every record.
func Open(dir string, cfg Config) (*Store, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("pebblestore: %w", err)
	}
	unlock, err := lockDir(filepath.Join(dir, "holdfast.lock"))
	if err != nil {
		return nil, fmt.Errorf("pebblestore: %s is in use by another process: %w", dir, err)
	}
	start := time.Now()
	db, err := pebble.Open(filepath.Join(dir, engineDir), &pebble.Options{
		Logger: pebbleLogger{cfg.Logger},
	})
	if err != nil {
		unlock()
		return nil, fmt.Errorf("pebblestore: open %s: %w", dir, err)
	}
	s := &Store{
		mem:         memdb.New(cfg.Now, memdb.Options{}),
		db:          db,
		log:         cfg.Logger,
		unlock:      unlock,
		append:      func(b *pebble.Batch) error { return db.ApplyNoSyncWait(b, pebble.Sync) },
		syncWait:    (*pebble.Batch).SyncWait,
		decodeAudit: codec.DecodeAudit,
		wake:        make(chan struct{}, 1),
		done:        make(chan struct{}),
		syncing:     make(chan *group, maxUnsynced),
	}
	if err := s.load(); err != nil {
		db.Close()
		unlock()
		return nil, fmt.Errorf("pebblestore: load %s: %w", dir, err)
	}
	locks, sessions, _ := s.mem.Size()
	_, lastAudit := s.mem.Counters()
	s.log.Info("pebblestore: opened", slog.String("dir", dir), slog.Int("locks", locks),
		slog.Int("sessions", sessions), slog.Uint64("last_audit_id", lastAudit), slog.Duration("took", time.Since(start)))
	s.filling = s.newGroup()
	s.watch = diskwatch.New("pebblestore", cfg.Timeout, 2, s.log)
	go s.commitLoop()
	go s.syncLoop()
	return s, nil
}

// load reads every record but the audit log into memory, or refuses a
// layout it does not know.
func (s *Store) load() error {
	v, closer, err := s.db.Get(formatKey)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		if err := s.db.Set(formatKey, []byte{formatVersion}, pebble.Sync); err != nil {
			return err
		}
	case err != nil:
		return err
	default:
		ok := len(v) == 1 && v[0] == formatVersion
		closer.Close()
		if !ok {
			return fmt.Errorf("data format %v, this build reads %d", v, formatVersion)
		}
	}
	if err := s.loadRecords(); err != nil {
		return err
	}
	// The audit counter is written with every entry; the last entry is
	// read too, so that no ID can ever be assigned twice.
	last, err := s.lastAuditID()
	if err != nil {
		return err
	}
	s.mem.Restore(memdb.Change{Kind: memdb.KindCounter, Counter: memdb.CounterAudit, Value: last})
	return nil
}

// loadRecords reads every record after the audit range, which sorts
// first. Locks and lost records, nearly all of them, are decoded in place
// and handed to a memdb.Loader, which copies what it keeps.
func (s *Store) loadRecords() error {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: auditEnd})
	if err != nil {
		return err
	}
	// A load allocates almost only what it keeps: collections on the way
	// would mark the growing heap again and again for nothing (a third of
	// the load's CPU, docs/STORAGE.md), so the collector waits until it is
	// done.
	defer gcpause.Start()()
	ld := s.mem.Load()
	defer ld.Close()
	var (
		l    store.Lock
		lost store.Lost
	)
	for it.First(); it.Valid(); it.Next() {
		key, value := it.Key(), it.Value()
		switch key[0] {
		case prefixLock:
			if err = codec.DecodeLockBorrowed(value, &l); err == nil {
				ld.Lock(&l)
			}
		case prefixLost:
			if err = codec.DecodeLostBorrowed(value, &lost); err == nil {
				ld.Lost(&lost)
			}
		default:
			err = s.restore(key, value)
		}
		if err != nil {
			err = fmt.Errorf("record %q: %w", key, err) // before Close frees key
			it.Close()
			return err
		}
	}
	return it.Close()
}

func (s *Store) restore(key, value []byte) error {
	c := memdb.Change{}
	var err error
	switch key[0] {
	case prefixSession:
		c.Kind = memdb.KindSession
		c.Session, err = codec.DecodeSession(value)
	case prefixAggregate:
		c.Kind = memdb.KindAggregate
		c.Aggregate, err = codec.DecodeAggregate(value)
	case prefixCounter:
		if len(key) != 2 || len(value) != 8 {
			return codec.ErrCorrupt
		}
		c.Kind = memdb.KindCounter
		c.Counter = memdb.Counter(key[1])
		c.Value = beUint64(value)
	case prefixMeta:
		return nil
	default:
		return codec.ErrCorrupt
	}
	if err != nil {
		return err
	}
	s.mem.Restore(c)
	return nil
}

// newGroup returns an empty group; the caller holds mu.
func (s *Store) newGroup() *group {
	g := &group{records: s.spare, durable: make(chan struct{})}
	s.spare = records{}
	return g
}

// maxUnsynced bounds how many appended groups may wait for an fsync at
// once; past it, appending waits, which pushes back on writers.
const maxUnsynced = 64

// Update runs fn against the in-memory state, then waits until the group
// holding its commit, or holding the state it read, is durable.
func (s *Store) Update(ctx context.Context, fn func(store.Tx) error) error {
	if err := s.usable(ctx); err != nil {
		return err
	}
	var wait *group
	t := auditTx{s: s}
	committed := false
	err := s.mem.Update(func(tx store.Tx) error {
		t.Tx = tx
		err := fn(&t)
		committed = err == nil
		return err
	}, func(changes []memdb.Change) {
		if committed && len(t.pruned) > 0 {
			// A copy: memdb reuses the change set's array, and clears only
			// as far as its own length.
			changes = append(changes[:len(changes):len(changes)], t.deletions()...)
			s.prunedThrough = t.pruned[len(t.pruned)-1]
		}
		wait = s.enqueue(changes)
	})
	if werr := s.waitDurable(wait); werr != nil {
		return werr
	}
	return err
}

// View runs fn against the in-memory state and waits until what it read is
// durable, so no answer rests on a write that a crash could still undo.
func (s *Store) View(ctx context.Context, fn func(store.ReadTx) error) error {
	if err := s.usable(ctx); err != nil {
		return err
	}
	var wait *group
	err := s.mem.View(func(tx store.ReadTx) error {
		return fn(auditReader{ReadTx: tx, s: s})
	}, func() { wait = s.enqueue(nil) })
	if werr := s.waitDurable(wait); werr != nil {
		return werr
	}
	return err
}

// enqueue adds a commit's changes to the filling group and returns the
// group whose durability the caller must wait for (nil: all is durable).
// It runs under the engine's lock, so groups follow commit order.
//
// A commit whose changes are all lazy (session activity, see
// store.Toucher) is written with the filling group but waits only for the
// last group that holds a change that is not: that is the state it read.
func (s *Store) enqueue(changes []memdb.Change) *group {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.unusableLocked(); err != nil {
		return finished(err)
	}
	if len(changes) == 0 {
		// Only reads: the state read is whatever was committed last.
		return s.strict
	}
	g := s.filling
	lazy := true
	for _, c := range changes {
		lazy = lazy && c.Lazy
		if c.Kind == memdb.KindCounter {
			// Only a group's last value of a counter matters.
			g.counters[c.Counter] = c.Value
			continue
		}
		if err := g.add(s.db, c); err != nil {
			// The records are in memory; this cannot fail short of a bug.
			s.failLocked(fmt.Errorf("encode change: %w", err))
			return g
		}
	}
	select {
	case s.wake <- struct{}{}:
	default:
	}
	if !lazy {
		s.strict = g
	}
	return s.strict
}

// waitDurable waits until g is durable or the disk is found stalled;
// after a stall, what the caller committed stays in memory and is written
// once the disk allows.
func (s *Store) waitDurable(g *group) error {
	if g == nil {
		return nil
	}
	if err := s.watch.Wait(g.durable); err != nil {
		return err
	}
	return g.err
}

// commitLoop appends the filling group to the log whenever it has work,
// swapping in an empty one, and hands it to syncLoop. It exits once the
// store is closed (after appending what was pending) or a write has failed.
func (s *Store) commitLoop() {
	defer close(s.syncing)
	for {
		_, open := <-s.wake
		for s.appendFilling() {
		}
		s.mu.Lock()
		stop := !open || s.failed != nil
		if stop {
			s.finishLocked(s.filling)
		}
		s.mu.Unlock()
		if stop {
			return
		}
	}
}

// appendFilling appends the filling group to the log and reports whether
// it appended one.
func (s *Store) appendFilling() bool {
	s.mu.Lock()
	g := s.filling
	if s.failed != nil || g.empty() {
		s.mu.Unlock()
		return false
	}
	s.filling = s.newGroup()
	s.mu.Unlock()

	err := g.writeBatch(s.db)
	// The watch is told an append or sync ended only after a failure is
	// recorded, so that the store never looks well between the two.
	s.watch.Begin(0)
	if err == nil {
		err = s.append(g.batch)
	}
	s.mu.Lock()
	g.records.reset()
	s.spare = g.records
	g.records = records{}
	s.mu.Unlock()
	if err != nil {
		s.mu.Lock()
		s.failLocked(err)
		s.finishLocked(g)
		s.mu.Unlock()
		s.watch.End(0)
		return false
	}
	s.watch.End(0)
	s.syncing <- g
	return true
}

// syncLoop waits, in log order, for each appended group's fsync and wakes
// its waiters. Because the log is synced in order, a group's waiters learn
// that every group before it is durable too.
func (s *Store) syncLoop() {
	defer close(s.done)
	for g := range s.syncing {
		s.watch.Begin(1)
		err := s.syncWait(g.batch)
		s.mu.Lock()
		if err != nil {
			s.failLocked(err)
		}
		g.err = s.failed
		g.batch.Close()
		close(g.durable)
		s.mu.Unlock()
		s.watch.End(1)
	}
}

func (g *group) empty() bool {
	return g.batch == nil && g.records.empty() && g.counters == [memdb.NumCounters]uint64{}
}

// add puts one change into the group: into its records, or into its
// batch once the records grew past sortedLimit (see records).
func (g *group) add(db *pebble.DB, c memdb.Change) error {
	if err := g.records.add(c); err != nil {
		return err
	}
	if g.batch == nil && len(g.records.buf) <= sortedLimit {
		return nil
	}
	if g.batch == nil {
		g.batch = db.NewBatch()
	}
	err := g.records.writeInOrder(g.batch)
	g.records.reset()
	return err
}

// writeBatch makes the group's batch, with the last value of each
// counter. Only the committer calls it, after the group stopped filling.
func (g *group) writeBatch(db *pebble.DB) error {
	for c, v := range g.counters {
		if v == 0 {
			continue
		}
		if err := g.records.add(memdb.Change{Kind: memdb.KindCounter, Counter: memdb.Counter(c), Value: v}); err != nil {
			return err
		}
	}
	if g.batch != nil {
		return g.records.writeInOrder(g.batch)
	}
	g.batch = db.NewBatchWithSize(g.records.reprSize())
	return g.records.writeSorted(g.batch)
}

// failLocked makes the store fail closed from now on.
func (s *Store) failLocked(err error) {
	if s.failed != nil {
		return
	}
	s.failed = fmt.Errorf("pebblestore: write failed, restart to recover from disk: %w: %v", store.ErrUnavailable, err)
	s.log.Error("pebblestore: write failed; failing closed", slog.Any("error", err))
}

// finishLocked releases the waiters of a group that will never be written.
func (s *Store) finishLocked(g *group) {
	g.err = s.failed
	if g.err == nil {
		g.err = errClosed
	}
	if g.batch != nil {
		g.batch.Close()
	}
	close(g.durable)
}

var errClosed = fmt.Errorf("pebblestore: closed: %w", store.ErrUnavailable)

// usable fails when a call cannot be served: the store failed, is closed,
// its disk is stalled, or ctx is done. Only the stall passes by itself.
func (s *Store) usable(ctx context.Context) error {
	s.mu.Lock()
	err := s.unusableLocked()
	s.mu.Unlock()
	if err != nil {
		return err
	}
	if err := s.watch.Err(); err != nil {
		return err
	}
	return ctx.Err()
}

func (s *Store) unusableLocked() error {
	switch {
	case s.failed != nil:
		return s.failed
	case s.closed:
		return errClosed
	}
	return nil
}

// finished is a group that is already over, with err.
func finished(err error) *group {
	g := &group{durable: make(chan struct{}), err: err}
	close(g.durable)
	return g
}

// Ping fails once a write has failed or the store is closed, and while
// the disk is stalled (Config.Timeout).
func (s *Store) Ping(ctx context.Context) error { return s.usable(ctx) }

// Timeout is Config.Timeout as the store applies it: its default when
// zero, and negative for none.
func (s *Store) Timeout() time.Duration { return s.watch.Limit() }

// MergesCommits reports true: commits made while a group is written share
// the next group's write and sync (store.Merger).
func (s *Store) MergesCommits() bool { return true }

// Close writes what is pending, then closes the database and releases the
// directory.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.wake)
	s.mu.Unlock()
	<-s.done
	s.watch.Close()
	s.dbMu.Lock()
	s.dbClosed = true
	err := s.db.Close()
	s.dbMu.Unlock()
	if uerr := s.unlock(); err == nil {
		err = uerr
	}
	if err != nil {
		return fmt.Errorf("pebblestore: close: %w", err)
	}
	return nil
}
