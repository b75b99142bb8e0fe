package pebblestore

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"github.com/holdfast/holdfast/internal/codec"
	"github.com/holdfast/holdfast/internal/memdb"
)

// records collects encoded records in commit order. A group's commits
// add theirs; when the group is appended, the last write of each key goes
// into its batch, in key order: a lock taken and released within one
// group is written once, a session touched by many of its commits once,
// and Pebble inserts keys given in order into its memtable at a fraction
// of the cost of keys in random order. A group that grows past
// sortedLimit writes its records into its batch as they come instead, so
// that a bulk load is not held twice in memory.
type records struct {
	buf  []byte
	recs []record
}

// sortedLimit is the size of a group's records past which they go into
// its batch in commit order; sorting gains little on a group that size.
const sortedLimit = 256 << 10

// record is one write; its key and value are buf[start:keyEnd] and
// buf[keyEnd:end].
type record struct {
	start, keyEnd, end int
	delete             bool
}

// add encodes one record's final state.
func (rs *records) add(c memdb.Change) error {
	start := len(rs.buf)
	buf, err := appendKey(rs.buf, c)
	if err != nil {
		return err
	}
	keyEnd := len(buf)
	if !c.Delete {
		buf = appendValue(buf, c)
	}
	rs.buf = buf
	rs.recs = append(rs.recs, record{start: start, keyEnd: keyEnd, end: len(buf), delete: c.Delete})
	return nil
}

func appendKey(dst []byte, c memdb.Change) ([]byte, error) {
	switch c.Kind {
	case memdb.KindLock:
		return lockKey(dst, c.Lock.Key, c.Lock.Session), nil
	case memdb.KindSession:
		return sessionKey(dst, c.Session.ID), nil
	case memdb.KindAggregate:
		return aggregateKey(dst, c.Aggregate.Member), nil
	case memdb.KindLost:
		return lostKey(dst, c.Lost.Lock.Session, c.Lost.Lock.Key, c.Lost.Lock.Token), nil
	case memdb.KindAudit:
		return auditKey(dst, c.Audit.ID), nil
	case memdb.KindCounter:
		return counterKey(dst, byte(c.Counter)), nil
	}
	return dst, fmt.Errorf("unknown change kind %d", c.Kind)
}

func appendValue(dst []byte, c memdb.Change) []byte {
	switch c.Kind {
	case memdb.KindLock:
		return codec.EncodeLock(dst, c.Lock)
	case memdb.KindSession:
		return codec.EncodeSession(dst, c.Session)
	case memdb.KindAggregate:
		return codec.EncodeAggregate(dst, c.Aggregate)
	case memdb.KindLost:
		return codec.EncodeLost(dst, c.Lost)
	case memdb.KindAudit:
		return codec.EncodeAudit(dst, c.Audit)
	case memdb.KindCounter:
		return binary.BigEndian.AppendUint64(dst, c.Value)
	}
	return dst
}

func (rs *records) key(r record) []byte { return rs.buf[r.start:r.keyEnd] }

func (rs *records) empty() bool { return len(rs.recs) == 0 }

// reprSize is the size of a batch holding exactly the records, so that
// it is allocated once.
func (rs *records) reprSize() int {
	n := batchHeaderLen
	for _, r := range rs.recs {
		kl, vl := r.keyEnd-r.start, r.end-r.keyEnd
		n += 1 + uvarintLen(kl) + kl
		if !r.delete {
			n += uvarintLen(vl) + vl
		}
	}
	return n
}

// batchHeaderLen is the size of a Pebble batch's header (sequence number
// and count).
const batchHeaderLen = 12

func uvarintLen(n int) int { return (bits.Len64(uint64(n)|1) + 6) / 7 }

// writeSorted puts the last write of each key into b, in key order.
func (rs *records) writeSorted(b *pebble.Batch) error {
	slices.SortStableFunc(rs.recs, func(x, y record) int { return bytes.Compare(rs.key(x), rs.key(y)) })
	for i, r := range rs.recs {
		if i+1 < len(rs.recs) && bytes.Equal(rs.key(r), rs.key(rs.recs[i+1])) {
			continue // a later commit of the group wrote it again
		}
		if err := rs.write(b, r); err != nil {
			return err
		}
	}
	return nil
}

// writeInOrder puts every record into b in commit order.
func (rs *records) writeInOrder(b *pebble.Batch) error {
	for _, r := range rs.recs {
		if err := rs.write(b, r); err != nil {
			return err
		}
	}
	return nil
}

func (rs *records) write(b *pebble.Batch, r record) error {
	if r.delete {
		return b.Delete(rs.key(r), nil)
	}
	return b.Set(rs.key(r), rs.buf[r.keyEnd:r.end], nil)
}

// reset empties rs for another group, keeping its memory unless one huge
// group grew it.
func (rs *records) reset() {
	const keep = 1 << 20
	if cap(rs.buf) > keep {
		*rs = records{}
		return
	}
	rs.buf, rs.recs = rs.buf[:0], rs.recs[:0]
}

func beUint64(b []byte) uint64 { return binary.BigEndian.Uint64(b) }
