package logstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdfast/holdfast/internal/codec"
	"github.com/holdfast/holdfast/internal/embeddedtest"
	"github.com/holdfast/holdfast/internal/memdb"
	"github.com/holdfast/holdfast/store"
)

// These tests are in the package, to count the audit entries memdb holds.

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// openStore opens the store in dir for the shared tests that look inside it.
func openStore(dir string, now func() time.Time) (store.Store, error) {
	return Open(dir, Config{Now: now, Logger: quietLog})
}

func auditInMemory(s store.Store) int {
	_, _, n := s.(*Store).mem.Size()
	return n
}

func TestAuditLivesOnDiskOnly(t *testing.T) {
	embeddedtest.AuditLivesOnDiskOnly(t, openStore, auditInMemory)
}

func TestPruneAuditOnDisk(t *testing.T) { embeddedtest.PruneAuditOnDisk(t, openStore) }

// The sweep prunes every second: once a prune has found the oldest entry
// it keeps, or there is no entry left, the next ones answer without
// reading the log (here, without the files) until that entry is old
// enough. A listing after the last entry reads nothing either.
func TestPruneAuditSkipsTheLogUntilTheOldestEntryIsDue(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := embeddedtest.Open(openStore).OpenAudit(t, dir)
	embeddedtest.AppendAuditEntries(t, s)
	if n := embeddedtest.PruneAudit(t, s, embeddedtest.AuditT0.Add(90*time.Second), 0); n != 2 {
		t.Fatalf("pruned %d, want 2", n)
	}
	hide := func(suffix, from string) {
		names, _ := filepath.Glob(filepath.Join(dir, "*.log"+from))
		for _, name := range names {
			if err := os.Rename(name, strings.TrimSuffix(name, from)+suffix); err != nil {
				t.Fatal(err)
			}
		}
	}
	hide(".hidden", "")
	for range 3 {
		if n := embeddedtest.PruneAudit(t, s, embeddedtest.AuditT0.Add(2*time.Minute), 0); n != 0 {
			t.Fatalf("pruned %d with nothing due", n)
		}
	}
	// A client following the log asks for what comes after the last entry.
	if got := embeddedtest.ListAudit(t, s, store.AuditQuery{After: 8}); len(got) != 0 {
		t.Fatalf("after the last entry: %v", embeddedtest.IDs(got))
	}
	hide("", ".hidden")
	if n := embeddedtest.PruneAudit(t, s, embeddedtest.AuditT0.Add(time.Hour), 0); n != 6 {
		t.Fatalf("pruned %d, want the 6 left", n)
	}
	hide(".hidden", "")
	if n := embeddedtest.PruneAudit(t, s, embeddedtest.AuditT0.Add(2*time.Hour), 0); n != 0 {
		t.Fatalf("pruned %d from an empty log", n)
	}
	// Nor does one whose cursor is below entries all pruned.
	if got := embeddedtest.ListAudit(t, s, store.AuditQuery{After: 3}); len(got) != 0 {
		t.Fatalf("after 3, every entry pruned: %v", embeddedtest.IDs(got))
	}
	hide("", ".hidden")
}

// The log is cut into segments of a few KiB, so that the listing reads
// several and the commits made while it reads go on into new ones.
func TestAuditListingHoldsUpNoCommit(t *testing.T) {
	embeddedtest.AuditListingHoldsUpNoCommit(t,
		func(dir string, now func() time.Time) (store.Store, error) {
			return open(dir, Config{Now: now, Logger: quietLog}, small)
		},
		func(s store.Store, hook func()) {
			s.(*Store).decodeAudit = func(p []byte, e *store.AuditEntry) error {
				hook()
				return codec.DecodeAuditBorrowed(p, e)
			}
		})
}

// holdWalk makes the first entry the next walk of s's audit log decodes
// wait: reading is closed once it is there, and it goes on once release is
// closed. The walks after it (a prune's, too) do not wait.
func holdWalk(s *Store) (reading, release chan struct{}) {
	reading, release = make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	first.Store(true)
	s.decodeAudit = func(p []byte, e *store.AuditEntry) error {
		if first.CompareAndSwap(true, false) {
			close(reading)
			<-release
		}
		return codec.DecodeAuditBorrowed(p, e)
	}
	return reading, release
}

// A walk of the log lists the segments when it begins and reads them
// without holding segMu. A checkpoint may drop some meanwhile, once every
// entry in them is pruned, and the walk then skips them; a segment whose
// file is missing while it is still listed is an error all the same.
func TestAuditWalkSkipsSegmentsDroppedMeanwhile(t *testing.T) {
	t.Parallel()
	s, _ := smallLog(t)
	before := len(s.segments())
	reading, release := holdWalk(s)
	type listing struct {
		entries []store.AuditEntry
		err     error
	}
	listed := make(chan listing, 1)
	go func() {
		entries, err := s.ListAudit(context.Background(), store.AuditQuery{})
		listed <- listing{entries, err}
	}()
	<-reading // the walk has read the first segment and listed the others
	if n := embeddedtest.PruneAudit(t, s, embeddedtest.AuditT0.Add(150*time.Second), 0); n != 150 {
		close(release)
		t.Fatalf("pruned %d, want 150", n)
	}
	if err := s.checkpoint(nil); err != nil {
		close(release)
		t.Fatal(err)
	}
	if after := len(s.segments()); after >= before {
		close(release)
		t.Fatalf("%d segments after pruning and a checkpoint, %d before", after, before)
	}
	close(release)
	got := <-listed
	if got.err != nil {
		t.Fatalf("a walk across segments dropped meanwhile: %v", got.err)
	}
	ids := embeddedtest.IDs(got.entries)
	if !slices.IsSorted(ids) || len(ids) < 50 || !slices.Equal(ids[len(ids)-50:], idRange(151, 200)) {
		t.Fatalf("a walk across segments dropped meanwhile listed %v, want IDs in order ending with 151 to 200", ids)
	}

	// A listed segment whose file is gone is not one a checkpoint dropped.
	segs := s.segments()
	if err := os.Remove(segs[0].path); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ListAudit(context.Background(), store.AuditQuery{}); err == nil {
		t.Fatalf("listing with %s missing: no error", filepath.Base(segs[0].path))
	}
}

func idRange(from, to uint64) []uint64 {
	var ids []uint64
	for id := from; id <= to; id++ {
		ids = append(ids, id)
	}
	return ids
}

// appendGroups commits groups of 100 audit entries, one group at a time,
// each entry with a reason of reasonBytes, a millisecond apart.
func appendGroups(tb testing.TB, s *Store, groups, reasonBytes int) {
	tb.Helper()
	reason := strings.Repeat("r", reasonBytes)
	for i := range groups {
		err := s.Update(context.Background(), func(tx store.Tx) error {
			for j := range 100 {
				at := embeddedtest.AuditT0.Add(time.Duration(i*100+j) * time.Millisecond)
				if _, err := tx.AppendAudit(store.AuditEntry{At: at, Event: "acquired", Lock: store.Lock{Key: "k"}, Reason: reason}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			tb.Fatal(err)
		}
	}
}

// appendEntry commits e alone.
func appendEntry(tb testing.TB, s *Store, e store.AuditEntry) {
	tb.Helper()
	if err := s.Update(context.Background(), func(tx store.Tx) error {
		_, err := tx.AppendAudit(e)
		return err
	}); err != nil {
		tb.Fatal(err)
	}
}

// openBench opens a store for a benchmark, its clock at AuditT0, and
// closes it when the benchmark ends.
func openBench(b *testing.B, tune tuning) *Store {
	b.Helper()
	s, err := open(b.TempDir(), Config{Now: func() time.Time { return embeddedtest.AuditT0 }, Logger: quietLog}, tune)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// benchListing times ListAudit(q), which must answer want entries.
func benchListing(b *testing.B, s *Store, q store.AuditQuery, want int) {
	b.ReportAllocs()
	for b.Loop() {
		e, err := s.ListAudit(context.Background(), q)
		if err != nil || len(e) != want {
			b.Fatalf("ListAudit(%+v) = %d entries, %v; want %d", q, len(e), err, want)
		}
	}
}

// oneSegment keeps the log of a test of up to 16 MiB in the segment made
// at open. With 16 MiB segments, the next one is prepared in the
// background from 1 MiB written, and the log goes on in it as soon as it
// is ready: on a loaded machine, that was the last of the test's groups,
// and the segment under test held a frame or two.
var oneSegment = func() tuning {
	t := defaultTuning
	t.segmentBytes = 256 << 20
	return t
}()

// A listing reads the log a frame at a time: an event stream opening (the
// newest entry) or a page of entries costs a frame's memory, not the
// segment's, however long the segment (up to 16 MiB), so that many
// listings at once (event streams reconnecting after a restart) do not
// each hold a segment.
func TestAuditListingReadsAFrameAtATime(t *testing.T) {
	s := openTuned(t, t.TempDir(), oneSegment)
	appendGroups(t, s, 100, 1000)
	segs := s.segments()
	last := segs[len(segs)-1]
	size := last.size.Load()
	if size < 4<<20 {
		t.Fatalf("the last segment holds %d bytes, want 4 MiB at least", size)
	}
	for _, q := range []store.AuditQuery{{Newest: true, Limit: 2}, {After: last.firstAudit + 1000, Limit: 2}} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		entries, err := s.ListAudit(context.Background(), q)
		runtime.ReadMemStats(&after)
		if err != nil || len(entries) != 2 {
			t.Fatalf("ListAudit(%+v) = %d entries, %v; want 2", q, len(entries), err)
		}
		if allocated := after.TotalAlloc - before.TotalAlloc; allocated > 1<<20 {
			t.Errorf("ListAudit(%+v) allocated %d bytes from a segment of %d, want a frame's (about 100 KB)", q, allocated, size)
		}
	}
}

// BenchmarkListAuditNewest lists the two newest audit entries, as an event
// stream opening does (the Manager asks one more than the page), from a
// log whose last segment holds about 10 MB: a walk newest first reads the
// segment from its start to find its last frames.
func BenchmarkListAuditNewest(b *testing.B) {
	tune := defaultTuning
	tune.segmentBytes, tune.checkpointBytes = 64<<20, 1<<62
	s := openBench(b, tune)
	appendGroups(b, s, 1000, 100)
	benchListing(b, s, store.AuditQuery{Newest: true, Limit: 2}, 2)
}

// A write that fails while a listing walks the log cuts the log back under
// the walk, which then finds the segment shorter than when it opened it:
// the listing answers with the failure (ErrUnavailable), not as if the log
// were corrupt.
func TestAuditWalkCutBackByAFailedWriteAnswersTheFailure(t *testing.T) {
	t.Parallel()
	// One stretch, without marks to split it, that the walk reads whole.
	tune := defaultTuning
	tune.markBytes = 1 << 40
	s := openTuned(t, t.TempDir(), tune)
	appendGroups(t, s, 2, 1000) // more than the walk's 64 KiB buffer
	var b auditBounds
	if err := s.View(context.Background(), func(store.ReadTx) error { b = s.auditBounds(); return nil }); err != nil {
		t.Fatal(err)
	}

	// A commit without audit entries is written, and its sync held, then
	// failed: the store cuts the log back to before it.
	syncing, fail := make(chan struct{}), make(chan struct{})
	s.syncFile = func(*os.File) error {
		close(syncing)
		<-fail
		return errors.New("input/output error")
	}
	committed := make(chan error, 1)
	go func() {
		committed <- s.Update(context.Background(), func(tx store.Tx) error { return tx.PutLock(store.Lock{Key: "later", Session: "s"}) })
	}()
	<-syncing

	// The walk opens the segment with that commit in it, and waits at its
	// first entry while the failed sync cuts the log back.
	reading, release := holdWalk(s)
	listed := make(chan error, 1)
	go func() {
		_, err := s.listAudit(context.Background(), store.AuditQuery{Key: "k"}, b, true)
		listed <- err
	}()
	<-reading
	close(fail)
	if err := <-committed; !errors.Is(err, store.ErrUnavailable) {
		close(release)
		t.Fatalf("commit whose sync failed = %v, want ErrUnavailable", err)
	}
	close(release)
	if err := <-listed; !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("listing cut short by a failed write = %v, want ErrUnavailable", err)
	}
}

// Listings answer the same wherever the walk starts: from a mark or from
// a segment's first frame, in segments written by this process or replayed
// at open (marked) or before the last checkpoint (not), before and after a
// prune and a checkpoint that drops segments, filtered or not (a filter
// skips stretches by their names). Each answer is checked against the
// entries filtered by hand.
func TestAuditListingsAgreeWithTheEntries(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tune := tuning{segmentBytes: 8 << 10, checkpointBytes: 1 << 62, syncers: defaultTuning.syncers, markBytes: 512}
	s := openTuned(t, dir, tune)
	rng := rand.New(rand.NewPCG(1, 2))
	var all []store.AuditEntry
	for len(all) < 600 {
		err := s.Update(context.Background(), func(tx store.Tx) error {
			if rng.IntN(4) == 0 { // a group without audit entries
				return tx.PutLock(store.Lock{Key: fmt.Sprintf("l/%d", len(all)), Session: "s"})
			}
			for range 1 + rng.IntN(12) {
				e := store.AuditEntry{At: embeddedtest.AuditT0.Add(time.Duration(len(all)) * time.Second), Event: "acquired",
					Lock: store.Lock{Key: fmt.Sprintf("k/%d", rng.IntN(5)), Session: fmt.Sprintf("s-%d", rng.IntN(3)), User: fmt.Sprintf("u-%d", rng.IntN(3))}}
				if rng.IntN(3) == 0 {
					e.Lock.Key += "/x"
				}
				id, err := tx.AppendAudit(e)
				if err != nil {
					return err
				}
				e.ID = id
				all = append(all, e)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	check := func(when string, floor uint64) {
		t.Helper()
		// Every entry both ways, then random pages.
		queries := []store.AuditQuery{{}, {Newest: true}, {Key: "k/1"}, {Newest: true, Key: "k/1"}, {Key: "k"}, {Newest: true, Key: "k/2/x"}}
		for range 300 {
			q := store.AuditQuery{Newest: rng.IntN(2) == 0, Limit: rng.IntN(8)}
			switch rng.IntN(4) {
			case 0:
				q.Key = fmt.Sprintf("k/%d", rng.IntN(6))
			case 1:
				q.Key = fmt.Sprintf("k/%d/x", rng.IntN(6))
			case 2:
				q.Session = fmt.Sprintf("s-%d", rng.IntN(4))
			}
			if rng.IntN(3) == 0 {
				q.User = fmt.Sprintf("u-%d", rng.IntN(4))
			}
			cursor := uint64(rng.IntN(len(all) + 2))
			if q.Newest {
				q.Before = cursor
			} else {
				q.After = cursor
			}
			queries = append(queries, q)
		}
		for _, q := range queries {
			var want []uint64
			for i := range all {
				e := &all[i]
				if q.Newest {
					e = &all[len(all)-1-i]
				}
				if e.ID <= floor || (q.Newest && q.Before != 0 && e.ID >= q.Before) || (!q.Newest && e.ID <= q.After) || !memdb.AuditMatches(q, e) {
					continue
				}
				if want = append(want, e.ID); q.Limit > 0 && len(want) == q.Limit {
					break
				}
			}
			got, err := s.ListAudit(context.Background(), q)
			if err != nil {
				t.Fatalf("%s: ListAudit(%+v): %v", when, q, err)
			}
			if ids := embeddedtest.IDs(got); !slices.Equal(ids, want) && len(ids)+len(want) > 0 {
				t.Fatalf("%s: ListAudit(%+v) = %v, want %v", when, q, ids, want)
			}
		}
	}
	if segs := s.segments(); len(segs) < 4 || len(segs[1].stretches(segs[1].size.Load())) < 4 {
		t.Fatalf("%d segments, the second in %d stretches: want several of each", len(segs), len(segs[1].stretches(segs[1].size.Load())))
	}
	check("marked", 0)
	s.Close()
	s = openTuned(t, dir, tune)
	check("replayed at open, and marked so", 0)
	// Pruned up to two entries before a mark: the walk newest first must
	// not stop at that mark, nor list what is pruned. (Entry ID i is at
	// AuditT0 + i-1 seconds.)
	seg := s.segments()[2]
	st := seg.stretches(seg.size.Load())
	floor := st[len(st)/2].audit - 2
	if n := embeddedtest.PruneAudit(t, s, embeddedtest.AuditT0.Add(time.Duration(floor)*time.Second), 0); n != int(floor) {
		t.Fatalf("pruned %d, want %d", n, floor)
	}
	if err := s.checkpoint(nil); err != nil {
		t.Fatal(err)
	}
	check("pruned and checkpointed", floor)
	s.Close()
	s = openTuned(t, dir, tune)
	check("reopened after the checkpoint: the segments before it unmarked", floor)
}

// A listing of the newest entries, as an event stream opening makes, reads
// only the end of the segment: here it is answered although a frame in
// the middle is damaged, which a listing from the start finds. So in a
// segment this process wrote, and in one it replayed at open.
func TestAuditListingNewestReadsTheEndOnly(t *testing.T) {
	t.Parallel()
	for _, replayed := range []bool{false, true} {
		dir := t.TempDir()
		s := openTuned(t, dir, oneSegment)
		appendGroups(t, s, 40, 1000)
		if replayed {
			s.Close()
			s = openTuned(t, dir, oneSegment) // the log goes on in a new, empty segment
		}
		segs := s.segments()
		seg := segs[len(segs)-1]
		if replayed {
			seg = segs[len(segs)-2]
		}
		if n := len(seg.stretches(seg.size.Load())); n < 40 {
			t.Fatalf("replayed %t: the segment under test is in %d stretches, want its 4 MB in many", replayed, n)
		}
		f, err := os.OpenFile(seg.path, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte("damage"), seg.size.Load()/2); err != nil {
			t.Fatal(err)
		}
		f.Close()
		if got, err := s.ListAudit(context.Background(), store.AuditQuery{Newest: true, Limit: 2}); err != nil || len(got) != 2 {
			t.Fatalf("replayed %t: the two newest entries past a damaged middle: %d, %v", replayed, len(got), err)
		}
		if _, err := s.ListAudit(context.Background(), store.AuditQuery{After: seg.firstAudit}); !errors.Is(err, errCorrupt) {
			t.Fatalf("replayed %t: listing the segment from its start = %v, want it to find the damage", replayed, err)
		}
	}
}

// A listing filtered by key, session or user reads the stretches whose
// names may match only: the console's page of a lock seldom taken lists
// its latest entries without reading the whole log. So in segments
// written by this process, replayed at open, and before the last
// checkpoint (marked by the first listing that reads them).
func TestAuditListingFilteredSkipsStretches(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tune := defaultTuning
	tune.segmentBytes = 512 << 10
	s := openTuned(t, dir, tune)
	const groups, perGroup = 200, 100
	for i := range groups {
		err := s.Update(context.Background(), func(tx store.Tx) error {
			for j := range perGroup {
				n := i*perGroup + j
				l := store.Lock{Key: fmt.Sprintf("hot/%d", n%50), Session: fmt.Sprintf("s-%d", n%50), User: fmt.Sprintf("u-%d", n%50)}
				if n == groups*perGroup/2 {
					l = store.Lock{Key: "cold/x", Session: "cold-s", User: "cold-u"}
				}
				if _, err := tx.AppendAudit(store.AuditEntry{At: embeddedtest.AuditT0, Event: "acquired", Lock: l, Reason: strings.Repeat("r", 64)}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	check := func(when string) {
		t.Helper()
		var decoded atomic.Int64
		s.decodeAudit = func(p []byte, e *store.AuditEntry) error {
			decoded.Add(1)
			return codec.DecodeAuditBorrowed(p, e)
		}
		for _, q := range []store.AuditQuery{{Key: "cold"}, {Key: "cold/x"}, {Session: "cold-s"}, {User: "cold-u"}, {Key: "cold", User: "cold-u"}} {
			for _, newest := range []bool{false, true} {
				q.Newest, q.Limit = newest, 100
				decoded.Store(0)
				got, err := s.ListAudit(context.Background(), q)
				if err != nil {
					t.Fatalf("%s: ListAudit(%+v): %v", when, q, err)
				}
				if len(got) != 1 || got[0].Lock.Key != "cold/x" {
					t.Fatalf("%s: ListAudit(%+v) = %d entries, want the one of cold/x", when, q, len(got))
				}
				if n := decoded.Load(); n > groups*perGroup/10 {
					t.Errorf("%s: ListAudit(%+v) decoded %d of %d entries, want the few in the stretches that may match", when, q, n, groups*perGroup)
				}
			}
		}
	}
	if len(s.segments()) < 4 {
		t.Fatalf("%d segments, want several", len(s.segments()))
	}
	check("written")
	s.Close()
	s = openTuned(t, dir, tune)
	check("replayed")
	if err := s.checkpoint(nil); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = openTuned(t, dir, tune)
	if s.segments()[0].marked() {
		t.Fatal("a segment before the checkpoint is marked at open, want it read by the first listing")
	}
	check("before the checkpoint")
}

// BenchmarkListAuditColdKey lists the latest entries of a key locked once,
// early in a log of about 10 MB of other keys' entries, newest first, as
// the console's page of that lock does: a walk that cannot skip reads it
// all.
func BenchmarkListAuditColdKey(b *testing.B) {
	tune := defaultTuning
	tune.checkpointBytes = 1 << 62
	s := openBench(b, tune)
	appendEntry(b, s, store.AuditEntry{At: embeddedtest.AuditT0, Event: "acquired", Lock: store.Lock{Key: "cold", Session: "s"}})
	appendGroups(b, s, 1000, 100)
	benchListing(b, s, store.AuditQuery{Key: "cold", Newest: true, Limit: 100}, 1)
}

// A walk decodes each entry in place and copies only those the listing
// keeps: listing the one force-release of 2,000 entries, every one of
// which the walk reads, allocates for that one, not for each entry read.
func TestAuditListingAllocatesForTheEntriesItKeeps(t *testing.T) {
	// Not parallel: AllocsPerRun counts the allocations of the whole process.
	s := openTuned(t, t.TempDir(), oneSegment)
	appendGroups(t, s, 10, 100)
	appendEntry(t, s, store.AuditEntry{At: embeddedtest.AuditT0, Event: "force_released", Lock: store.Lock{Key: "k", Session: "s"}, Actor: "admin", Reason: "stuck"})
	appendGroups(t, s, 10, 100)
	for _, newest := range []bool{false, true} {
		q := store.AuditQuery{Event: "force_released", Newest: newest, Limit: 100}
		var got []store.AuditEntry
		allocs := testing.AllocsPerRun(5, func() {
			var err error
			if got, err = s.ListAudit(context.Background(), q); err != nil {
				t.Fatal(err)
			}
		})
		if len(got) != 1 || got[0].Actor != "admin" || got[0].Reason != "stuck" || got[0].Lock.Key != "k" {
			t.Fatalf("ListAudit(%+v) = %+v, want the force-release", q, got)
		}
		if allocs > 100 {
			t.Errorf("ListAudit(%+v) made %.0f allocations reading 2,001 entries, want those of the one it keeps", q, allocs)
		}
	}
}

// BenchmarkListAuditEvent lists the force-releases of a log of 100,000
// entries that holds one, as the console's audit page filtered by event
// does: no stretch can be skipped, so the walk reads every entry.
func BenchmarkListAuditEvent(b *testing.B) {
	tune := oneSegment
	tune.checkpointBytes = 1 << 62
	s := openBench(b, tune)
	appendGroups(b, s, 500, 100)
	appendEntry(b, s, store.AuditEntry{At: embeddedtest.AuditT0, Event: "force_released", Lock: store.Lock{Key: "k", Session: "s"}})
	appendGroups(b, s, 500, 100)
	benchListing(b, s, store.AuditQuery{Event: "force_released", Newest: true, Limit: 100}, 1)
}

// BenchmarkOpenAuditLog opens a log of 100,000 audit entries that no
// checkpoint covers: replay reads each entry, and marks its segment.
func BenchmarkOpenAuditLog(b *testing.B) {
	dir := b.TempDir()
	tune := defaultTuning
	tune.checkpointBytes = 1 << 62
	s, err := open(dir, Config{Now: func() time.Time { return embeddedtest.AuditT0 }, Logger: quietLog}, tune)
	if err != nil {
		b.Fatal(err)
	}
	appendGroups(b, s, 1000, 100)
	s.Close()
	for b.Loop() {
		s, err := open(dir, Config{Now: func() time.Time { return embeddedtest.AuditT0 }, Logger: quietLog}, tune)
		if err != nil {
			b.Fatal(err)
		}
		s.Close()
	}
}
