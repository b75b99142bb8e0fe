package logstore

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"path/filepath"
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
// Inside an Update it does not see entries appended by that transaction;
// the Manager reads the log only in View.

// auditReader serves Audit from the log and the rest from memory.
type auditReader struct {
	store.ReadTx
	s *Store
}

func (r auditReader) Audit(q store.AuditQuery) ([]store.AuditEntry, error) {
	return r.s.listAudit(q)
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
	return t.s.listAudit(q)
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
	err := t.s.scanAudit(from, func(e *store.AuditEntry) bool {
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

// listAudit answers an audit query by walking the log by ID from the
// cursor, forward or (Newest) backward, and filtering like memdb does.
func (s *Store) listAudit(q store.AuditQuery) ([]store.AuditEntry, error) {
	var out []store.AuditEntry
	keep := func(e *store.AuditEntry) bool {
		if memdb.AuditMatches(q, e) {
			out = append(out, *e)
		}
		return q.Limit <= 0 || len(out) < q.Limit
	}
	var err error
	switch {
	case q.Newest:
		before := q.Before
		if before == 0 {
			before = math.MaxUint64
		}
		err = s.scanAuditBackward(before, keep)
	case q.After >= s.auditEnd:
		// Nothing after the last entry committed: a client following the
		// log polls this way, and need not cost a read of a segment.
	default:
		err = s.scanAudit(q.After+1, keep)
	}
	return out, err
}

// scanAudit calls fn with each live entry from ID from on, in ID order,
// until fn returns false.
func (s *Store) scanAudit(from uint64, fn func(*store.AuditEntry) bool) error {
	from = max(from, s.prunedThrough+1)
	s.segMu.RLock()
	defer s.segMu.RUnlock()
	// The last segment whose entries may reach from.
	first := 0
	for i, seg := range s.segs {
		if seg.firstAudit <= from {
			first = i
		}
	}
	for _, seg := range s.segs[first:] {
		more := true
		err := seg.auditRecords(func(id uint64, p []byte) (bool, error) {
			if id < from {
				return true, nil
			}
			e, err := codec.DecodeAudit(p)
			if err != nil {
				return false, err
			}
			more = fn(e)
			return more, nil
		})
		if err != nil || !more {
			return err
		}
	}
	return nil
}

// scanAuditBackward calls fn with each live entry below ID before, newest
// first, until fn returns false. Each segment is read whole, its entries
// found by their headers alone, and decoded from the newest.
func (s *Store) scanAuditBackward(before uint64, fn func(*store.AuditEntry) bool) error {
	floor := s.prunedThrough
	s.segMu.RLock()
	defer s.segMu.RUnlock()
	for i := len(s.segs) - 1; i >= 0; i-- {
		seg := s.segs[i]
		if seg.firstAudit >= before {
			continue
		}
		var found [][]byte
		err := seg.auditRecords(func(id uint64, p []byte) (bool, error) {
			if id > floor && id < before {
				found = append(found, p)
			}
			return id < before, nil
		})
		if err != nil {
			return err
		}
		for j := len(found) - 1; j >= 0; j-- {
			e, err := codec.DecodeAudit(found[j])
			if err != nil {
				return fmt.Errorf("logstore: %s: audit entry: %w", filepath.Base(seg.path), err)
			}
			if !fn(e) {
				return nil
			}
		}
		if seg.firstAudit <= floor+1 {
			return nil // no live entry below this segment
		}
	}
	return nil
}

// errStopWalk ends a walk of the log early.
var errStopWalk = errors.New("walk stopped")

// auditRecords calls fn with the ID and payload of each audit entry of
// the segment, in order, until fn returns false or fails. The caller holds
// segMu.
func (seg *segment) auditRecords(fn func(id uint64, p []byte) (bool, error)) error {
	b, err := seg.read()
	if err != nil {
		return fmt.Errorf("logstore: audit: %w", err)
	}
	end, err := frames(b, func(_ uint64, body []byte) error {
		return eachRecord(body, func(typ byte, p []byte) error {
			if typ != recAudit {
				return nil
			}
			id, err := auditID(p)
			if err != nil {
				return err
			}
			if more, err := fn(id, p); err != nil || !more {
				return cmp.Or(err, errStopWalk)
			}
			return nil
		})
	})
	switch {
	case err == errStopWalk:
		return nil
	case err == nil && end != len(b):
		err = errCorrupt
	}
	if err != nil {
		return fmt.Errorf("logstore: audit in %s: %w", filepath.Base(seg.path), err)
	}
	return nil
}
