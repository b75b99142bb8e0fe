package pebblestore

import (
	"encoding/binary"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/holdfast/holdfast/internal/memdb"
)

// changeWriter encodes changes into a batch, reusing its scratch buffers;
// the batch copies what it is given.
type changeWriter struct {
	key, value []byte
}

// write puts one record's final state into b.
func (w *changeWriter) write(b *pebble.Batch, c memdb.Change) error {
	key, value := w.key[:0], w.value[:0]
	switch c.Kind {
	case memdb.KindLock:
		key = lockKey(key, c.Lock.Key, c.Lock.Session)
		value = encodeLock(value, c.Lock)
	case memdb.KindSession:
		key = sessionKey(key, c.Session.ID)
		value = encodeSession(value, c.Session)
	case memdb.KindAggregate:
		key = aggregateKey(key, c.Aggregate.Member)
		value = encodeAggregate(value, c.Aggregate)
	case memdb.KindLost:
		key = lostKey(key, c.Lost.Lock.Session, c.Lost.Lock.Key, c.Lost.Lock.Token)
		value = encodeLost(value, c.Lost)
	case memdb.KindAudit:
		key = auditKey(key, c.Audit.ID)
		value = encodeAudit(value, c.Audit)
	case memdb.KindCounter:
		key = counterKey(key, byte(c.Counter))
		value = binary.BigEndian.AppendUint64(value, c.Value)
	default:
		return fmt.Errorf("unknown change kind %d", c.Kind)
	}
	w.key, w.value = key, value
	if c.Delete {
		return b.Delete(key, nil)
	}
	return b.Set(key, value, nil)
}

func beUint64(b []byte) uint64 { return binary.BigEndian.Uint64(b) }
