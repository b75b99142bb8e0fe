// Package codec encodes holdfast's records (locks, sessions, aggregates,
// lost locks, audit entries) for the embedded durable stores: each value
// starts with a version byte and holds the whole record, strings
// length-prefixed, numbers as varints, so that a store can load a record
// without parsing anything else.
package codec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
	"unsafe"

	"github.com/holdfast/holdfast/store"
)

// Version is the encoding of every value written by this version; the
// first byte of every value.
const Version = 1

// AppendString appends s with its length in front.
func AppendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// appendTime writes the zero time as one byte, so it reads back as zero.
func appendTime(dst []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(dst, 0)
	}
	dst = append(dst, 1)
	dst = binary.AppendVarint(dst, t.Unix())
	return binary.AppendUvarint(dst, uint64(t.Nanosecond()))
}

func appendBool(dst []byte, b bool) []byte {
	if b {
		return append(dst, 1)
	}
	return append(dst, 0)
}

func appendLockFields(dst []byte, l *store.Lock) []byte {
	dst = AppendString(dst, l.Key)
	dst = AppendString(dst, l.Session)
	dst = AppendString(dst, l.User)
	dst = AppendString(dst, l.Name)
	dst = appendBool(dst, l.Shared)
	dst = binary.AppendUvarint(dst, l.Token)
	dst = appendTime(dst, l.AcquiredAt)
	dst = appendTime(dst, l.ExpiresAt)
	return AppendString(dst, l.Note)
}

func EncodeLock(dst []byte, l *store.Lock) []byte {
	return appendLockFields(append(dst, Version), l)
}

func EncodeSession(dst []byte, s *store.Session) []byte {
	dst = append(dst, Version)
	dst = AppendString(dst, s.ID)
	dst = AppendString(dst, s.User)
	dst = AppendString(dst, s.Name)
	dst = appendTime(dst, s.LastSeen)
	dst = binary.AppendVarint(dst, int64(s.IdleTimeout))
	dst = appendTime(dst, s.EndedAt)
	return AppendString(dst, s.EndReason)
}

func EncodeAggregate(dst []byte, a *store.Aggregate) []byte {
	dst = append(dst, Version)
	dst = AppendString(dst, a.Member)
	return AppendString(dst, a.Root)
}

func EncodeLost(dst []byte, l *store.Lost) []byte {
	dst = appendLockFields(append(dst, Version), &l.Lock)
	dst = AppendString(dst, l.Reason)
	dst = AppendString(dst, l.Actor)
	dst = AppendString(dst, l.ForceReason)
	dst = appendTime(dst, l.At)
	return appendBool(dst, l.Reported)
}

func EncodeAudit(dst []byte, e *store.AuditEntry) []byte {
	dst = append(dst, Version)
	dst = binary.AppendUvarint(dst, e.ID)
	dst = appendTime(dst, e.At)
	dst = AppendString(dst, e.Event)
	dst = appendLockFields(dst, &e.Lock)
	dst = AppendString(dst, e.Actor)
	return AppendString(dst, e.Reason)
}

// ErrCorrupt reports a value that does not decode.
var ErrCorrupt = errors.New("corrupt record")

// decoder reads a value; the first error sticks and later reads return
// zero values, so a decode function checks once at the end. It copies the
// value into one string and slices every field out of it: one allocation
// per record instead of one per field, which is most of the load time.
type decoder struct {
	s   string
	err error
}

func newDecoder(b []byte) *decoder {
	d := &decoder{s: string(b)}
	d.version()
	return d
}

// version reads the record's version byte and refuses another version.
func (d *decoder) version() {
	if v := d.byte(); d.err == nil && v != Version {
		d.err = fmt.Errorf("record version %d, this build reads %d", v, Version)
	}
}

func (d *decoder) fail() {
	if d.err == nil {
		d.err = ErrCorrupt
	}
	d.s = ""
}

func (d *decoder) byte() byte {
	if len(d.s) == 0 {
		d.fail()
		return 0
	}
	v := d.s[0]
	d.s = d.s[1:]
	return v
}

func (d *decoder) uvarint() uint64 {
	var v uint64
	for i := 0; i < len(d.s) && i < binary.MaxVarintLen64; i++ {
		c := d.s[i]
		if i == binary.MaxVarintLen64-1 && c > 1 {
			break // overflows 64 bits
		}
		v |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			d.s = d.s[i+1:]
			return v
		}
	}
	d.fail()
	return 0
}

func (d *decoder) varint() int64 {
	u := d.uvarint()
	v := int64(u >> 1)
	if u&1 != 0 {
		v = ^v
	}
	return v
}

func (d *decoder) string() string {
	n := d.uvarint()
	if n > uint64(len(d.s)) {
		d.fail()
		return ""
	}
	v := d.s[:n]
	d.s = d.s[n:]
	return v
}

func (d *decoder) time() time.Time {
	if d.byte() == 0 {
		return time.Time{}
	}
	sec := d.varint()
	nsec := d.uvarint()
	if nsec >= uint64(time.Second) {
		d.fail()
		return time.Time{}
	}
	return time.Unix(sec, int64(nsec)).UTC()
}

func (d *decoder) bool() bool { return d.byte() != 0 }

func (d *decoder) lockFields(l *store.Lock) {
	l.Key = d.string()
	l.Session = d.string()
	l.User = d.string()
	l.Name = d.string()
	l.Shared = d.bool()
	l.Token = d.uvarint()
	l.AcquiredAt = d.time()
	l.ExpiresAt = d.time()
	l.Note = d.string()
}

// done reports the sticky error, or trailing bytes as corruption.
func (d *decoder) done() error {
	if d.err == nil && len(d.s) != 0 {
		d.err = ErrCorrupt
	}
	return d.err
}

// DecodeLockBorrowed decodes a lock into l without copying: l's strings
// point into b and are valid only as long as b is unchanged. The caller
// copies what it keeps; this saves the loading of a million locks a
// million allocations.
func DecodeLockBorrowed(b []byte, l *store.Lock) error {
	d := decoder{s: unsafe.String(unsafe.SliceData(b), len(b))}
	d.version()
	d.lockFields(l)
	return d.done()
}

// DecodeAuditBorrowed decodes an audit entry into e in place, like
// DecodeLockBorrowed: the log's replay reads every entry for its names.
func DecodeAuditBorrowed(b []byte, e *store.AuditEntry) error {
	d := decoder{s: unsafe.String(unsafe.SliceData(b), len(b))}
	d.version()
	d.audit(e)
	return d.done()
}

// OwnAudit gives e, decoded in place by DecodeAuditBorrowed, strings of
// its own, in one allocation: a walk of the log decodes each entry in
// place and copies only those it keeps.
func OwnAudit(e *store.AuditEntry) {
	fields := [...]*string{&e.Event, &e.Lock.Key, &e.Lock.Session, &e.Lock.User, &e.Lock.Name, &e.Lock.Note, &e.Actor, &e.Reason}
	n := 0
	for _, f := range fields {
		n += len(*f)
	}
	buf := make([]byte, 0, n)
	for _, f := range fields {
		buf = append(buf, *f...)
	}
	all := unsafe.String(unsafe.SliceData(buf), n)
	for _, f := range fields {
		*f, all = all[:len(*f)], all[len(*f):]
	}
}

func (d *decoder) audit(e *store.AuditEntry) {
	e.ID = d.uvarint()
	e.At = d.time()
	e.Event = d.string()
	d.lockFields(&e.Lock)
	e.Actor = d.string()
	e.Reason = d.string()
}

func DecodeSession(b []byte) (*store.Session, error) {
	d := newDecoder(b)
	s := &store.Session{
		ID:   d.string(),
		User: d.string(),
		Name: d.string(),
	}
	s.LastSeen = d.time()
	s.IdleTimeout = time.Duration(d.varint())
	s.EndedAt = d.time()
	s.EndReason = d.string()
	return s, d.done()
}

func DecodeAggregate(b []byte) (*store.Aggregate, error) {
	d := newDecoder(b)
	a := &store.Aggregate{Member: d.string(), Root: d.string()}
	return a, d.done()
}

// DecodeLostBorrowed decodes a lost record into l in place, like
// DecodeLockBorrowed.
func DecodeLostBorrowed(b []byte, l *store.Lost) error {
	d := decoder{s: unsafe.String(unsafe.SliceData(b), len(b))}
	d.version()
	d.lockFields(&l.Lock)
	l.Reason = d.string()
	l.Actor = d.string()
	l.ForceReason = d.string()
	l.At = d.time()
	l.Reported = d.bool()
	return d.done()
}

func DecodeAudit(b []byte) (*store.AuditEntry, error) {
	d := newDecoder(b)
	e := new(store.AuditEntry)
	d.audit(e)
	return e, d.done()
}
