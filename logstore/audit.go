package logstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"time"

	"github.com/holdfast/holdfast/internal/codec"
	"github.com/holdfast/holdfast/internal/memdb"
	"github.com/holdfast/holdfast/store"
)

// The audit log lives only in the log: memdb numbers each entry and hands
// it over in the change set, the group carries it to disk, and listings
// read the segments, which hold the entries in ID order. Pruning writes a
// watermark ("every ID up to N is pruned") that listings skip up to; a
// segment goes once a checkpoint covers it and the watermark has passed
// all its entries. So a long retention costs disk, not memory.
//
// Audit reads the durable log: every commit whose Update has returned.
// Inside an Update it does not see entries appended by that transaction.
// The Manager lists the log through ListAudit, outside any transaction.

// auditReader serves Audit from the log and the rest from memory.
type auditReader struct {
	store.ReadTx
	s *Store
}

func (r auditReader) Audit(q store.AuditQuery) ([]store.AuditEntry, error) {
	return r.s.listAudit(context.Background(), q, r.s.auditBounds(), false)
}

// auditTx serves Audit and PruneAudit from the log. The watermark it
// prunes to is written with the transaction's changes, if it commits.
type auditTx struct {
	store.Tx
	s      *Store
	pruned uint64 // the watermark this transaction moved to; 0 if none
}

var _ store.Toucher = (*auditTx)(nil)

// TouchSession keeps memdb's lazy session writes, which the Manager finds
// by asserting store.Toucher.
func (t *auditTx) TouchSession(sess store.Session) error {
	return t.Tx.(store.Toucher).TouchSession(sess)
}

func (t *auditTx) Audit(q store.AuditQuery) ([]store.AuditEntry, error) {
	return t.s.listAudit(context.Background(), q, t.s.auditBounds(), false)
}

// PruneAudit prunes the oldest entries in ID order, on the ground that At
// grows with ID in one store; it stops at the first entry it keeps, so it
// never walks the entries it keeps.
//
// The sweep asks every second; the oldest entry it kept last time (or the
// absence of any newer entry) answers without reading the log until that
// entry is old enough.
func (t *auditTx) PruneAudit(before time.Time, limit int) (int, error) {
	from := max(t.s.prunedThrough, t.pruned) + 1
	if h := t.s.auditHead; from > t.s.auditEnd || (h.from == from && !h.at.Before(before)) {
		return 0, nil
	}
	n := 0
	err := t.s.scanAudit(context.Background(), from, t.s.auditEnd, auditWalk{}, func(e *store.AuditEntry) bool {
		if !e.At.Before(before) || (limit > 0 && n >= limit) {
			t.s.auditHead = auditHead{from: e.ID, at: e.At}
			return false
		}
		t.pruned = e.ID
		n++
		return true
	})
	return n, err
}

// auditHead is the oldest entry of the log from ID from on, as a
// PruneAudit found it: a fact about the log that holds whether that
// transaction committed or not. Used under the engine's write lock.
type auditHead struct {
	from uint64
	at   time.Time
}

var _ store.AuditLister = (*Store)(nil)

// ListAudit lists audit entries like a View's Audit, without holding the
// engine's lock while it reads the log: a listing that reads far into a
// long log (a filter few entries match) would hold up every commit. It
// lists the entries up to the last one committed when it began, which are
// durable once View has returned.
func (s *Store) ListAudit(ctx context.Context, q store.AuditQuery) ([]store.AuditEntry, error) {
	var b auditBounds
	if err := s.View(ctx, func(store.ReadTx) error {
		b = s.auditBounds()
		return nil
	}); err != nil {
		return nil, err
	}
	return s.listAudit(ctx, q, b, true)
}

// auditBounds are the live audit IDs at one moment: above floor, up to
// end.
type auditBounds struct{ floor, end uint64 }

// auditBounds reads them; the caller holds the engine's lock.
func (s *Store) auditBounds() auditBounds {
	return auditBounds{floor: s.prunedThrough, end: s.auditEnd}
}

// listAudit answers an audit query from the entries within b by walking
// the log by ID from the cursor, forward or (Newest) backward, and
// filtering like memdb does. It marks the segments it reads that have no
// marks if mark is set: not in a transaction, whose lock the extra read
// would hold.
func (s *Store) listAudit(ctx context.Context, q store.AuditQuery, b auditBounds, mark bool) ([]store.AuditEntry, error) {
	var out []store.AuditEntry
	keep := func(e *store.AuditEntry) bool {
		if memdb.AuditMatches(q, e) {
			codec.OwnAudit(e)
			out = append(out, *e)
		}
		return q.Limit <= 0 || len(out) < q.Limit
	}
	w := auditWalk{want: queryNames(q), mark: mark}
	var err error
	switch {
	case q.Newest:
		before := b.end + 1
		if q.Before != 0 {
			before = min(before, q.Before)
		}
		err = s.scanAuditBackward(ctx, before, b.floor, w, keep)
	case max(q.After, b.floor) >= b.end:
		// Nothing live after the cursor: a client following the log polls
		// this way, and need not cost a read of a segment.
	default:
		err = s.scanAudit(ctx, max(q.After, b.floor)+1, b.end, w, keep)
	}
	if err != nil && !errors.Is(err, ctx.Err()) {
		s.mu.Lock()
		failed := s.failed
		s.mu.Unlock()
		if failed != nil {
			// A failed write meanwhile cut the log back under the walk:
			// that failure is the answer, not the short segment it read.
			return nil, failed
		}
	}
	return out, err
}

// segments is the log's segments as they are now. A walk of the log reads
// them without holding segMu, which would hold up the syncer's next
// rotation; a checkpoint may drop one meanwhile, but only once every audit
// entry in it is pruned (dropCovered), so the walk skips it.
func (s *Store) segments() []*segment {
	s.segMu.RLock()
	defer s.segMu.RUnlock()
	return slices.Clone(s.segs)
}

// auditWalk is how a walk reads the log: it skips the stretches that hold
// no entry with the names want (none: it skips none), and marks the
// segments it reads that have no marks if mark is set.
type auditWalk struct {
	want []name
	mark bool
}

// scanAudit calls fn with each entry with an ID from from to end, in ID
// order, until fn returns false. The entry is decoded in place, its
// strings in the walk's buffer: fn copies what it keeps (codec.OwnAudit),
// so that the entries a filter refuses cost no allocation.
func (s *Store) scanAudit(ctx context.Context, from, end uint64, w auditWalk, fn func(*store.AuditEntry) bool) error {
	segs := s.segments()
	var e store.AuditEntry
	// The last segment whose entries may reach from.
	first := 0
	for i, seg := range segs {
		if seg.firstAudit <= from {
			first = i
		}
	}
	for _, seg := range segs[first:] {
		if seg.firstAudit > end {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		more := true
		err := s.readSegment(seg, w.mark, func(sf *segmentFile) error {
			st := sf.stretches()
			for i, m := range st {
				if i+1 < len(st) && st[i+1].audit <= from {
					continue // every entry in it is older than from
				}
				if m.audit > end {
					more = false // every entry from it on is past end
					return nil
				}
				if !m.names.mayHold(w.want) {
					continue
				}
				to := sf.size
				if i+1 < len(st) {
					to = st[i+1].off
				}
				err := sf.frames(m.off, to, func(_ int64, body []byte) (bool, error) {
					return auditIn(body, func(id uint64, p []byte) (bool, error) {
						if id < from {
							return true, nil
						}
						if id > end {
							more = false
							return false, nil
						}
						if err := s.decodeAudit(p, &e); err != nil {
							return false, err
						}
						more = fn(&e)
						return more, nil
					})
				})
				if err != nil || !more {
					return err
				}
			}
			return nil
		})
		if err != nil || !more {
			return err
		}
	}
	return nil
}

// scanAuditBackward calls fn with each entry above ID floor and below ID
// before, newest first, until fn returns false; fn copies what it keeps,
// as for scanAudit.
func (s *Store) scanAuditBackward(ctx context.Context, before, floor uint64, w auditWalk, fn func(*store.AuditEntry) bool) error {
	segs := s.segments()
	for i := len(segs) - 1; i >= 0; i-- {
		seg := segs[i]
		if seg.firstAudit >= before {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		more := true
		err := s.readSegment(seg, w.mark, func(sf *segmentFile) (err error) {
			more, err = s.segmentBackward(sf, before, floor, w.want, fn)
			return err
		})
		if err != nil || !more {
			return err
		}
		if seg.firstAudit <= floor+1 {
			return nil // no live entry below this segment
		}
	}
	return nil
}

// segmentBackward calls fn with the entries of one segment above ID floor
// and below ID before, newest first, and reports whether fn wanted more.
// It reads the segment's stretches between marks from the last, skipping
// those that hold only newer entries or none with the names want, and
// stops before one that holds only pruned ones.
func (s *Store) segmentBackward(sf *segmentFile, before, floor uint64, want []name, fn func(*store.AuditEntry) bool) (bool, error) {
	st := sf.stretches()
	for i := len(st) - 1; i >= 0; i-- {
		if st[i].audit >= before {
			continue
		}
		to := sf.size
		if i+1 < len(st) {
			to = st[i+1].off
		}
		if st[i].names.mayHold(want) {
			if more, err := s.stretchBackward(sf, st[i].off, to, before, floor, fn); err != nil || !more {
				return more, err
			}
		}
		if st[i].audit <= floor+1 {
			return true, nil // the entries before it are pruned, if any
		}
	}
	return true, nil
}

// stretchBackward calls fn with the entries above ID floor and below ID
// before in the frames from offset from to offset to, newest first, and
// reports whether fn wanted more. Frames are read forward only: one pass
// finds those that hold such entries, and they are read again from the
// newest.
func (s *Store) stretchBackward(sf *segmentFile, from, to int64, before, floor uint64, fn func(*store.AuditEntry) bool) (bool, error) {
	wanted := func(id uint64) bool { return id > floor && id < before }
	offs := sf.offs[:0]
	err := sf.frames(from, to, func(off int64, body []byte) (bool, error) {
		held, past := false, false
		_, err := auditIn(body, func(id uint64, _ []byte) (bool, error) {
			held = held || wanted(id)
			past = id >= before
			return !past, nil
		})
		if held {
			offs = append(offs, off)
		}
		return !past, err
	})
	sf.offs = offs
	if err != nil {
		return false, err
	}
	found, e := sf.found, &sf.entry
	defer func() { sf.found = found[:0] }()
	for j := len(offs) - 1; j >= 0; j-- {
		body, err := sf.frameAt(offs[j])
		if err != nil {
			return false, err
		}
		found = found[:0]
		if _, err := auditIn(body, func(id uint64, p []byte) (bool, error) {
			if wanted(id) {
				found = append(found, p)
			}
			return id < before, nil
		}); err != nil {
			return false, err
		}
		for k := len(found) - 1; k >= 0; k-- {
			if err := s.decodeAudit(found[k], e); err != nil {
				return false, err
			}
			if !fn(e) {
				return false, nil
			}
		}
	}
	return true, nil
}

// readSegment opens seg for fn to read, and first marks it if it has no
// marks and mark is set. A segment a checkpoint dropped since the caller
// listed it has no live entry left, and fn is not called; a failure names
// the segment.
func (s *Store) readSegment(seg *segment, mark bool, fn func(*segmentFile) error) error {
	sf, err := seg.open()
	if errors.Is(err, fs.ErrNotExist) {
		s.segMu.RLock()
		dropped := !slices.Contains(s.segs, seg)
		s.segMu.RUnlock()
		if dropped {
			return nil
		}
	}
	if err == nil && mark && !seg.marked() {
		err = s.markSegment(sf)
	}
	if err == nil {
		err = fn(sf)
	}
	if sf != nil {
		sf.Close()
	}
	if err != nil {
		return fmt.Errorf("logstore: audit in %s: %w", filepath.Base(seg.path), err)
	}
	return nil
}

// markSegment reads the whole of a segment that has no marks (one before
// the last checkpoint at open, which open does not read) to make them:
// the walks that read it after read only the stretches they need.
func (s *Store) markSegment(sf *segmentFile) error {
	mk := newMarker(sf.seg, s.tune.markBytes)
	if err := sf.frames(headerLen, sf.size, func(off int64, body []byte) (bool, error) {
		return true, mk.frame(off, body)
	}); err != nil {
		return err
	}
	mk.install()
	return nil
}

// auditIn calls fn with the ID and payload of each audit entry in a
// frame's body, in order, until fn returns false or fails, and reports
// whether fn wanted more.
func auditIn(body []byte, fn func(id uint64, p []byte) (bool, error)) (bool, error) {
	more := true
	err := eachRecord(body, func(typ byte, p []byte) error {
		if typ != recAudit || !more {
			return nil
		}
		id, err := auditID(p)
		if err != nil {
			return err
		}
		more, err = fn(id, p)
		return err
	})
	return more, err
}
