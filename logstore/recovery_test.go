package logstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdfast/holdfast/internal/embeddedtest"
	"github.com/holdfast/holdfast/store"
)

// small makes segments and checkpoints come often.
var small = tuning{segmentBytes: 4 << 10, checkpointBytes: 1 << 62, syncers: defaultTuning.syncers}

// twoSyncers has two groups syncing at once, as earlier machines ran.
var twoSyncers = func() tuning {
	tune := defaultTuning
	tune.syncers = 2
	return tune
}()

func openTuned(t *testing.T, dir string, tune tuning) *Store {
	t.Helper()
	s, err := open(dir, Config{Now: func() time.Time { return embeddedtest.AuditT0 }, Logger: quietLog}, tune)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// smallLog opens a store of small segments in a new directory, and makes
// commits 0 to 199 in it.
func smallLog(t *testing.T) (*Store, string) {
	t.Helper()
	dir := t.TempDir()
	s := openTuned(t, dir, small)
	for i := range 200 {
		commit(t, s, i)
	}
	return s, dir
}

// commit puts two locks of commit i in one transaction, with an audit
// entry. Writers may run it on goroutines of their own.
func commit(t *testing.T, s *Store, i int) {
	t.Helper()
	err := s.Update(context.Background(), func(tx store.Tx) error {
		tok, _ := tx.NextToken()
		tx.PutLock(store.Lock{Key: fmt.Sprintf("p/%d/a", i), Session: "s", Token: tok, Note: "first half"})
		tx.AppendAudit(store.AuditEntry{At: embeddedtest.AuditT0.Add(time.Duration(i) * time.Second), Event: "acquired", Lock: store.Lock{Key: fmt.Sprintf("p/%d", i)}})
		return tx.PutLock(store.Lock{Key: fmt.Sprintf("p/%d/b", i), Session: "s", Token: tok, Note: "second half"})
	})
	if err != nil {
		t.Error(err)
	}
}

// present counts the commits there, checking that each is whole and that
// they are a prefix.
func present(t *testing.T, s *Store, commits int) int {
	t.Helper()
	n := 0
	s.View(context.Background(), func(tx store.ReadTx) error {
		for i := range commits {
			_, a, _ := tx.Lock(fmt.Sprintf("p/%d/a", i), "s")
			_, b, _ := tx.Lock(fmt.Sprintf("p/%d/b", i), "s")
			if a != b {
				t.Errorf("commit %d is half there (a %v, b %v)", i, a, b)
			}
			if a && n != i {
				t.Errorf("commit %d is there but commit %d is not", i, n)
			}
			if a {
				n++
			}
		}
		return nil
	})
	return n
}

// lastSegment is the newest segment holding a group, and where its last
// group starts and ends.
func lastSegment(t *testing.T, dir string) (path string, start, end int) {
	t.Helper()
	segs, err := listSegments(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i := len(segs) - 1; i >= 0; i-- {
		b, err := os.ReadFile(segs[i].path)
		if err != nil {
			t.Fatal(err)
		}
		end, _ = frames(b, func(int, uint64, []byte) error { return nil })
		for off := headerLen; off < end; {
			_, _, n, _ := parseFrame(b[off:])
			start, off = off, off+n
		}
		if end > headerLen {
			return segs[i].path, start, end
		}
	}
	t.Fatal("no group in the log")
	return "", 0, 0
}

func copyDir(t *testing.T, from string) string {
	t.Helper()
	to := t.TempDir()
	names, _ := filepath.Glob(filepath.Join(from, "*"))
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, filepath.Base(name)), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return to
}

// A crash mid-write leaves any prefix of the last group: cut the log at
// every byte of it, and reopening gives every commit before it, whole,
// and not the cut one; garbage or zeros after the last group are ignored.
func TestTornTailEveryByteRecoversAPrefix(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const commits = 5
	s := openTuned(t, dir, defaultTuning)
	for i := range commits {
		commit(t, s, i)
	}
	s.Close()
	path, start, end := lastSegment(t, dir)
	for cut := start; cut < end; cut++ {
		d := copyDir(t, dir)
		if err := os.Truncate(filepath.Join(d, filepath.Base(path)), int64(cut)); err != nil {
			t.Fatal(err)
		}
		s := openTuned(t, d, defaultTuning)
		if n := present(t, s, commits); n != commits-1 {
			t.Fatalf("cut at byte %d of the last group: %d commits recovered, want %d", cut-start, n, commits-1)
		}
		commit(t, s, commits-1) // the log goes on after the cut
		s.Close()
		s = openTuned(t, d, defaultTuning)
		if n := present(t, s, commits); n != commits {
			t.Fatalf("after the cut at %d and a new commit: %d commits, want %d", cut-start, n, commits)
		}
		s.Close()
	}
	for name, tail := range map[string][]byte{
		"garbage": []byte("\x07\x00\x00\x00\x13torn write of a record that never finished"),
		"zeros":   make([]byte, 4096),
	} {
		d := copyDir(t, dir)
		f, err := os.OpenFile(filepath.Join(d, filepath.Base(path)), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.Write(tail)
		f.Close()
		s := openTuned(t, d, defaultTuning)
		if n := present(t, s, commits); n != commits {
			t.Errorf("%s after the last group: %d commits, want %d", name, n, commits)
		}
		s.Close()
	}
}

// A damaged group in a segment that is not the last is not a torn write:
// open refuses it rather than losing what follows.
func TestDamageBeforeTheLastSegmentIsRefused(t *testing.T) {
	t.Parallel()
	s, dir := smallLog(t)
	s.Close()
	segs, err := listSegments(dir)
	if err != nil || len(segs) < 3 {
		t.Fatalf("%d segments, %v; want several", len(segs), err)
	}
	b, _ := os.ReadFile(segs[0].path)
	b[headerLen+frameLen+3] ^= 0xff
	os.WriteFile(segs[0].path, b, 0o600)
	if s, err := open(dir, Config{Logger: quietLog}, small); err == nil {
		s.Close()
		t.Fatal("opened a log damaged in its middle")
	} else if !errors.Is(err, errCorrupt) {
		t.Fatalf("open = %v, want errCorrupt", err)
	}
}

// A crash can leave the last segment's header short or zero, never
// damaged in front of groups (it is fsync'd before any group is written):
// a damaged header there is refused, not taken for an empty segment and
// removed with the groups behind it.
func TestDamagedHeaderOfTheLastSegmentIsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openTuned(t, dir, small)
	for i := range 5 {
		commit(t, s, i)
	}
	s.Close()
	path, _, _ := lastSegment(t, dir)
	b, _ := os.ReadFile(path)
	b[2] ^= 0xff
	os.WriteFile(path, b, 0o600)
	if s, err := open(dir, Config{Logger: quietLog}, small); err == nil {
		s.Close()
		t.Fatal("opened a log whose last segment's header is damaged")
	} else if !errors.Is(err, errCorrupt) {
		t.Fatalf("open = %v, want errCorrupt", err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("the damaged segment is gone: %v", err)
	}
}

func readState(t *testing.T, s *Store) (locks []store.Lock, audit []store.AuditEntry, token uint64) {
	t.Helper()
	s.View(context.Background(), func(tx store.ReadTx) (err error) {
		locks, _ = tx.Locks(store.LockQuery{})
		audit, err = tx.Audit(store.AuditQuery{})
		return err
	})
	token, _ = s.mem.Counters()
	return locks, audit, token
}

// A checkpoint holds the state, so the segments before it go, but only
// once the audit entries they hold are pruned; open reads the checkpoint
// and the log after it.
func TestCheckpointDropsSegmentsOnceTheirAuditIsPruned(t *testing.T) {
	t.Parallel()
	s, dir := smallLog(t)
	before := len(must(listSegments(dir)))
	if err := s.checkpoint(nil); err != nil {
		t.Fatal(err)
	}
	if n := len(must(listSegments(dir))); n != before {
		t.Fatalf("%d segments after a checkpoint, %d before: segments with live audit entries went", n, before)
	}
	if n := embeddedtest.PruneAudit(t, s, embeddedtest.AuditT0.Add(150*time.Second), 0); n != 150 {
		t.Fatalf("pruned %d, want 150", n)
	}
	for i := 200; i < 220; i++ {
		commit(t, s, i)
	}
	if err := s.checkpoint(nil); err != nil {
		t.Fatal(err)
	}
	after := must(listSegments(dir))
	if len(after) >= before {
		t.Fatalf("%d segments after pruning and a checkpoint, %d before", len(after), before)
	}
	if after[0].firstAudit > 151 {
		t.Fatalf("first segment starts at audit ID %d: live entry 151 went", after[0].firstAudit)
	}
	locks, audit, token := readState(t, s)
	if len(locks) != 440 || len(audit) != 70 || audit[0].ID != 151 {
		t.Fatalf("%d locks, %d audit entries from %d", len(locks), len(audit), audit[0].ID)
	}
	s.Close()

	s = openTuned(t, dir, small)
	l2, a2, tok2 := readState(t, s)
	if !reflect.DeepEqual(locks, l2) || !reflect.DeepEqual(audit, a2) || token != tok2 {
		t.Fatalf("after reopen: %d locks, %d audit entries, token %d; before %d, %d, %d", len(l2), len(a2), tok2, len(locks), len(audit), token)
	}
	if names, _ := filepath.Glob(filepath.Join(dir, checkpointPrefix+"*")); len(names) != 1 {
		t.Fatalf("checkpoints left: %v", names)
	}
}

// A crash between a checkpoint's rename and the removal of what it covers
// (and one in the middle of writing the next checkpoint) loses nothing:
// open reads the newest checkpoint, replays the log after it over it, and
// removes what is left over.
func TestCrashBetweenCheckpointAndTruncation(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openTuned(t, dir, small)
	for i := range 100 {
		commit(t, s, i)
	}
	embeddedtest.PruneAudit(t, s, embeddedtest.AuditT0.Add(time.Hour), 0)
	seq, _, _, err := s.saveCheckpoint(nil)
	if err != nil {
		t.Fatal(err)
	}
	// Written after the snapshot: replayed over the checkpoint.
	for i := 100; i < 120; i++ {
		commit(t, s, i)
	}
	err = s.Update(context.Background(), func(tx store.Tx) error { return tx.DeleteLock("p/3/a", "s") })
	if err != nil {
		t.Fatal(err)
	}
	locks, audit, token := readState(t, s)
	s.Close()
	before := len(must(listSegments(dir)))
	os.WriteFile(filepath.Join(dir, checkpointName(seq+50)+".tmp"), []byte("half a checkpoint"), 0o600)

	s = openTuned(t, dir, small)
	l2, a2, tok2 := readState(t, s)
	if !reflect.DeepEqual(locks, l2) || !reflect.DeepEqual(audit, a2) || token != tok2 {
		t.Fatalf("after reopen: %d locks, %d audit entries, token %d; before %d, %d, %d", len(l2), len(a2), tok2, len(locks), len(audit), token)
	}
	if n := len(must(listSegments(dir))); n >= before {
		t.Fatalf("%d segments after reopen, %d before: the covered ones stayed", n, before)
	}
	if tmps, _ := filepath.Glob(filepath.Join(dir, "*.tmp")); len(tmps) != 0 {
		t.Fatalf("left over: %v", tmps)
	}
}

// Checkpoints taken while writers run, and segments prepared and rotated
// under them, lose nothing.
func TestCheckpointsUnderLoad(t *testing.T) {
	t.Parallel()
	for syncers := 1; syncers <= 2; syncers++ {
		t.Run(fmt.Sprintf("%d syncers", syncers), func(t *testing.T) {
			t.Parallel()
			checkpointsUnderLoad(t, syncers)
		})
	}
}

func checkpointsUnderLoad(t *testing.T, syncers int) {
	dir := t.TempDir()
	s := openTuned(t, dir, tuning{segmentBytes: 16 << 10, checkpointBytes: 32 << 10, syncers: syncers})
	var writers sync.WaitGroup
	for w := range 4 {
		writers.Go(func() {
			for i := w; i < 1000; i += 4 {
				commit(t, s, i)
			}
		})
	}
	writers.Wait()
	locks, audit, token := readState(t, s)
	s.Close()
	if names, _ := filepath.Glob(filepath.Join(dir, checkpointPrefix+"*")); len(names) == 0 {
		t.Fatal("no checkpoint was written")
	}
	s = openTuned(t, dir, small)
	l2, a2, tok2 := readState(t, s)
	if len(locks) != 2000 || !reflect.DeepEqual(locks, l2) || !reflect.DeepEqual(audit, a2) || token != tok2 {
		t.Fatalf("after reopen: %d locks, %d audit entries, token %d; before %d, %d, %d", len(l2), len(a2), tok2, len(locks), len(audit), token)
	}
}

func TestFailedWriteFailsClosed(t *testing.T) {
	embeddedtest.FailedWriteFailsClosed(t, openStore, func(s store.Store, err error) {
		s.(*Store).writeFrame = func(*os.File, int64, []byte) error { return err }
	})
}

// The group was written, so only the cut after the failed fdatasync keeps
// it from coming back at the next open.
func TestFailedSyncFailsClosed(t *testing.T) {
	embeddedtest.FailedWriteFailsClosed(t, openStore, func(s store.Store, err error) {
		s.(*Store).syncFile = func(*os.File) error { return err }
	})
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// A commit under way when Close begins is either written before Close
// finishes, and answered so, or refused before it changes memory: never
// refused and then kept by the checkpoint Close writes from memory.
func TestCloseKeepsNoRefusedCommit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	s := openTuned(t, dir, defaultTuning)
	// Enough log for Close to write a checkpoint.
	for n := 0; s.sinceCheckpoint < closeCheckpointBytes; n++ {
		if err := s.Update(ctx, func(tx store.Tx) error {
			for i := range 1000 {
				if err := tx.PutLock(store.Lock{Key: fmt.Sprintf("fill/%d/%d", n, i), Session: "s", Note: "a note long enough to fill the log"}); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}

	inside, release := make(chan struct{}), make(chan struct{})
	updated := make(chan error)
	go func() {
		updated <- s.Update(ctx, func(tx store.Tx) error {
			close(inside)
			<-release
			return tx.PutLock(store.Lock{Key: "racing", Session: "s"})
		})
	}()
	<-inside
	closed := make(chan error)
	go func() { closed <- s.Close() }()
	// Let Close begin while the commit runs: it either refuses the
	// commit's answer (then Ping fails) or waits for the commit.
	for range 100 {
		if s.Ping(ctx) != nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	uerr := <-updated
	if err := <-closed; err != nil {
		t.Fatal(err)
	}

	s = openTuned(t, dir, defaultTuning)
	s.View(ctx, func(tx store.ReadTx) error {
		_, kept, _ := tx.Lock("racing", "s")
		if kept != (uerr == nil) {
			t.Errorf("Update during Close returned %v, and the lock is kept: %v", uerr, kept)
		}
		return nil
	})
}

// With two syncs under way, a group is answered by the first that returns
// having begun after it was written, and a failure answers every group
// not yet answered, and keeps every group answered before it.
func TestOverlappingSyncs(t *testing.T) {
	t.Parallel()
	boom := errors.New("i/o error")
	for name, second := range map[string]error{"second succeeds": nil, "second fails": boom} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			ctx := context.Background()
			s := openTuned(t, dir, twoSyncers)
			firstIn, releaseFirst := holdFirstSync(s, boom, func(f *os.File) error {
				if err := fdatasync(f); err != nil {
					return err
				}
				return second
			})
			put := func(key string) error { return putLock(s, key) }
			release := sync.OnceFunc(func() { close(releaseFirst) })
			first := make(chan error, 1)
			go func() { first <- put("first") }()
			<-firstIn
			// Neither Update may wait for the first sync: if one does,
			// it is let go after a while, and the test fails.
			stop := time.AfterFunc(10*time.Second, release)
			err2 := put("second")
			err1 := <-first
			if !stop.Stop() {
				t.Fatal("an Update waited for the first sync")
			}
			release()
			if second == nil && (err1 != nil || err2 != nil) {
				t.Fatalf("the second sync succeeded, yet the Updates returned %v and %v", err1, err2)
			}
			if second != nil && (!errors.Is(err1, store.ErrUnavailable) || !errors.Is(err2, store.ErrUnavailable)) {
				t.Fatalf("the second sync failed, yet the Updates returned %v and %v", err1, err2)
			}
			// The first sync's failure comes after: the store fails closed
			// either way, and keeps what it answered.
			for s.Ping(ctx) == nil {
				time.Sleep(time.Millisecond)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			checkKept(t, dir, map[string]bool{"first": second == nil, "second": second == nil})
		})
	}
}

// A group written while an earlier sync fails must not come back at the
// next open: its caller was told it failed, and the failure's cut of the
// segment may come before the group's write.
func TestGroupWrittenAfterTheCutIsCut(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	s := openTuned(t, dir, twoSyncers)
	firstIn, releaseFirst := holdFirstSync(s, errors.New("i/o error"), fdatasync)
	var mu sync.Mutex
	writes := 0
	write := s.writeFrame
	s.writeFrame = func(f *os.File, off int64, frame []byte) error {
		mu.Lock()
		writes++
		call := writes
		mu.Unlock()
		if call == 3 {
			// The third group is written only once the first sync has
			// failed and the failure has cut the segment.
			close(releaseFirst)
			for s.Ping(ctx) == nil {
				time.Sleep(time.Millisecond)
			}
			time.Sleep(50 * time.Millisecond)
		}
		return write(f, off, frame)
	}
	first := make(chan error, 1)
	go func() { first <- putLock(s, "first") }()
	<-firstIn
	if err := putLock(s, "second"); err != nil {
		t.Fatal(err)
	}
	if err := <-first; err != nil {
		t.Fatal(err) // answered by the second sync
	}
	if err := putLock(s, "third"); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("the third Update returned %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	checkKept(t, dir, map[string]bool{"first": true, "second": true, "third": false})
}

// holdFirstSync makes s's first fdatasync tell firstIn it began, wait
// for releaseFirst and fail with err; every later one is then's.
func holdFirstSync(s *Store, err error, then func(*os.File) error) (firstIn, releaseFirst chan struct{}) {
	firstIn, releaseFirst = make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	s.syncFile = func(f *os.File) error {
		if calls.Add(1) == 1 {
			close(firstIn)
			<-releaseFirst
			return err
		}
		return then(f)
	}
	return firstIn, releaseFirst
}

func putLock(s *Store, key string) error {
	return s.Update(context.Background(), func(tx store.Tx) error { return tx.PutLock(store.Lock{Key: key, Session: "s"}) })
}

// checkKept opens the store in dir again and checks which keys it holds.
func checkKept(t *testing.T, dir string, want map[string]bool) {
	t.Helper()
	s := openTuned(t, dir, defaultTuning)
	s.View(context.Background(), func(tx store.ReadTx) error {
		for key, held := range want {
			if _, ok, _ := tx.Lock(key, "s"); ok != held {
				t.Errorf("%s kept: %v", key, ok)
			}
		}
		return nil
	})
}
