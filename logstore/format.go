package logstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/holdfast/holdfast/internal/codec"
	"github.com/holdfast/holdfast/internal/memdb"
)

// The directory holds:
//
//	holdfast.lock             flock'd while a process has the store open
//	<first seq, 16 hex>.log   log segments, in order of their first group
//	checkpoint-<seq, 16 hex>  the state before group seq (see checkpoint.go)
//	*.tmp                     a checkpoint being written; removed on open
//
// Version 1 of the format, every integer little-endian but the records'
// own varints (internal/codec):
//
//	segment   = header32 frame*
//	header32  = magic(8) version(4) first_seq(8) first_audit(8) crc(4)
//	frame     = length(4) crc(4) seq(8) body     crc over seq and body
//	body      = record*
//	record    = type(1) length(4) payload
//
// A segment's first_audit is the next audit ID when it was created: its
// entries have IDs from first_audit up to the next segment's, excluded.
// One frame is one group commit; a segment's frames have consecutive seqs
// from first_seq on. A checkpoint is laid out the same way with magic
// "hfastckp", first_seq the first group it does not hold, first_audit the
// prune watermark, and frames numbered from 1; its last frame holds an
// end record. Every crc is CRC-32C.
const (
	formatVersion = 1
	headerLen     = 32
	frameLen      = 16 // a frame's header
	recordLen     = 5  // a record's header
	// maxFrame refuses a corrupt length before allocating it.
	maxFrame = 1 << 30
)

var (
	segmentMagic    = [8]byte{'h', 'f', 'a', 's', 't', 'l', 'o', 'g'}
	checkpointMagic = [8]byte{'h', 'f', 'a', 's', 't', 'c', 'k', 'p'}
)

// Record types. A deletion carries the record as it was, which names it.
const (
	recLock byte = iota + 1
	recLockDelete
	recSession
	recSessionDelete
	recAggregate
	recAggregateDelete
	recLost
	recLostDelete
	recAudit   // codec audit entry; its ID follows the version byte
	recCounter // counter(1) value(uvarint)
	recPruned  // uvarint: every audit ID up to it is pruned
	recEnd     // the end of a checkpoint
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

var errCorrupt = errors.New("corrupt log")

// header is the first 32 bytes of a segment or checkpoint.
type header struct {
	magic      [8]byte
	firstSeq   uint64
	firstAudit uint64
}

func (h header) encode() []byte {
	b := make([]byte, headerLen)
	copy(b, h.magic[:])
	binary.LittleEndian.PutUint32(b[8:], formatVersion)
	binary.LittleEndian.PutUint64(b[12:], h.firstSeq)
	binary.LittleEndian.PutUint64(b[20:], h.firstAudit)
	binary.LittleEndian.PutUint32(b[28:], crc32.Checksum(b[:28], castagnoli))
	return b
}

func decodeHeader(b []byte, magic [8]byte) (header, error) {
	if len(b) < headerLen || [8]byte(b[:8]) != magic ||
		binary.LittleEndian.Uint32(b[28:]) != crc32.Checksum(b[:28], castagnoli) {
		return header{}, fmt.Errorf("bad header: %w", errCorrupt)
	}
	if v := binary.LittleEndian.Uint32(b[8:]); v != formatVersion {
		return header{}, fmt.Errorf("format version %d, this build reads %d", v, formatVersion)
	}
	return header{magic: magic, firstSeq: binary.LittleEndian.Uint64(b[12:]), firstAudit: binary.LittleEndian.Uint64(b[20:])}, nil
}

// newFrame starts a frame in buf, whose records are appended after it.
func newFrame(buf []byte) []byte { return append(buf[:0], make([]byte, frameLen)...) }

// sealFrame fills in the header of the frame in buf.
func sealFrame(buf []byte, seq uint64) {
	binary.LittleEndian.PutUint32(buf, uint32(len(buf)-frameLen))
	binary.LittleEndian.PutUint64(buf[8:], seq)
	binary.LittleEndian.PutUint32(buf[4:], crc32.Checksum(buf[8:], castagnoli))
}

// parseFrame reads the frame at the start of b: its seq, body and length,
// or ok false if b does not start with a whole, intact frame.
func parseFrame(b []byte) (seq uint64, body []byte, n int, ok bool) {
	if len(b) < frameLen {
		return 0, nil, 0, false
	}
	size := binary.LittleEndian.Uint32(b)
	if size > maxFrame || int(size) > len(b)-frameLen {
		return 0, nil, 0, false
	}
	n = frameLen + int(size)
	if crc32.Checksum(b[8:n], castagnoli) != binary.LittleEndian.Uint32(b[4:]) {
		return 0, nil, 0, false
	}
	return binary.LittleEndian.Uint64(b[8:]), b[frameLen:n], n, true
}

// beginRecord appends a record's header; endRecord fills in its length
// once the payload is appended after it.
func beginRecord(buf []byte, typ byte) ([]byte, int) {
	return append(buf, typ, 0, 0, 0, 0), len(buf)
}

func endRecord(buf []byte, start int) []byte {
	binary.LittleEndian.PutUint32(buf[start+1:], uint32(len(buf)-start-recordLen))
	return buf
}

// appendChange appends the record of one change of a commit.
func appendChange(buf []byte, c memdb.Change) ([]byte, error) {
	var typ byte
	switch c.Kind {
	case memdb.KindLock:
		typ = pick(c.Delete, recLockDelete, recLock)
	case memdb.KindSession:
		typ = pick(c.Delete, recSessionDelete, recSession)
	case memdb.KindAggregate:
		typ = pick(c.Delete, recAggregateDelete, recAggregate)
	case memdb.KindLost:
		typ = pick(c.Delete, recLostDelete, recLost)
	case memdb.KindAudit:
		if c.Delete { // the store prunes by watermark, never by deletion
			return buf, fmt.Errorf("unexpected audit deletion %d", c.Audit.ID)
		}
		typ = recAudit
	case memdb.KindCounter:
		return appendCounter(buf, c.Counter, c.Value), nil
	default:
		return buf, fmt.Errorf("unknown change kind %d", c.Kind)
	}
	buf, start := beginRecord(buf, typ)
	switch c.Kind {
	case memdb.KindLock:
		buf = codec.EncodeLock(buf, c.Lock)
	case memdb.KindSession:
		buf = codec.EncodeSession(buf, c.Session)
	case memdb.KindAggregate:
		buf = codec.EncodeAggregate(buf, c.Aggregate)
	case memdb.KindLost:
		buf = codec.EncodeLost(buf, c.Lost)
	case memdb.KindAudit:
		buf = codec.EncodeAudit(buf, c.Audit)
	}
	return endRecord(buf, start), nil
}

func appendCounter(buf []byte, c memdb.Counter, v uint64) []byte {
	buf, start := beginRecord(buf, recCounter)
	buf = binary.AppendUvarint(append(buf, byte(c)), v)
	return endRecord(buf, start)
}

func appendUvarintRecord(buf []byte, typ byte, v uint64) []byte {
	buf, start := beginRecord(buf, typ)
	return endRecord(binary.AppendUvarint(buf, v), start)
}

func pick(del bool, ifDelete, ifPut byte) byte {
	if del {
		return ifDelete
	}
	return ifPut
}

// eachRecord calls fn with every record of a frame's body, until fn
// fails.
func eachRecord(body []byte, fn func(typ byte, payload []byte) error) error {
	for len(body) > 0 {
		if len(body) < recordLen {
			return errCorrupt
		}
		n := binary.LittleEndian.Uint32(body[1:])
		if uint64(n) > uint64(len(body)-recordLen) {
			return errCorrupt
		}
		if err := fn(body[0], body[recordLen:recordLen+int(n)]); err != nil {
			return err
		}
		body = body[recordLen+int(n):]
	}
	return nil
}

// uvarintPayload reads a payload that is one uvarint.
func uvarintPayload(p []byte) (uint64, error) {
	v, n := binary.Uvarint(p)
	if n <= 0 || n != len(p) {
		return 0, errCorrupt
	}
	return v, nil
}

// auditID reads an audit record's ID without decoding the entry.
func auditID(p []byte) (uint64, error) {
	if len(p) < 2 || p[0] != codec.Version {
		return 0, errCorrupt
	}
	v, n := binary.Uvarint(p[1:])
	if n <= 0 {
		return 0, errCorrupt
	}
	return v, nil
}

// counterPayload reads a counter record.
func counterPayload(p []byte) (memdb.Counter, uint64, error) {
	if len(p) < 2 {
		return 0, 0, errCorrupt
	}
	v, err := uvarintPayload(p[1:])
	return memdb.Counter(p[0]), v, err
}
