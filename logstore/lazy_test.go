package logstore

import (
	"context"
	"errors"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdfast/holdfast/internal/embeddedtest"
	"github.com/holdfast/holdfast/store"
)

// Heartbeats cost no fdatasync: a group of lazy changes only is written
// without one, and Close syncs it, so a clean stop keeps every touch.
func TestLazyGroupsAreNotSynced(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	tune := defaultTuning
	tune.lazyDelay = time.Hour // however slowly the touches go
	s := openTuned(t, dir, tune)
	syncs := countSyncs(s)
	sess := store.Session{ID: "s", LastSeen: embeddedtest.AuditT0}
	if err := s.Update(ctx, func(tx store.Tx) error { return tx.PutSession(sess) }); err != nil {
		t.Fatal(err)
	}
	if n := syncs.Load(); n != 1 {
		t.Fatalf("a strict commit synced %d times", n)
	}
	const touches = 5
	for i := range touches {
		sess.LastSeen = embeddedtest.AuditT0.Add(time.Duration(i+1) * time.Second)
		if err := s.Update(ctx, func(tx store.Tx) error { return tx.(store.Toucher).TouchSession(sess) }); err != nil {
			t.Fatal(err)
		}
		waitWritten(t, s) // each touch its own group
	}
	if n := syncs.Load(); n != 1 {
		t.Fatalf("%d groups of touches caused %d fdatasyncs", touches, n-1)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if n := syncs.Load(); n != 2 {
		t.Fatalf("Close made %d fdatasyncs for the touches, want 1", n-1)
	}
	s = openTuned(t, dir, defaultTuning)
	s.View(ctx, func(tx store.ReadTx) error {
		got, ok, err := tx.Session("s")
		if err != nil || !ok || !got.LastSeen.Equal(sess.LastSeen) {
			t.Errorf("after Close and open: %+v %v %v, want last seen %v", got, ok, err, sess.LastSeen)
		}
		return nil
	})
}

// countWrites counts the groups s writes from now on.
func countWrites(s *Store) *atomic.Int32 {
	var n atomic.Int32
	write := s.writeFrame
	s.writeFrame = func(f *os.File, off int64, frame []byte) error {
		n.Add(1)
		return write(f, off, frame)
	}
	return &n
}

// countSyncs counts s's fdatasyncs from now on.
func countSyncs(s *Store) *atomic.Int32 {
	var n atomic.Int32
	s.syncFile = func(f *os.File) error {
		n.Add(1)
		return fdatasync(f)
	}
	return &n
}

// waitWritten waits until a syncer has written the filling group and
// decided whether to sync it.
func waitWritten(t *testing.T, s *Store) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		s.writeMu.Lock()
		s.mu.Lock()
		empty := s.filling.empty()
		s.mu.Unlock()
		s.writeMu.Unlock()
		if empty {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("the filling group was not written in 10s")
}

// Heartbeats wait for a sync for at most tuning.lazyDelay: once the first
// unsynced one is that old, the next group of touches is synced itself,
// so a crash of the machine cannot take back minutes of them.
func TestLazyGroupsAreSyncedAfterTheDelay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var clock atomic.Int64 // nanoseconds after AuditT0
	tune := defaultTuning
	tune.lazyDelay = time.Hour // the timer never fires: the clock decides
	tune.now = func() time.Time { return embeddedtest.AuditT0.Add(time.Duration(clock.Load())) }
	s := openTuned(t, t.TempDir(), tune)
	defer s.Close()
	sess := store.Session{ID: "s", LastSeen: embeddedtest.AuditT0}
	if err := s.Update(ctx, func(tx store.Tx) error { return tx.PutSession(sess) }); err != nil {
		t.Fatal(err)
	}
	// touch writes a group of one touch and reports whether the syncer
	// chose to sync it.
	touch := func() (synced bool) {
		t.Helper()
		sess.LastSeen = sess.LastSeen.Add(time.Second)
		if err := s.Update(ctx, func(tx store.Tx) error { return tx.(store.Toucher).TouchSession(sess) }); err != nil {
			t.Fatal(err)
		}
		waitWritten(t, s)
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.unsyncedSince.IsZero()
	}
	if touch() {
		t.Fatal("a touch was synced")
	}
	clock.Add(int64(tune.lazyDelay - 1))
	if touch() {
		t.Fatal("a touch within the delay was synced")
	}
	clock.Add(1)
	if !touch() {
		t.Fatalf("a touch written %v after the first unsynced one was not synced", tune.lazyDelay)
	}
	if touch() {
		t.Fatal("the touch straight after a sync was synced too")
	}
}

// A touch with nothing written after it is synced by the timer once it is
// lazyDelay old, not left in the page cache until the next write.
func TestALoneTouchIsSyncedAfterTheDelay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tune := defaultTuning
	tune.lazyDelay = 10 * time.Millisecond
	s := openTuned(t, t.TempDir(), tune)
	defer s.Close()
	syncs := countSyncs(s)
	sess := store.Session{ID: "s", LastSeen: embeddedtest.AuditT0}
	if err := s.Update(ctx, func(tx store.Tx) error { return tx.PutSession(sess) }); err != nil {
		t.Fatal(err)
	}
	sess.LastSeen = sess.LastSeen.Add(time.Second)
	if err := s.Update(ctx, func(tx store.Tx) error { return tx.(store.Toucher).TouchSession(sess) }); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); syncs.Load() < 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("a lone touch was not synced 10s after it was written (%d fdatasyncs)", syncs.Load())
		}
	}
	s.mu.Lock()
	unsynced := !s.unsyncedSince.IsZero()
	s.mu.Unlock()
	if unsynced {
		t.Fatal("the touch was synced but is still marked unsynced")
	}
}

// Touches alone wait in the filling group for tuning.lazyWrite, so that
// many go out in one write; a commit that is not lazy takes them along at
// once, in the order they came.
func TestTouchesWaitToBeWrittenTogether(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tune := defaultTuning
	tune.lazyWrite = time.Hour
	dir := t.TempDir()
	s := openTuned(t, dir, tune)
	writes := countWrites(s)
	sess := store.Session{ID: "s", LastSeen: embeddedtest.AuditT0}
	if err := s.Update(ctx, func(tx store.Tx) error { return tx.PutSession(sess) }); err != nil {
		t.Fatal(err)
	}
	waitWritten(t, s)
	before := writes.Load()
	for range 5 {
		sess.LastSeen = sess.LastSeen.Add(time.Second)
		if err := s.Update(ctx, func(tx store.Tx) error { return tx.(store.Toucher).TouchSession(sess) }); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(20 * time.Millisecond) // a timer armed by mistake would have written by now
	if n := writes.Load() - before; n != 0 {
		t.Fatalf("5 touches alone were written in %d writes before their delay", n)
	}
	if err := s.Update(ctx, func(tx store.Tx) error { return tx.PutSession(store.Session{ID: "t", LastSeen: embeddedtest.AuditT0}) }); err != nil {
		t.Fatal(err)
	}
	if n := writes.Load() - before; n != 1 {
		t.Fatalf("the touches and the next commit took %d writes, want 1", n)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTuned(t, dir, tune)
	defer s.Close()
	s.View(ctx, func(tx store.ReadTx) error {
		got, ok, err := tx.Session("s")
		if err != nil || !ok || !got.LastSeen.Equal(sess.LastSeen) {
			t.Errorf("after reopen: %+v %v %v, want last seen %v", got, ok, err, sess.LastSeen)
		}
		return nil
	})
}

// Touches that come while a group syncs wait for tuning.lazyWrite all
// the same: the syncer does not write them alone once its sync returns.
func TestTouchesAfterASyncWaitToBeWrittenTogether(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tune := defaultTuning
	tune.lazyWrite = time.Hour
	s := openTuned(t, t.TempDir(), tune)
	firstIn, releaseFirst := holdFirstSync(s, nil, fdatasync)
	writes := countWrites(s)
	sess := store.Session{ID: "s", LastSeen: embeddedtest.AuditT0}
	put := make(chan error, 1)
	go func() { put <- s.Update(ctx, func(tx store.Tx) error { return tx.PutSession(sess) }) }()
	<-firstIn
	sess.LastSeen = sess.LastSeen.Add(time.Second)
	touched := make(chan error, 1)
	go func() {
		touched <- s.Update(ctx, func(tx store.Tx) error { return tx.(store.Toucher).TouchSession(sess) })
	}()
	for filling := false; !filling; time.Sleep(time.Millisecond) {
		s.mu.Lock()
		filling = !s.filling.empty()
		s.mu.Unlock()
	}
	close(releaseFirst)
	if err := errors.Join(<-put, <-touched); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // a syncer that wrote the touch would have by now
	if n := writes.Load(); n != 1 {
		t.Fatalf("%d writes, want 1: the touch was written alone after the sync", n)
	}
}
