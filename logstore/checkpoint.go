package logstore

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/holdfast/holdfast/internal/codec"
	"github.com/holdfast/holdfast/internal/memdb"
	"github.com/holdfast/holdfast/store"
)

// A checkpoint is every record but the audit log as of a point between two
// groups, so that open reads it and only the log after it, and the log
// segments before it can go. It is written in the background from a
// memdb.Snapshot, under a temporary name, fsync'd, then renamed, and the
// directory fsync'd: a crash leaves either the previous checkpoint or the
// new one, whole. Segments are removed only after that.

const checkpointPrefix = "checkpoint-"

// checkpointFrame is the size at which a checkpoint's records are cut
// into a frame.
const checkpointFrame = 1 << 20

func checkpointName(seq uint64) string { return fmt.Sprintf("%s%016x", checkpointPrefix, seq) }

// errStopped aborts a checkpoint when the store closes.
var errStopped = errors.New("store closing")

// checkpoint writes a checkpoint of the current state, then removes the
// segments and checkpoints it makes useless. It gives up once stop is
// closed.
func (s *Store) checkpoint(stop <-chan struct{}) error {
	start := time.Now()
	seq, pruned, size, err := s.saveCheckpoint(stop)
	if err != nil {
		return err
	}
	if err := s.dropCovered(seq, pruned); err != nil {
		return err
	}
	s.log.Info("logstore: checkpoint written", slog.Uint64("seq", seq), slog.Int64("bytes", size), slog.Duration("took", time.Since(start)))
	return nil
}

// saveCheckpoint writes a checkpoint of the current state, durably, and
// returns the first group it does not hold, the prune watermark it holds
// and its size.
func (s *Store) saveCheckpoint(stop <-chan struct{}) (seq, pruned uint64, size int64, err error) {
	var wait *group
	snap := s.mem.Snapshot(func() {
		// Between two commits: every group before the filling one is in
		// the snapshot; the filling one may hold commits that are and
		// commits that will not be, and is replayed over it (replaying a
		// record's final state twice is harmless).
		s.mu.Lock()
		seq, wait = s.filling.seq, s.strict
		s.mu.Unlock()
		pruned = s.prunedThrough
	})
	size, err = s.writeCheckpoint(snap, seq, pruned, wait, stop)
	if err == nil {
		s.lastCheckpoint.Store(size)
	}
	return seq, pruned, size, err
}

// writeCheckpoint writes snap as the checkpoint that precedes group seq,
// once the state it holds is durable in the log (wait), so that it never
// holds a write the log could still lose. Lazy writes (store.Toucher) need
// not be: losing them is allowed, keeping them too.
func (s *Store) writeCheckpoint(snap *memdb.Snapshot, seq, pruned uint64, wait *group, stop <-chan struct{}) (int64, error) {
	tmp := filepath.Join(s.dir, checkpointName(seq)+".tmp")
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return 0, err
	}
	w := &checkpointWriter{f: f, stop: stop, buf: newFrame(make([]byte, 0, checkpointFrame+64<<10))}
	_, w.err = f.Write(header{magic: checkpointMagic, firstSeq: seq, firstAudit: pruned}.encode())
	w.size = headerLen
	w.write(snap)
	if w.err == nil {
		w.err = fdatasync(f)
	}
	if err := f.Close(); w.err == nil {
		w.err = err
	}
	if w.err == nil && wait != nil {
		// Not bounded by the stall watch: a checkpoint may wait out a
		// stall, which callers must not.
		<-wait.durable
		w.err = wait.err
	}
	if w.err == nil {
		w.err = os.Rename(tmp, filepath.Join(s.dir, checkpointName(seq)))
	}
	if w.err == nil {
		w.err = syncDir(s.dir)
	}
	if w.err != nil {
		os.Remove(tmp)
		return 0, fmt.Errorf("checkpoint %d: %w", seq, w.err)
	}
	return w.size, nil
}

// checkpointWriter writes records in frames of about checkpointFrame
// bytes; the first error sticks.
type checkpointWriter struct {
	f     *os.File
	stop  <-chan struct{}
	buf   []byte
	frame uint64
	size  int64
	err   error
}

// write writes every record of snap: sessions first, then aggregates and
// counters, then locks and lost records, and the end.
func (w *checkpointWriter) write(snap *memdb.Snapshot) {
	snap.Sessions(func(v *store.Session) bool {
		buf, start := beginRecord(w.buf, recSession)
		return w.add(endRecord(codec.EncodeSession(buf, v), start))
	})
	snap.Aggregates(func(v *store.Aggregate) bool {
		buf, start := beginRecord(w.buf, recAggregate)
		return w.add(endRecord(codec.EncodeAggregate(buf, v), start))
	})
	w.add(appendCounter(w.buf, memdb.CounterToken, snap.Token))
	w.add(appendCounter(w.buf, memdb.CounterAudit, snap.AuditID))
	snap.Locks(func(v *store.Lock) bool {
		buf, start := beginRecord(w.buf, recLock)
		return w.add(endRecord(codec.EncodeLock(buf, v), start))
	})
	snap.Lost(func(v *store.Lost) bool {
		buf, start := beginRecord(w.buf, recLost)
		return w.add(endRecord(codec.EncodeLost(buf, v), start))
	})
	buf, start := beginRecord(w.buf, recEnd)
	w.buf = endRecord(buf, start)
	w.flush()
}

// add takes buf, the frame with one more record, and writes the frame out
// once it is full; false stops the walk after an error.
func (w *checkpointWriter) add(buf []byte) bool {
	w.buf = buf
	if len(w.buf) >= checkpointFrame {
		w.flush()
	}
	return w.err == nil
}

func (w *checkpointWriter) flush() {
	if w.err != nil {
		return
	}
	select {
	case <-w.stop:
		w.err = errStopped
		return
	default:
	}
	w.frame++
	sealFrame(w.buf, w.frame)
	_, w.err = w.f.Write(w.buf)
	w.size += int64(len(w.buf))
	w.buf = newFrame(w.buf)
}

// dropCovered removes what the checkpoint before group seq makes useless:
// older checkpoints, and the log segments that hold only groups before
// seq and only audit entries up to pruned.
func (s *Store) dropCovered(seq, pruned uint64) error {
	names, err := filepath.Glob(filepath.Join(s.dir, checkpointPrefix+"*"))
	if err != nil {
		return err
	}
	for _, name := range names {
		if old, ok := checkpointSeq(name); ok && old < seq {
			if err := os.Remove(name); err != nil {
				return err
			}
		}
	}
	s.segMu.Lock()
	n := 0
	for n+1 < len(s.segs) && s.segs[n+1].firstSeq <= seq && s.segs[n+1].firstAudit-1 <= pruned {
		n++
	}
	drop := slices.Clone(s.segs[:n])
	s.segs = slices.Delete(s.segs, 0, n)
	s.segMu.Unlock()
	for _, seg := range drop {
		if err := os.Remove(seg.path); err != nil {
			return err
		}
	}
	return syncDir(s.dir)
}

// checkpointSeq parses a checkpoint's file name.
func checkpointSeq(path string) (uint64, bool) {
	name := filepath.Base(path)
	if !strings.HasPrefix(name, checkpointPrefix) || strings.HasSuffix(name, ".tmp") {
		return 0, false
	}
	seq, err := strconv.ParseUint(strings.TrimPrefix(name, checkpointPrefix), 16, 64)
	return seq, err == nil
}

// loadCheckpoint loads the newest checkpoint in the directory, if there is
// one, and returns the first group it does not hold and the prune
// watermark it holds. Locks and lost records, nearly all of them, are
// decoded in place from the read buffer and handed to a memdb.Loader,
// which copies what it keeps and builds the lock indexes on goroutines of
// its own while the next records are decoded.
func (s *Store) loadCheckpoint() (seq, pruned uint64, err error) {
	names, err := filepath.Glob(filepath.Join(s.dir, checkpointPrefix+"*"))
	if err != nil {
		return 0, 0, err
	}
	var path string
	for _, name := range names {
		if n, ok := checkpointSeq(name); ok && (path == "" || n > seq) {
			seq, path = n, name
		}
	}
	if path == "" {
		return 0, 0, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return 0, 0, err
	}
	s.lastCheckpoint.Store(info.Size())
	r := bufio.NewReaderSize(f, 1<<20)
	b := make([]byte, headerLen)
	if _, err := io.ReadFull(r, b); err != nil {
		return 0, 0, fmt.Errorf("%s: %w", path, err)
	}
	h, err := decodeHeader(b, checkpointMagic)
	if err != nil {
		return 0, 0, fmt.Errorf("%s: %w", path, err)
	}
	if h.firstSeq != seq {
		return 0, 0, fmt.Errorf("%s holds the state before group %d: %w", path, h.firstSeq, errCorrupt)
	}
	ld := s.mem.Load()
	defer ld.Close()
	var (
		l     store.Lock
		lost  store.Lost
		ended bool
	)
	load := func(typ byte, p []byte) error {
		switch typ {
		case recLock:
			if err := codec.DecodeLockBorrowed(p, &l); err != nil {
				return err
			}
			ld.Lock(&l)
			return nil
		case recLost:
			if err := codec.DecodeLostBorrowed(p, &lost); err != nil {
				return err
			}
			ld.Lost(&lost)
			return nil
		case recEnd:
			ended = true
			return nil
		case recLockDelete, recSessionDelete, recAggregateDelete, recLostDelete, recAudit, recPruned:
			return fmt.Errorf("record type %d in a checkpoint: %w", typ, errCorrupt)
		}
		return s.restore(typ, p)
	}
	frame := make([]byte, 0, checkpointFrame+64<<10)
	for n := uint64(1); !ended; n++ {
		if frame, err = readFrame(r, frame); err != nil {
			return 0, 0, fmt.Errorf("%s: frame %d: %w", path, n, err)
		}
		fseq, body, _, ok := parseFrame(frame)
		if !ok || fseq != n {
			return 0, 0, fmt.Errorf("%s: frame %d: %w", path, n, errCorrupt)
		}
		if err := eachRecord(body, load); err != nil {
			return 0, 0, fmt.Errorf("%s: frame %d: %w", path, n, err)
		}
	}
	return seq, h.firstAudit, nil
}

// readFrame reads one whole frame from r into buf.
func readFrame(r io.Reader, buf []byte) ([]byte, error) {
	buf = slices.Grow(buf[:0], frameLen)[:frameLen]
	if _, err := io.ReadFull(r, buf); err != nil {
		return buf, err
	}
	size := binary.LittleEndian.Uint32(buf)
	if size > maxFrame {
		return buf, errCorrupt
	}
	buf = slices.Grow(buf, int(size))[:frameLen+int(size)]
	_, err := io.ReadFull(r, buf[frameLen:])
	return buf, err
}
