package logstore

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/holdfast/holdfast/internal/codec"
	"github.com/holdfast/holdfast/internal/memdb"
	"github.com/holdfast/holdfast/store"
)

// segment is one file of the log.
type segment struct {
	path       string
	firstSeq   uint64
	firstAudit uint64
	// size is how many bytes of whole frames the file holds: readers read
	// no further, and, like every reader, answer only once what they read
	// is durable. Only the syncer writing moves it, and atomically, so that
	// a commit never waits for an audit listing reading the file.
	size atomic.Int64

	// marks are starts of frames of the segment, as it is written: the
	// first frame at least tuning.markBytes past the last mark each time
	// (so a stretch between marks is that much and at most one frame
	// more), each with the next audit ID there:
	// the entries before a mark have lower IDs, those from it on that ID
	// or higher. A walk of the audit log starts at the last mark at or
	// before its cursor, and newest first reads one stretch between marks
	// at a time, so that it need not read the segment from its start.
	// Each mark has the names of the entries of its stretch, so that a
	// filtered listing can skip the stretch. Open marks the segments it
	// replays as it reads them; those before the last checkpoint, which
	// it does not read, are marked by the first walk that reads them
	// (markSegment).
	marksMu sync.Mutex
	marks   []mark
}

// mark is a frame's offset in its segment, the next audit ID there, and
// the names of the entries from there to the next mark.
type mark struct {
	off   int64
	audit uint64
	names *names
}

// mark notes the frame at off (about to be written, or replayed), if the
// last mark is at least every bytes before it; nextAudit is the next audit
// ID there, and held the names of the frame's entries.
func (seg *segment) mark(off int64, nextAudit uint64, every int64, held []name) {
	seg.marksMu.Lock()
	defer seg.marksMu.Unlock()
	seg.marks = appendMark(seg.marks, off, nextAudit, every, held)
}

// appendMark adds the frame at off to marks, as segment.mark does.
func appendMark(marks []mark, off int64, nextAudit uint64, every int64, held []name) []mark {
	if n := len(marks); n == 0 || off-marks[n-1].off >= every {
		marks = append(marks, mark{off: off, audit: nextAudit, names: new(names)})
	}
	last := marks[len(marks)-1].names
	for _, h := range held {
		last.add(h)
	}
	return marks
}

// stretches splits the segment's first size bytes at its marks, in order:
// each stretch is a run of whole frames from its mark, the first from the
// segment's first frame (with audit 0 and no names when unknown). The
// last mark's stretch may still grow, and its names with it: they are
// copied, with those of every frame written so far.
func (seg *segment) stretches(size int64) []mark {
	seg.marksMu.Lock()
	defer seg.marksMu.Unlock()
	out := []mark{{off: headerLen}}
	for i, m := range seg.marks {
		if m.off >= size {
			break
		}
		if i == len(seg.marks)-1 && m.names != nil {
			held := *m.names
			m.names = &held
		}
		if m.off == headerLen {
			out[0] = m
			continue
		}
		out = append(out, m)
	}
	return out
}

// marker makes the marks of a segment that has none from its frames, read
// in order, as its writer made them: replay and markSegment read such
// segments.
type marker struct {
	seg       *segment
	marks     []mark
	nextAudit uint64
	every     int64
	held      []name
	entry     store.AuditEntry // decoded into, reused
}

func newMarker(seg *segment, every int64) *marker {
	return &marker{seg: seg, nextAudit: seg.firstAudit, every: every}
}

// frame notes the frame at off, whose body is body.
func (mk *marker) frame(off int64, body []byte) error {
	at := mk.nextAudit
	mk.held = mk.held[:0]
	_, err := auditIn(body, func(id uint64, p []byte) (bool, error) {
		mk.nextAudit = max(mk.nextAudit, id+1)
		if err := codec.DecodeAuditBorrowed(p, &mk.entry); err != nil {
			return false, err
		}
		mk.held = auditNames(mk.held, &mk.entry)
		return true, nil
	})
	if err != nil {
		return err
	}
	mk.marks = appendMark(mk.marks, off, at, mk.every, mk.held)
	return nil
}

// install gives the segment the marks made, unless it has some already
// (another walk marked it meanwhile).
func (mk *marker) install() {
	mk.seg.marksMu.Lock()
	defer mk.seg.marksMu.Unlock()
	if len(mk.seg.marks) == 0 {
		mk.seg.marks = mk.marks
	}
}

// marked reports whether the segment has its marks.
func (seg *segment) marked() bool {
	seg.marksMu.Lock()
	defer seg.marksMu.Unlock()
	return len(seg.marks) > 0
}

func newSegment(path string, firstSeq, firstAudit uint64, size int64) *segment {
	seg := &segment{path: path, firstSeq: firstSeq, firstAudit: firstAudit}
	seg.size.Store(size)
	return seg
}

func segmentName(seq uint64) string { return fmt.Sprintf("%016x.log", seq) }

// createSegment makes an empty segment under its name.
func createSegment(dir string, firstSeq, firstAudit uint64) (*segment, *os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, segmentName(firstSeq)), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, nil, err
	}
	seg, err := installSegment(dir, f, firstSeq, firstAudit)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return seg, f, nil
}

// installSegment writes a segment's header at the start of f and makes it
// durable under the segment's name, so that a group written to it
// survives a crash.
func installSegment(dir string, f *os.File, firstSeq, firstAudit uint64) (*segment, error) {
	path := filepath.Join(dir, segmentName(firstSeq))
	h := header{magic: segmentMagic, firstSeq: firstSeq, firstAudit: firstAudit}
	if _, err := f.WriteAt(h.encode(), 0); err != nil {
		return nil, err
	}
	if err := fdatasync(f); err != nil {
		return nil, err
	}
	if f.Name() != path {
		if err := os.Rename(f.Name(), path); err != nil {
			return nil, err
		}
	}
	if err := syncDir(dir); err != nil {
		return nil, err
	}
	return newSegment(path, firstSeq, firstAudit, headerLen), nil
}

// prepareSegment makes a file of size zero bytes for a future segment.
// Writing over blocks a file already has leaves fdatasync only the data to
// flush, where an append also changes the file's size (and ext4 commits
// its journal for it): this halved the fsync's latency on this project's
// machine (docs/STORAGE.md). The zeros read as the end of the log.
func prepareSegment(dir string, size int64) (*os.File, error) {
	f, err := os.CreateTemp(dir, "segment-*.tmp")
	if err != nil {
		return nil, err
	}
	zeros := make([]byte, 1<<20)
	for off := int64(0); off < size && err == nil; off += int64(len(zeros)) {
		_, err = f.WriteAt(zeros[:min(int64(len(zeros)), size-off)], off)
	}
	if err == nil {
		err = fdatasync(f)
	}
	if err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	return f, nil
}

// listSegments opens the headers of the log's segments, in log order. A
// last segment whose header is torn (a crash while it was created, before
// any group went into it) is removed.
func listSegments(dir string) ([]*segment, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		return nil, err
	}
	slices.Sort(names) // fixed-width hex: name order is seq order
	var segs []*segment
	for i, path := range names {
		if _, err := strconv.ParseUint(strings.TrimSuffix(filepath.Base(path), ".log"), 16, 64); err != nil {
			continue // not ours
		}
		seg, err := readSegmentHeader(path)
		if err != nil && i == len(names)-1 && errors.Is(err, errCorrupt) && unwritten(path) {
			if err := os.Remove(path); err != nil {
				return nil, err
			}
			break
		}
		if err != nil {
			return nil, fmt.Errorf("segment %s: %w", filepath.Base(path), err)
		}
		segs = append(segs, seg)
	}
	return segs, nil
}

// unwritten reports whether a segment whose header does not read holds
// nothing but that header: the header is fsync'd before the segment gets
// its name, so a crash can leave it short or zero, never followed by
// groups. A damaged header in front of groups is damage, not a crash.
func unwritten(path string) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	return len(b) <= headerLen || !slices.ContainsFunc(b, func(c byte) bool { return c != 0 })
}

func readSegmentHeader(path string) (*segment, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, headerLen)
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, errCorrupt
	}
	h, err := decodeHeader(b, segmentMagic)
	if err != nil {
		return nil, err
	}
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	return newSegment(path, h.firstSeq, h.firstAudit, info.Size()), nil
}

// read returns the segment's durable bytes.
func (seg *segment) read() ([]byte, error) {
	f, err := os.Open(seg.path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, seg.size.Load())
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, fmt.Errorf("segment %s: %w", filepath.Base(seg.path), err)
	}
	return b, nil
}

// segmentFile reads the frames of a segment through a buffer, so that a
// reader holds one frame in memory, not the segment.
type segmentFile struct {
	seg *segment
	f   *os.File
	r   *bufio.Reader // reused by each frames
	// size is how many bytes of whole frames the segment held when opened:
	// written, not all durable yet. A reader bounds what it lists by what
	// it knows durable (an audit ID).
	size int64
	buf  []byte
	// section and at are the readers of frames and frameAt, kept so that
	// reading a frame allocates nothing.
	section, at io.SectionReader
	// A walk newest first (stretchBackward) keeps these from one stretch
	// to the next: the offsets of the frames it reads again, the entries
	// of one of them, and the entry it decodes in place.
	offs  []int64
	found [][]byte
	entry store.AuditEntry
}

func (seg *segment) open() (*segmentFile, error) {
	f, err := os.Open(seg.path)
	if err != nil {
		return nil, err
	}
	return &segmentFile{seg: seg, f: f, size: seg.size.Load()}, nil
}

func (sf *segmentFile) Close() error { return sf.f.Close() }

// stretches are the segment's stretches within what the file held when
// opened.
func (sf *segmentFile) stretches() []mark { return sf.seg.stretches(sf.size) }

// frames calls fn with the offset and body of each frame from offset
// from, which starts one, up to offset to, in order, until fn returns
// false or fails. body is valid only during the call. Bytes before to that
// are not whole frames are errCorrupt.
func (sf *segmentFile) frames(from, to int64, fn func(off int64, body []byte) (bool, error)) error {
	sf.section = *io.NewSectionReader(sf.f, from, to-from)
	if sf.r == nil {
		sf.r = bufio.NewReaderSize(&sf.section, 64<<10)
	} else {
		sf.r.Reset(&sf.section)
	}
	for off := from; off < to; {
		body, n, err := sf.readFrame(sf.r, to-off)
		if err != nil {
			return err
		}
		if more, err := fn(off, body); err != nil || !more {
			return err
		}
		off += int64(n)
	}
	return nil
}

// frameAt returns the body of the frame at off, valid until the next read.
func (sf *segmentFile) frameAt(off int64) ([]byte, error) {
	sf.at = *io.NewSectionReader(sf.f, off, sf.size-off)
	body, _, err := sf.readFrame(&sf.at, sf.size-off)
	return body, err
}

// readFrame reads the next frame from r, at most left bytes long, into
// the file's buffer, and returns its body and length.
func (sf *segmentFile) readFrame(r io.Reader, left int64) (body []byte, n int, err error) {
	sf.buf = slices.Grow(sf.buf[:0], frameLen)[:frameLen]
	if _, err := io.ReadFull(r, sf.buf); err != nil {
		return nil, 0, shortRead(err)
	}
	size := int64(binary.LittleEndian.Uint32(sf.buf))
	if size > maxFrame || frameLen+size > left {
		return nil, 0, errCorrupt
	}
	sf.buf = slices.Grow(sf.buf, int(size))[:frameLen+size]
	if _, err := io.ReadFull(r, sf.buf[frameLen:]); err != nil {
		return nil, 0, shortRead(err)
	}
	_, body, n, ok := parseFrame(sf.buf)
	if !ok {
		return nil, 0, errCorrupt
	}
	return body, n, nil
}

// shortRead makes a file that ends before its durable size errCorrupt.
func shortRead(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errCorrupt
	}
	return err
}

// frames calls fn with the offset, seq and body of each frame of a
// segment's bytes b, and returns where the whole frames end: a shorter or
// damaged frame ends them.
func frames(b []byte, fn func(off int, seq uint64, body []byte) error) (end int, err error) {
	end = headerLen
	for end < len(b) {
		seq, body, n, ok := parseFrame(b[end:])
		if !ok {
			break
		}
		if err := fn(end, seq, body); err != nil {
			return end, err
		}
		end += n
	}
	return end, nil
}

// replay applies the groups of the log from seq start on, in order; an
// earlier group is in the checkpoint already. Only the last segment may end
// in a torn group (the crash interrupted its write): it is cut back to
// the last whole group. It returns the seq of the next group.
func (s *Store) replay(segs []*segment, start uint64) (next uint64, err error) {
	first := 0
	for i, seg := range segs {
		if seg.firstSeq <= start {
			first = i
		}
	}
	if len(segs) > 0 && segs[first].firstSeq > start {
		return 0, fmt.Errorf("the log starts at group %d, after the checkpoint's %d: %w", segs[first].firstSeq, start, errCorrupt)
	}
	next = start
	for i := first; i < len(segs); i++ {
		seg := segs[i]
		if i > first && seg.firstSeq != next {
			return 0, fmt.Errorf("segment %s starts at group %d, want %d: %w", filepath.Base(seg.path), seg.firstSeq, next, errCorrupt)
		}
		b, err := seg.read()
		if err != nil {
			return 0, err
		}
		expect := seg.firstSeq
		mk := newMarker(seg, s.tune.markBytes)
		end, err := frames(b, func(off int, seq uint64, body []byte) error {
			if seq != expect {
				return fmt.Errorf("group %d where %d belongs: %w", seq, expect, errCorrupt)
			}
			expect++
			if err := mk.frame(int64(off), body); err != nil {
				return err
			}
			if seq < start {
				return nil // in the checkpoint already
			}
			return eachRecord(body, s.restore)
		})
		if err != nil {
			return 0, fmt.Errorf("segment %s: %w", filepath.Base(seg.path), err)
		}
		mk.install()
		if end < len(b) && i < len(segs)-1 {
			return 0, fmt.Errorf("segment %s is damaged at byte %d: %w", filepath.Base(seg.path), end, errCorrupt)
		}
		if i == len(segs)-1 {
			// Its end: a torn group, or the zeros of a prepared segment,
			// is cut off. And it is synced even when whole: the process
			// before may have died between writing its last group and
			// syncing it, and what is answered from now on must not rest
			// on a group only the page cache holds.
			if err := truncate(seg.path, int64(end)); err != nil {
				return 0, err
			}
			if slices.ContainsFunc(b[end:], func(c byte) bool { return c != 0 }) {
				s.log.Warn("logstore: cut a torn group off the log", "segment", seg.path, "at", end, "dropped_bytes", len(b)-end)
			}
		}
		seg.size.Store(int64(end))
		next = max(next, expect)
	}
	return next, nil
}

func truncate(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	err = f.Truncate(size)
	if err == nil {
		err = fdatasync(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// restore applies one record of the log to memory. The records of the log
// tail are few next to a checkpoint's, so each is copied once and decoded
// the simple way.
func (s *Store) restore(typ byte, p []byte) error {
	c := memdb.Change{Delete: typ == recLockDelete || typ == recSessionDelete || typ == recAggregateDelete || typ == recLostDelete}
	var err error
	switch typ {
	case recLock, recLockDelete:
		c.Kind, c.Lock = memdb.KindLock, new(store.Lock)
		err = codec.DecodeLockBorrowed(bytes.Clone(p), c.Lock)
	case recSession, recSessionDelete:
		c.Kind = memdb.KindSession
		c.Session, err = codec.DecodeSession(p)
	case recAggregate, recAggregateDelete:
		c.Kind = memdb.KindAggregate
		c.Aggregate, err = codec.DecodeAggregate(p)
	case recLost, recLostDelete:
		c.Kind, c.Lost = memdb.KindLost, new(store.Lost)
		err = codec.DecodeLostBorrowed(bytes.Clone(p), c.Lost)
	case recAudit:
		var id uint64
		id, err = auditID(p)
		c.Kind, c.Audit = memdb.KindAudit, &store.AuditEntry{ID: id}
	case recCounter:
		c.Kind = memdb.KindCounter
		c.Counter, c.Value, err = counterPayload(p)
	case recPruned:
		var id uint64
		id, err = uvarintPayload(p)
		s.prunedThrough = max(s.prunedThrough, id)
		return err
	default:
		return fmt.Errorf("record type %d: %w", typ, errCorrupt)
	}
	if err != nil {
		return fmt.Errorf("record type %d: %w", typ, err)
	}
	s.mem.Restore(c)
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
