package pebblestore

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/holdfast/holdfast/internal/memdb"
	"github.com/holdfast/holdfast/store"
)

// The audit log lives only in Pebble: memdb numbers each entry and hands it
// over in the change set, and the store lists and prunes the log from disk,
// so a long retention costs disk, not memory.
//
// Audit reads what Pebble holds: every commit whose Update has returned.
// Inside an Update it does not see entries appended by that transaction.
// The Manager lists the log through ListAudit, outside any transaction.

// auditReader serves Audit from Pebble and the rest from memory.
type auditReader struct {
	store.ReadTx
	s *Store
}

func (r auditReader) Audit(q store.AuditQuery) ([]store.AuditEntry, error) {
	return r.s.listAudit(context.Background(), q, inTx)
}

// inTx is the last ID listAudit lists inside a transaction: every entry
// Pebble holds then, since what the View returns waits for its commits to
// be durable.
const inTx = math.MaxUint64 - 1

// auditTx serves Audit and PruneAudit from Pebble. The IDs it prunes are
// written as deletions with the transaction's changes, if it commits.
type auditTx struct {
	store.Tx
	s      *Store
	pruned []uint64
}

var _ store.Toucher = (*auditTx)(nil)

// TouchSession keeps memdb's lazy session writes, which the Manager finds
// by asserting store.Toucher.
func (t *auditTx) TouchSession(sess store.Session) error {
	return t.Tx.(store.Toucher).TouchSession(sess)
}

func (t *auditTx) Audit(q store.AuditQuery) ([]store.AuditEntry, error) {
	return t.s.listAudit(context.Background(), q, inTx)
}

// PruneAudit deletes the oldest entries in ID order, on the ground that At
// grows with ID in one store; it stops at the first entry it keeps, so it
// never walks the entries it keeps.
func (t *auditTx) PruneAudit(before time.Time, limit int) (int, error) {
	from := t.s.prunedThrough + 1
	if n := len(t.pruned); n > 0 {
		from = t.pruned[n-1] + 1
	}
	n := 0
	err := t.s.scanAudit(&pebble.IterOptions{LowerBound: auditKey(nil, from), UpperBound: auditEnd}, false,
		func(e *store.AuditEntry) bool {
			if !e.At.Before(before) || (limit > 0 && n >= limit) {
				return false
			}
			t.pruned = append(t.pruned, e.ID)
			n++
			return true
		})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// deletions returns the changes that delete what the transaction pruned.
func (t *auditTx) deletions() []memdb.Change {
	out := make([]memdb.Change, len(t.pruned))
	for i, id := range t.pruned {
		out[i] = memdb.Change{Kind: memdb.KindAudit, Delete: true, Audit: &store.AuditEntry{ID: id}}
	}
	return out
}

// auditEnd bounds the audit key range from above.
var auditEnd = []byte{prefixAudit + 1}

var _ store.AuditLister = (*Store)(nil)

// ListAudit lists audit entries like a View's Audit, without holding the
// engine's lock while it reads Pebble: a listing that reads far into a
// long log (a filter few entries match) would hold up every commit. It
// lists the entries up to the last one assigned when it began, which are
// durable once View has returned.
func (s *Store) ListAudit(ctx context.Context, q store.AuditQuery) ([]store.AuditEntry, error) {
	_, last := s.mem.Counters()
	if err := s.View(ctx, func(store.ReadTx) error { return nil }); err != nil {
		return nil, err
	}
	return s.listAudit(ctx, q, last)
}

// listAudit answers an audit query from the entries up to ID last by
// walking the log by ID from the cursor, forward or (Newest) backward, and
// filtering like memdb does. It gives up once ctx ends.
func (s *Store) listAudit(ctx context.Context, q store.AuditQuery, last uint64) ([]store.AuditEntry, error) {
	if !q.Newest && q.After >= last {
		return nil, nil // a client following the log polls this way
	}
	opts := &pebble.IterOptions{LowerBound: auditKey(nil, 0), UpperBound: auditKey(nil, last+1)}
	switch {
	case q.Newest && q.Before > 0 && q.Before <= last:
		opts.UpperBound = auditKey(nil, q.Before)
	case q.Newest:
	default:
		opts.LowerBound = auditKey(nil, q.After+1)
	}
	var out []store.AuditEntry
	walked := 0
	err := s.scanAudit(opts, q.Newest, func(e *store.AuditEntry) bool {
		if walked++; walked%4096 == 0 && ctx.Err() != nil {
			return false
		}
		if memdb.AuditMatches(q, e) {
			out = append(out, *e)
		}
		return q.Limit <= 0 || len(out) < q.Limit
	})
	if err == nil {
		err = ctx.Err()
	}
	return out, err
}

// scanAudit calls fn with each entry in opts' range, by ID, until fn
// returns false.
func (s *Store) scanAudit(opts *pebble.IterOptions, backward bool, fn func(*store.AuditEntry) bool) error {
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	if s.dbClosed {
		return errClosed
	}
	it, err := s.db.NewIter(opts)
	if err != nil {
		return fmt.Errorf("pebblestore: audit: %w", err)
	}
	step := it.Next
	valid := it.First()
	if backward {
		step = it.Prev
		valid = it.Last()
	}
	for ; valid; valid = step() {
		e, err := s.decodeAudit(it.Value())
		if err != nil {
			it.Close()
			return fmt.Errorf("pebblestore: audit record %q: %w", it.Key(), err)
		}
		if !fn(e) {
			break
		}
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("pebblestore: audit: %w", err)
	}
	return nil
}

// lastAuditID is the highest ID in the log on disk (0 if it is empty).
func (s *Store) lastAuditID() (uint64, error) {
	var last uint64
	err := s.scanAudit(&pebble.IterOptions{LowerBound: auditKey(nil, 0), UpperBound: auditEnd}, true,
		func(e *store.AuditEntry) bool {
			last = e.ID
			return false
		})
	return last, err
}
