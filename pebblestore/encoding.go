package pebblestore

import (
	"encoding/binary"

	"github.com/holdfast/holdfast/internal/codec"
)

// On disk every record is one key/value pair. The key starts with a byte
// naming the record kind and then names the record; the value is the
// record as internal/codec encodes it (a version byte, then the whole
// record), so loading never has to parse a key. Strings are
// length-prefixed, numbers are varints.
const (
	prefixLock      = 'l' // len(key) key session
	prefixSession   = 's' // id
	prefixAggregate = 'g' // member
	prefixLost      = 'x' // len(session) session len(key) key token(8)
	prefixAudit     = 'a' // id (8, big-endian)
	prefixCounter   = 'c' // counter byte
	prefixMeta      = 'm' // name
)

// formatKey holds the version of the whole layout.
var formatKey = []byte{prefixMeta, 'f', 'o', 'r', 'm', 'a', 't'}

const formatVersion = 1

func lockKey(dst []byte, key, session string) []byte {
	dst = append(dst, prefixLock)
	dst = codec.AppendString(dst, key)
	return append(dst, session...)
}

func sessionKey(dst []byte, id string) []byte {
	return append(append(dst, prefixSession), id...)
}

func aggregateKey(dst []byte, member string) []byte {
	return append(append(dst, prefixAggregate), member...)
}

func lostKey(dst []byte, session, key string, token uint64) []byte {
	dst = append(dst, prefixLost)
	dst = codec.AppendString(dst, session)
	dst = codec.AppendString(dst, key)
	return binary.BigEndian.AppendUint64(dst, token)
}

func auditKey(dst []byte, id uint64) []byte {
	return binary.BigEndian.AppendUint64(append(dst, prefixAudit), id)
}

func counterKey(dst []byte, c byte) []byte {
	return append(dst, prefixCounter, c)
}
