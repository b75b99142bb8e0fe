package memdb

import (
	"github.com/google/btree"

	"github.com/holdfast/holdfast/store"
)

// Snapshot is a frozen view of every record but the audit log, for a
// durable store to write a checkpoint while transactions go on. Taking one
// is cheap: it clones the indexes it walks, which share their nodes with
// the engine's until either side writes to one (copy on write); the records
// themselves are immutable and shared.
type Snapshot struct {
	locks      *btree.BTreeG[*lockRec]
	live       *btree.BTreeG[*sessRec]
	ended      *btree.BTreeG[timedSessionItem]
	aggregates *btree.BTreeG[aggItem]
	lost       *btree.BTreeG[lostItem]
	// Token and AuditID are the counters' values.
	Token, AuditID uint64
}

// Snapshot freezes the engine's state. under, when not nil, runs while
// the write lock is held, between two commits, so that the caller can
// note where the snapshot falls in its own log.
func (e *Engine) Snapshot(under func()) *Snapshot {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := &Snapshot{
		locks:      e.locksBySess.Clone(),
		live:       e.liveSessions.Clone(),
		ended:      e.endedSession.Clone(),
		aggregates: e.aggByMember.Clone(),
		lost:       e.lost.Clone(),
		Token:      e.lastToken,
		AuditID:    e.lastAuditID,
	}
	if under != nil {
		under()
	}
	return s
}

// Sessions calls fn with every session, live then ended, until fn returns
// false.
func (s *Snapshot) Sessions(fn func(*store.Session) bool) {
	more := true
	s.live.Ascend(func(r *sessRec) bool {
		v := r.session()
		more = fn(&v)
		return more
	})
	if more {
		s.ended.Ascend(func(it timedSessionItem) bool {
			v := it.rec.session()
			return fn(&v)
		})
	}
}

// Aggregates calls fn with every aggregate membership until fn returns
// false.
func (s *Snapshot) Aggregates(fn func(*store.Aggregate) bool) {
	s.aggregates.Ascend(func(it aggItem) bool {
		return fn(&store.Aggregate{Member: it.a, Root: it.b})
	})
}

// Locks calls fn with every lock, by session, until fn returns false. The
// value passed is reused by the next call.
func (s *Snapshot) Locks(fn func(*store.Lock) bool) {
	var l store.Lock
	s.locks.Ascend(func(r *lockRec) bool {
		l = r.lock()
		return fn(&l)
	})
}

// Lost calls fn with every lost record until fn returns false. The value
// passed is reused by the next call.
func (s *Snapshot) Lost(fn func(*store.Lost) bool) {
	var l store.Lost
	s.lost.Ascend(func(it lostItem) bool {
		l = it.rec.lost()
		return fn(&l)
	})
}
