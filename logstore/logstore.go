// Package logstore is holdfast's embedded durable store on a log of its
// own: every record but the audit log is held in memory (internal/memdb),
// where transactions run, and each commit's change set is appended to a
// segmented log in a local directory before any answer that depends on it
// is given. The audit log is kept in the log only.
//
// Writes are group-committed: the commits made while a group is written
// and synced form the next group, which is written with one write and
// made durable by one fdatasync, started as soon as the one before
// returns (tuning.syncers may have several under way at once). No timer
// holds a commit back: a lone caller pays exactly one fsync. Lazy session
// touches (heartbeats) alone wait for writeTimer (about 2 ms) to share a
// write, and get no fsync of their own: the next one covers them, or
// lazyTimer's a second later. In the background, once enough log has
// piled up, a checkpoint of the state is written, so that open reads the
// checkpoint and the log after it, and the segments before it go once
// their audit entries are pruned.
//
// If a write or fsync fails, the store fails closed: every later call
// returns an error wrapping store.ErrUnavailable until the process reopens
// the directory, which recovers the last durable state: a torn last group
// is cut off by its checksum.
//
// One process at a time may open a directory. The store serves one node;
// several servers must share PostgreSQL or etcd instead.
package logstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/holdfast/holdfast/internal/codec"
	"github.com/holdfast/holdfast/internal/dirlock"
	"github.com/holdfast/holdfast/internal/diskwatch"
	"github.com/holdfast/holdfast/internal/gcpause"
	"github.com/holdfast/holdfast/internal/keep"
	"github.com/holdfast/holdfast/internal/memdb"
	"github.com/holdfast/holdfast/store"
)

// Config configures a Store. The zero value is usable.
type Config struct {
	// Now is the store's clock; default time.Now.
	Now func() time.Time
	// Logger receives open and checkpoint statistics and write failures;
	// default slog.Default().
	Logger *slog.Logger
	// Timeout bounds how long the write of one group of commits to the
	// log and its fdatasync may take before the store counts its disk as
	// stalled: while one is, every call fails with store.ErrUnavailable
	// (those waiting for that write included) and Ping fails, until it
	// completes. A caller so failed may still have its commit made, once
	// the disk allows. Default 5s; negative: none, and a disk that stops
	// completing writes holds its callers until it does.
	Timeout time.Duration
}

// tuning holds the sizes tests make small.
type tuning struct {
	// segmentBytes is the size past which the log goes on in a new
	// segment.
	segmentBytes int64
	// checkpointBytes is how much log, at least, is written between two
	// checkpoints; at least as much as the last checkpoint's size too, so
	// that checkpoints cost a bounded share of the writes.
	checkpointBytes int64
	// lazyDelay bounds how long heartbeats may wait in the page cache
	// for a sync: a group of lazy changes only is synced all the same
	// once the first unsynced one is this old, and lazyTimer syncs them
	// when nothing is written after them, so a crash of the machine
	// loses at most about this much of them.
	lazyDelay time.Duration
	// now is the clock lazyDelay is judged by; nil is time.Now.
	now func() time.Time
	// lazyWrite is how long touches alone wait in the filling group to
	// be written with others: nobody waits for them, and one write of
	// many costs the syncer one wake-up and one pwrite, where a write of
	// each cost one apiece. A killed process loses at most this much of
	// them. lazyWriteBytes of them are written at once.
	lazyWrite time.Duration
	// syncers is how many groups may be syncing at once. One: where two
	// fdatasyncs at once each took about as long as two in a row, a
	// second syncer only split the commits into smaller groups, and
	// BenchmarkStore/AcquireRelease ran 1.4-1.7x faster with one and no
	// bound on the Manager's groups; where the disk did run two at once,
	// one still ran faster (docs/BENCHMARKS.md, "Tried and not kept";
	// docs/STORAGE.md). Earlier machines had measured two ahead, so the
	// syncers work in any number, and the tests of overlapping syncs run
	// two.
	syncers int
	// markBytes is how far apart, at least, the marks of a segment are
	// (segment.marks): a listing of the newest audit entries reads about
	// this much of the log. Zero marks every frame.
	markBytes int64
}

var defaultTuning = tuning{segmentBytes: 16 << 20, checkpointBytes: 64 << 20, lazyDelay: time.Second, lazyWrite: 2 * time.Millisecond, syncers: 1, markBytes: 64 << 10}

const lazyWriteBytes = 32 << 10

// Store is the embedded durable store.Store.
type Store struct {
	mem    *memdb.Engine
	dir    string
	log    *slog.Logger
	tune   tuning
	unlock func() error // releases the directory lock
	// writeFrame writes one group at off in the active segment, and
	// syncFile makes it durable; tests make them fail.
	writeFrame func(f *os.File, off int64, frame []byte) error
	syncFile   func(f *os.File) error
	// decodeAudit decodes each audit entry a walk of the log reads, in
	// place; tests hold a walk there.
	decodeAudit func(p []byte, e *store.AuditEntry) error
	// watch times each syncer's writes with their syncs (Config.Timeout).
	watch *diskwatch.Watch

	mu sync.Mutex
	// filling collects the commits that the next write will carry.
	filling *group
	// strict is the latest group holding a change that is not lazy: what
	// every read so far has seen is durable once it is.
	strict *group
	// nextSeq numbers the next group made.
	nextSeq uint64
	// spare is the buffer of the last group written, for the next group
	// to fill, and spareNames its names' buffer.
	spare      []byte
	spareNames []name
	// big remembers the last group written larger than maxSpare (see
	// keepSpare).
	big keep.Window
	// written holds the groups written but not yet known durable, in
	// order.
	written []*group
	// ackedEnd is where the groups known durable end in the active
	// segment: a failure cuts the segment back to it.
	ackedEnd int64
	// failed is set once a write failed; it never clears.
	failed error
	// closed is set under the engine's write lock (and mu), so that no
	// commit changes memory once Close has begun: the final checkpoint
	// then holds no commit that was refused.
	closed atomic.Bool

	// prunedThrough is the highest audit ID a committed PruneAudit
	// reached: listings skip every entry up to it. Used under the
	// engine's lock.
	prunedThrough uint64
	auditHead     auditHead
	// tx is the transaction Update hands fn, reused by every one: it is
	// used under the engine's write lock only.
	tx auditTx
	// auditEnd is the highest audit ID committed; used under the
	// engine's lock.
	auditEnd uint64

	// segMu guards segs (not their sizes): audit readers read the segments
	// while the committer appends and a checkpoint drops old ones.
	segMu sync.RWMutex
	segs  []*segment

	// writeMu is held by the syncer writing a group, and guards these.
	writeMu         sync.Mutex
	active          *os.File          // the last segment, open for writing
	activeSeg       *segment          // the last of segs
	activePrepared  bool              // active was made by prepareSegment
	prepared        chan preparedFile // the next segment's file, once asked for
	lastAudit       uint64            // the highest audit ID written
	sinceCheckpoint int64             // bytes written since the last checkpoint began
	// unsyncedSince is when the first group of touches written since the
	// last sync was, zero when every group written is synced; lazyTimer
	// syncs them once they are lazyDelay old with nothing written since.
	// Written under writeMu and mu.
	unsyncedSince time.Time
	lazyTimer     *time.Timer
	// writeTimer wakes a syncer for a filling group of touches alone
	// (tuning.lazyWrite); writeArmed, under mu, says it is set.
	writeTimer *time.Timer
	writeArmed bool
	// syncFiles are the active segment opened once for each syncer: a
	// write error is reported to every open file, where two fdatasyncs
	// through one could see it only once, and the other succeed for a
	// group that did not reach the disk.
	syncFiles []*os.File
	syncing   sync.WaitGroup // fdatasyncs under way; a rotation waits for them
	// syncs and syncTime count the fdatasyncs that made writes durable,
	// and their time, for Syncs.
	syncs    atomic.Uint64
	syncTime atomic.Int64 // nanoseconds

	lastCheckpoint atomic.Int64 // size of the last checkpoint
	checkpointing  atomic.Bool
	background     sync.WaitGroup // checkpoints under way

	wake     chan struct{}  // tells a syncer that filling has work
	quit     chan struct{}  // closed by Close: checkpoints stop
	stopping sync.WaitGroup // the syncers, until they exit
}

// group is a set of commits written in one frame with one fsync.
type group struct {
	seq uint64
	// buf is the frame: its header, then the commits' records.
	buf []byte
	// counters hold the last value of each counter committed in the
	// group; they are written once, when the group is sealed.
	counters [memdb.NumCounters]uint64
	// lastAudit is the highest audit ID in the group.
	lastAudit uint64
	// names are those of its audit entries, for its segment's marks.
	names []name
	// strict is set once the group holds a change that is not lazy: a
	// group of lazy changes only is written but not synced (enqueue).
	strict bool
	// end is where the group ends in its segment, once written.
	end int64
	// durable is closed once the group is fsync'd or has failed; err is
	// set before.
	durable chan struct{}
	err     error
}

var (
	_ store.Store  = (*Store)(nil)
	_ store.Merger = (*Store)(nil)
)

// Open opens (or creates) the store in dir and loads every record but the
// audit log.
func Open(dir string, cfg Config) (*Store, error) {
	return open(dir, cfg, defaultTuning)
}

func open(dir string, cfg Config, tune tuning) (*Store, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		// A new directory: its entry in its parent is made durable too,
		// or a power loss could take it, acknowledged writes and all.
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("logstore: %w", err)
		}
		if err := syncDir(filepath.Dir(filepath.Clean(dir))); err != nil {
			return nil, fmt.Errorf("logstore: %w", err)
		}
	}
	unlock, err := dirlock.Lock(filepath.Join(dir, "holdfast.lock"))
	if err != nil {
		return nil, fmt.Errorf("logstore: %s is in use by another process: %w", dir, err)
	}
	if tune.now == nil {
		tune.now = time.Now
	}
	if tune.syncers < 1 {
		tune.syncers = defaultTuning.syncers // none would leave every commit waiting
	}
	start := time.Now()
	s := &Store{
		mem:    memdb.New(cfg.Now, memdb.Options{}),
		dir:    dir,
		log:    cfg.Logger,
		tune:   tune,
		unlock: unlock,
		writeFrame: func(f *os.File, off int64, frame []byte) error {
			_, err := f.WriteAt(frame, off)
			return err
		},
		syncFile:    fdatasync,
		decodeAudit: codec.DecodeAuditBorrowed,
		syncFiles:   make([]*os.File, tune.syncers),
		wake:        make(chan struct{}, 1),
		quit:        make(chan struct{}),
		lazyTimer:   time.NewTimer(time.Hour),
		writeTimer:  time.NewTimer(time.Hour),
	}
	s.lazyTimer.Stop()
	s.writeTimer.Stop()
	if err := s.recover(); err != nil {
		if s.active != nil {
			s.active.Close()
		}
		s.closeSyncFiles()
		unlock()
		return nil, fmt.Errorf("logstore: open %s: %w", dir, err)
	}
	locks, sessions, _ := s.mem.Size()
	s.log.Info("logstore: opened", slog.String("dir", dir), slog.Int("locks", locks),
		slog.Int("sessions", sessions), slog.Uint64("last_audit_id", s.lastAudit), slog.Duration("took", time.Since(start)))
	s.watch = diskwatch.New("logstore", cfg.Timeout, tune.syncers, s.log)
	for i := range tune.syncers {
		s.stopping.Go(func() { s.syncLoop(i) })
	}
	return s, nil
}

// recover loads the newest checkpoint and replays the log after it, then
// starts a new segment for the groups to come.
func (s *Store) recover() error {
	tmps, err := filepath.Glob(filepath.Join(s.dir, "*.tmp"))
	if err != nil {
		return err
	}
	for _, tmp := range tmps { // a checkpoint a crash interrupted
		if err := os.Remove(tmp); err != nil {
			return err
		}
	}
	// A load allocates almost only what it keeps: collections on the way
	// would mark the growing heap again and again for nothing (a third of
	// the CPU of pebblestore's load), so the collector waits until the
	// checkpoint and the log after it are loaded.
	defer gcpause.Start()()
	seq, pruned, err := s.loadCheckpoint()
	if err != nil {
		return err
	}
	s.prunedThrough = pruned
	segs, err := listSegments(s.dir)
	if err != nil {
		return err
	}
	next, err := s.replay(segs, seq)
	if err != nil {
		return err
	}
	if n := len(segs); n > 0 && segs[n-1].size.Load() == headerLen {
		// The last segment holds no group: the new one takes its place.
		if err := os.Remove(segs[n-1].path); err != nil {
			return err
		}
		segs = segs[:n-1]
	}
	_, s.lastAudit = s.mem.Counters()
	s.auditEnd = s.lastAudit
	seg, f, err := createSegment(s.dir, next, s.lastAudit+1)
	if err != nil {
		return err
	}
	s.segs, s.active, s.activeSeg = append(segs, seg), f, seg
	s.ackedEnd = headerLen
	if err := s.openSyncFiles(seg.path); err != nil {
		return err
	}
	s.nextSeq = next
	s.filling = s.newGroup()
	// A crash may have come between a checkpoint and the removal of what
	// it covers.
	return s.dropCovered(seq, pruned)
}

// newGroup returns an empty group; the caller holds mu (or is Open).
func (s *Store) newGroup() *group {
	g := &group{seq: s.nextSeq, buf: newFrame(s.spare), names: s.spareNames[:0], durable: make(chan struct{})}
	s.nextSeq++
	s.spare, s.spareNames = nil, nil
	return g
}

// Update runs fn against the in-memory state, then waits until the group
// holding its commit, or holding the state it read, is durable.
func (s *Store) Update(ctx context.Context, fn func(store.Tx) error) error {
	if err := s.usable(ctx); err != nil {
		return err
	}
	var wait *group
	committed := false
	err := s.mem.Update(func(tx store.Tx) error {
		if s.closed.Load() {
			return errClosed
		}
		s.tx = auditTx{Tx: tx, s: s}
		err := fn(&s.tx)
		committed = err == nil
		return err
	}, func(changes []memdb.Change) {
		var pruned uint64
		if committed && s.tx.pruned > s.prunedThrough {
			pruned = s.tx.pruned
			s.prunedThrough = pruned
		}
		wait = s.enqueue(changes, pruned)
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
	}, func() { wait = s.enqueue(nil, 0) })
	if werr := s.waitDurable(wait); werr != nil {
		return werr
	}
	return err
}

// enqueue adds a commit's changes (and the audit watermark it pruned to,
// if any) to the filling group and returns the group whose durability the
// caller must wait for (nil: all is durable). It runs under the engine's
// lock, so groups follow commit order.
//
// A commit whose changes are all lazy (session activity, see
// store.Toucher) is written with the filling group but waits only for the
// last group that holds a change that is not: that is the state it read.
// A filling group of such commits alone is written after tuning.lazyWrite
// (or once it is lazyWriteBytes), not at once, so that many share a write.
// A group of lazy changes only is written without an fdatasync of its
// own: the next group's makes it durable, or Close's, or its own once
// the oldest unsynced one is tuning.lazyDelay old. Heartbeats then cost no
// fsync of their own; a crash of the machine (not of the process: the
// page cache holds the write) can lose the touches of about that delay,
// which store.Toucher allows.
func (s *Store) enqueue(changes []memdb.Change, pruned uint64) *group {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.unusableLocked(); err != nil {
		return finished(err)
	}
	if len(changes) == 0 && pruned == 0 {
		// Only reads: the state read is whatever was committed last.
		return s.strict
	}
	g := s.filling
	lazy := pruned == 0
	for _, c := range changes {
		lazy = lazy && c.Lazy
		switch c.Kind {
		case memdb.KindCounter:
			// Only a group's last value of a counter matters.
			g.counters[c.Counter] = c.Value
			continue
		case memdb.KindAudit:
			g.lastAudit = max(g.lastAudit, c.Audit.ID)
			s.auditEnd = max(s.auditEnd, c.Audit.ID)
			g.names = auditNames(g.names, c.Audit)
		}
		buf, err := appendChange(g.buf, c)
		if err != nil {
			// The records are in memory; this cannot fail short of a bug.
			s.failLocked(fmt.Errorf("encode change: %w", err))
			return finished(s.failed)
		}
		g.buf = buf
	}
	if pruned > 0 {
		g.buf = appendUvarintRecord(g.buf, recPruned, pruned)
	}
	if !lazy {
		s.strict = g
		g.strict = true
	}
	switch {
	case g.due():
		select {
		case s.wake <- struct{}{}:
		default:
		}
	case !s.writeArmed:
		s.writeArmed = true
		s.writeTimer.Reset(s.tune.lazyWrite)
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

// due reports whether g is to be written at once: it holds a change that
// is not lazy, or touches enough to fill a write. Touches alone wait for
// writeTimer.
func (g *group) due() bool { return g.strict || len(g.buf) >= lazyWriteBytes }

func (g *group) empty() bool {
	return len(g.buf) == frameLen && g.counters == [memdb.NumCounters]uint64{}
}

// syncLoop is syncer i: it writes the filling group whenever it has work,
// swapping in an empty one, and makes it durable; it writes a filling
// group of touches alone when writeTimer fires, and syncs touches left
// unsynced when lazyTimer does. It exits once the store is closed, after
// writing what was pending.
func (s *Store) syncLoop(i int) {
	for {
		select {
		case _, open := <-s.wake:
			// Touches alone wait for writeTimer, but not past Close.
			for s.commitFilling(i, !open) {
			}
			if !open {
				return
			}
		case <-s.writeTimer.C:
			s.mu.Lock()
			s.writeArmed = false
			s.mu.Unlock()
			// Once: touches that came since armed the timer again.
			s.commitFilling(i, true)
		case <-s.lazyTimer.C:
			s.syncTouches(i)
		}
	}
}

// syncTouches makes the groups of touches written since the last sync
// durable through syncer i's file, when nothing else has.
func (s *Store) syncTouches(i int) {
	s.writeMu.Lock()
	s.mu.Lock()
	if s.unsyncedSince.IsZero() || s.failed != nil || s.closed.Load() {
		s.mu.Unlock()
		s.writeMu.Unlock()
		return
	}
	s.unsyncedSince = time.Time{}
	s.mu.Unlock()
	s.watch.Begin(i)
	s.syncWritten(i, nil)
}

// commitFilling writes the filling group, if it is due or touches is set,
// makes it durable through syncer i's file, answers every group that this
// makes known durable, and reports whether it wrote one. While it syncs,
// other syncers, if there are several, write and sync the groups that fill
// meanwhile.
func (s *Store) commitFilling(i int, touches bool) bool {
	s.writeMu.Lock()
	s.mu.Lock()
	g := s.filling
	if s.failed != nil || g.empty() || !touches && !g.due() {
		s.mu.Unlock()
		s.writeMu.Unlock()
		return false
	}
	s.filling = s.newGroup()
	s.mu.Unlock()

	for c, v := range g.counters {
		if v != 0 {
			g.buf = appendCounter(g.buf, memdb.Counter(c), v)
		}
	}
	sealFrame(g.buf, g.seq)
	// The watch times the group's write and its sync as one: the end of
	// either is what its callers wait for. It is told the write ended
	// only after a failure is recorded, so that the store never looks
	// well between the two.
	s.watch.Begin(i)
	if err := s.write(g); err != nil {
		s.fail(err, g, s.active)
		s.watch.End(i)
		s.writeMu.Unlock()
		return false
	}
	s.mu.Lock()
	if s.failed != nil {
		// A sync failed while g was written: fail answered the rest, and
		// its cut may have come before g's write, so cut again.
		g.err = s.failed
		close(g.durable)
		end := s.ackedEnd
		s.mu.Unlock()
		cutBack(s.active, end)
		s.watch.End(i)
		s.writeMu.Unlock()
		return false
	}
	syncNow := g.strict
	if !syncNow {
		now := s.tune.now()
		if s.unsyncedSince.IsZero() {
			s.unsyncedSince = now
			s.lazyTimer.Reset(s.tune.lazyDelay)
		}
		syncNow = now.Sub(s.unsyncedSince) >= s.tune.lazyDelay
	}
	if syncNow {
		// The sync begins after every group written so far.
		s.unsyncedSince = time.Time{}
		s.written = append(s.written, g)
	} else {
		// No one waits for it, and the next fdatasync covers it.
		close(g.durable)
	}
	s.keepSpare(g.buf)
	g.buf = nil
	if cap(g.names) <= maxSpareNames {
		s.spareNames = g.names
	}
	g.names = nil
	s.mu.Unlock()
	s.maybeCheckpoint()
	if !syncNow {
		s.watch.End(i)
		s.writeMu.Unlock()
		return true
	}
	return s.syncWritten(i, g)
}

// syncWritten makes what has been written durable through syncer i's
// file, releasing writeMu (held on entry) while it syncs, and answers g
// and the groups before it (none when g is nil). A failure fails the
// store; it reports whether the sync succeeded. The watch's slot i was
// begun on entry; syncWritten ends it.
func (s *Store) syncWritten(i int, g *group) bool {
	active, f := s.active, s.syncFiles[i]
	s.syncing.Add(1)
	s.writeMu.Unlock()

	// No rotation closes active or f until Done, after the answer: a
	// rotation resets ackedEnd, which ackLocked must not move after it.
	defer s.syncing.Done()
	start := time.Now()
	if err := s.syncFile(f); err != nil {
		s.fail(err, nil, active)
		s.watch.End(i)
		return false
	}
	s.watch.End(i)
	s.syncs.Add(1)
	s.syncTime.Add(int64(time.Since(start)))
	if g != nil {
		s.mu.Lock()
		s.ackLocked(g)
		s.mu.Unlock()
	}
	return true
}

// ackLocked answers g and every group written before it: the fdatasync
// that made g durable began after they were all written.
func (s *Store) ackLocked(g *group) {
	if s.failed != nil {
		return // fail answered them
	}
	n := 0
	for ; n < len(s.written) && s.written[n].seq <= g.seq; n++ {
		close(s.written[n].durable)
	}
	if n == 0 {
		return
	}
	s.ackedEnd = s.written[n-1].end
	left := copy(s.written, s.written[n:])
	clear(s.written[left:])
	s.written = s.written[:left]
}

// fail makes the store fail closed after err, and answers with it g (a
// group that was not written), every group not known durable and the
// filling one. The first failure cuts active back to the end of the groups
// known durable: their callers were told the rest failed, so it must not
// come back at the next open from the page cache (after a failed fsync
// Linux may keep the pages, clean), as far as the disk lets us.
func (s *Store) fail(err error, g *group, active *os.File) {
	s.mu.Lock()
	first := s.failed == nil
	s.failLocked(err)
	for _, w := range s.written {
		w.err = s.failed
		close(w.durable)
	}
	s.written = nil
	if g != nil {
		g.err = s.failed
		close(g.durable)
	}
	if first {
		s.finishLocked(s.filling)
	}
	end := s.ackedEnd
	s.mu.Unlock()
	if first {
		cutBack(active, end)
	}
}

// cutBack cuts f back to end, where the groups known durable end, once the
// store has failed. ackedEnd no longer moves then, so cuts in any order
// agree.
func cutBack(f *os.File, end int64) {
	if err := f.Truncate(end); err == nil {
		fdatasync(f)
	}
}

// maxSpare bounds the buffer kept for the next group, so that one huge
// group (a bulk acquire) does not pin its memory; but while groups that
// large keep coming (acquires of a hundred keys each, many to a group), it
// is kept all the same (package keep).
const maxSpare = 1 << 20

// maxSpareNames bounds the names' buffer kept, as maxSpare does the
// group's: a group of many-key acquires names thousands of keys.
const maxSpareNames = 4096

// keepSpare keeps buf, a written group's, for the next group if it is
// not too big to keep; the caller holds mu.
func (s *Store) keepSpare(buf []byte) {
	if keepBig := s.big.Note(len(buf) > maxSpare); keepBig || cap(buf) <= maxSpare {
		s.spare = buf
	}
}

// write appends the sealed group to the log. It goes on in a new segment
// once the active one is full, or as soon as a prepared file is ready if
// the active one was not prepared (the one made at open).
func (s *Store) write(g *group) error {
	seg := s.activeSeg
	size := seg.size.Load()
	if s.prepared == nil && size >= s.tune.segmentBytes/16 {
		// Busy enough to need another segment: zero one in the background.
		s.prepared = make(chan preparedFile, 1)
		s.background.Go(func() {
			f, err := prepareSegment(s.dir, s.tune.segmentBytes)
			s.prepared <- preparedFile{f, err}
		})
	}
	var p preparedFile
	switch {
	case size >= s.tune.segmentBytes:
		p = <-s.prepared
	case !s.activePrepared && s.prepared != nil:
		select {
		case p = <-s.prepared:
		default:
		}
	}
	if p.err != nil {
		// Not fatal: the zeros only make fsyncs cheaper. The log goes on
		// in the active segment, and the next group asks for another.
		s.log.Warn("logstore: preparing the next segment failed", slog.Any("error", p.err))
		s.prepared = nil
	}
	if p.f != nil {
		s.prepared = nil
		next, err := s.rotate(p.f, size, g.seq)
		if err != nil {
			return err
		}
		seg, size = next, next.size.Load()
	}
	seg.mark(size, s.lastAudit+1, s.tune.markBytes, g.names)
	if err := s.writeFrame(s.active, size, g.buf); err != nil {
		return err
	}
	g.end = size + int64(len(g.buf))
	s.lastAudit = max(s.lastAudit, g.lastAudit)
	s.sinceCheckpoint += int64(len(g.buf))
	seg.size.Store(g.end)
	return nil
}

// preparedFile is the outcome of prepareSegment.
type preparedFile struct {
	f   *os.File
	err error
}

// rotate makes the prepared file the active segment, starting at group
// seq, and cuts the old one to its size: a segment's size on disk is where
// its groups end, except for the last one. It waits for the syncs under
// way, so that every group of the old segment is answered first.
func (s *Store) rotate(f *os.File, size int64, seq uint64) (*segment, error) {
	s.syncing.Wait()
	s.mu.Lock()
	err := s.failed
	s.mu.Unlock()
	if err == nil {
		err = s.active.Truncate(size)
	}
	if err == nil {
		err = fdatasync(s.active)
	}
	var next *segment
	if err == nil {
		next, err = installSegment(s.dir, f, seq, s.lastAudit+1)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	s.active.Close()
	s.active, s.activePrepared, s.activeSeg = f, true, next
	s.mu.Lock()
	s.ackedEnd = headerLen
	s.mu.Unlock()
	s.segMu.Lock()
	s.segs = append(s.segs, next)
	s.segMu.Unlock()
	return next, s.openSyncFiles(next.path)
}

// openSyncFiles opens the active segment once for each syncer, after its
// header is durable: a write error after that is reported to each.
func (s *Store) openSyncFiles(path string) error {
	s.closeSyncFiles()
	for i := range s.syncFiles {
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			return err
		}
		s.syncFiles[i] = f
	}
	return nil
}

func (s *Store) closeSyncFiles() {
	for i, f := range s.syncFiles {
		if f != nil {
			f.Close()
			s.syncFiles[i] = nil
		}
	}
}

// maybeCheckpoint starts a checkpoint in the background once enough log
// has been written since the last one began.
func (s *Store) maybeCheckpoint() {
	if s.sinceCheckpoint < max(s.tune.checkpointBytes, s.lastCheckpoint.Load()) || s.checkpointing.Load() {
		return
	}
	s.sinceCheckpoint = 0
	s.checkpointing.Store(true)
	s.background.Go(func() {
		defer s.checkpointing.Store(false)
		if err := s.checkpoint(s.quit); err != nil && !errors.Is(err, errStopped) {
			// The log still holds everything: only open gets slower.
			s.log.Error("logstore: checkpoint failed", slog.Any("error", err))
		}
	})
}

// failLocked makes the store fail closed from now on.
func (s *Store) failLocked(err error) {
	if s.failed != nil {
		return
	}
	s.failed = fmt.Errorf("logstore: write failed, restart to recover from disk: %w: %v", store.ErrUnavailable, err)
	s.log.Error("logstore: write failed; failing closed", slog.Any("error", err))
}

// finishLocked releases the waiters of a group that will never be written.
func (s *Store) finishLocked(g *group) {
	g.err = s.failed
	if g.err == nil {
		g.err = errClosed
	}
	close(g.durable)
}

var errClosed = fmt.Errorf("logstore: closed: %w", store.ErrUnavailable)

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
	case s.closed.Load():
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
// the next group's write and fdatasync (store.Merger).
func (s *Store) MergesCommits() bool { return true }

// Close writes what is pending, stops a checkpoint under way and releases
// the directory.
func (s *Store) Close() error {
	// Under the engine's write lock, so that every commit either came
	// before (and is written below) or is refused before it changes
	// memory, which the final checkpoint reads.
	already := false
	s.mem.Update(func(store.Tx) error { return errClosed }, func([]memdb.Change) {
		s.mu.Lock()
		already = s.closed.Swap(true)
		s.mu.Unlock()
	})
	if already {
		return nil
	}
	close(s.wake)
	close(s.quit)
	s.stopping.Wait()
	s.watch.Close()
	s.lazyTimer.Stop()
	s.writeTimer.Stop()
	if s.prepared != nil {
		if p := <-s.prepared; p.f != nil {
			p.f.Close()
			os.Remove(p.f.Name())
		}
	}
	s.background.Wait()
	s.mu.Lock()
	failed := s.failed
	if failed == nil {
		s.finishLocked(s.filling)
	}
	s.mu.Unlock()
	var err error
	if failed == nil && !s.unsyncedSince.IsZero() {
		// A clean stop keeps every heartbeat.
		err = s.syncFile(s.active)
	}
	if err == nil && failed == nil && s.sinceCheckpoint >= closeCheckpointBytes {
		// A restart then reads the checkpoint alone, which loads several
		// times faster than the same records replayed from the log.
		err = s.checkpoint(nil)
	}
	if cerr := s.active.Close(); err == nil {
		err = cerr
	}
	s.closeSyncFiles()
	if uerr := s.unlock(); err == nil {
		err = uerr
	}
	if err != nil {
		return fmt.Errorf("logstore: close: %w", err)
	}
	return nil
}

// closeCheckpointBytes is how much log since the last checkpoint makes
// Close write one.
const closeCheckpointBytes = 1 << 20

// Memory counts the records the store keeps in the Go heap: what its
// memory grows with. The audit log stays on disk.
type Memory struct {
	Locks, Sessions, Lost int
}

// SyncStats counts the fdatasyncs that made the log's writes durable
// since the store opened: many commits share one under load (group
// commit), and lazy session touches are synced on their own when nothing
// else syncs them.
type SyncStats struct {
	Syncs uint64
	Time  time.Duration // spent in them, in all
}

// Syncs reports the log's fdatasyncs so far.
func (s *Store) Syncs() SyncStats {
	return SyncStats{Syncs: s.syncs.Load(), Time: time.Duration(s.syncTime.Load())}
}

// Memory reports what the store holds in memory now.
func (s *Store) Memory() Memory {
	c := s.mem.Counts()
	return Memory{Locks: c.Locks, Sessions: c.Sessions, Lost: c.Lost}
}
