package pgstore

import (
	"hash/fnv"
	"maps"
	"slices"
)

// Transactions serialise through transaction-scoped advisory locks on the
// names of the records they read and write, so that READ COMMITTED
// transactions behave as if they ran one after another wherever they
// touch the same records:
//
//   - a lock key: exclusive on the key, shared on each of its ancestors.
//     Two transactions on keys where one covers the other (order/42 and
//     order/42/line/7) or on the same key wait for each other; siblings do
//     not, since they only share ancestors in shared mode.
//   - a session id: exclusive, whenever its record is read or written.
//   - the aggregate mappings: one lock, shared by readers, exclusive for
//     the rare change.
//
// A transaction cannot know up front which records it will touch, so it
// takes these locks as it goes, and that could deadlock. It does not
// linger in one, because a transaction waits without limit only for a lock
// whose id is greater than that of every lock it holds; for any other it
// waits briefly (briefWait), and if that runs out it rolls back and runs
// again, taking first, in ascending order, every lock the failed attempt
// wanted. A cycle of waits needs some transaction to wait for an id below
// one it holds, and that wait ends within briefWait.

// Lock classes keep the id spaces of keys, sessions and the rest apart.
const (
	classKey        = 'k'
	classSession    = 's'
	classAggregates = 'a'
	classMigrate    = 'm'
)

// lockID is the advisory lock id of a name. The schema is part of it, so
// two holdfast schemas in one database do not wait for each other; a hash
// collision only makes two unrelated names serialise.
func lockID(schema string, class byte, name string) int64 {
	h := fnv.New64a()
	h.Write([]byte(schema))
	h.Write([]byte{0, class, 0})
	h.Write([]byte(name))
	return int64(h.Sum64())
}

// lockSet tracks one transaction's advisory locks: those it holds, those
// it needs before its next statement, and (across attempts of one Update)
// those it learned it will need.
type lockSet struct {
	held    map[int64]bool // id → exclusive
	maxHeld int64
	pending map[int64]bool // id → exclusive
}

// need asks for id before the next statement; exclusive wins over shared.
func (s *lockSet) need(id int64, exclusive bool) {
	if x, ok := s.held[id]; ok && (x || !exclusive) {
		return
	}
	if s.pending == nil {
		s.pending = make(map[int64]bool)
	}
	s.pending[id] = s.pending[id] || exclusive
}

// take returns the pending locks as take_locks arguments, in ascending
// order, with the ones it may wait for without limit marked.
func (s *lockSet) take() (ids []int64, exclusive, wait []bool) {
	if len(s.pending) == 0 {
		return nil, nil, nil
	}
	ids = slices.Sorted(maps.Keys(s.pending))
	exclusive = make([]bool, len(ids))
	wait = make([]bool, len(ids))
	for i, id := range ids {
		exclusive[i] = s.pending[id]
		_, upgrade := s.held[id]
		wait[i] = !upgrade && (len(s.held) == 0 || id > s.maxHeld)
	}
	return ids, exclusive, wait
}

// taken records that the pending locks are held now.
func (s *lockSet) taken() {
	if s.held == nil {
		s.held = make(map[int64]bool)
	}
	for id, x := range s.pending {
		if len(s.held) == 0 || id > s.maxHeld {
			s.maxHeld = id
		}
		s.held[id] = s.held[id] || x
	}
	clear(s.pending)
}

// wanted is every lock held or pending: what a retry takes up front.
func (s *lockSet) wanted() map[int64]bool {
	out := maps.Clone(s.held)
	if out == nil {
		out = make(map[int64]bool)
	}
	for id, x := range s.pending {
		out[id] = out[id] || x
	}
	return out
}
