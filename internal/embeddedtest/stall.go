package embeddedtest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/store"
)

// StalledDiskFailsClosedUntilItCompletes checks that a disk that stops
// completing fsyncs fails the store closed within its bound, the caller
// waiting for the stalled write included, and that the store serves again
// once the write completes, having kept what was committed meanwhile.
// openBounded opens dir with a bound of about a second (short enough for
// a test, long enough for an fsync of a loaded machine); beforeSync makes
// every later fsync of s call hook first.
func StalledDiskFailsClosedUntilItCompletes(t *testing.T, open Open, openBounded func(dir string) (store.Store, error),
	beforeSync func(s store.Store, hook func())) {
	t.Parallel()
	dir := t.TempDir()
	s, err := openBounded(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := holdfast.New(s, holdfast.Config{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	acquire := func(key string) error {
		_, err := m.Acquire(ctx, holdfast.AcquireRequest{Keys: []string{key}, Owner: holdfast.Owner{Session: "s-" + key, User: "u"}})
		return err
	}
	if err := acquire("before"); err != nil {
		t.Fatalf("acquire before the stall: %v", err)
	}

	unhang := make(chan struct{})
	beforeSync(s, func() { <-unhang })
	stalled := make(chan error, 1)
	go func() { stalled <- acquire("during") }()
	select {
	case err := <-stalled:
		var unavailable *holdfast.UnavailableError
		if !errors.As(err, &unavailable) || !errors.Is(err, store.ErrUnavailable) ||
			!strings.Contains(err.Error(), "has not completed a write") || unavailable.RetryAfter <= 0 {
			t.Fatalf("acquire waiting for the stalled fsync = %v, want an UnavailableError saying the disk stalled, with a Retry-After", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("an acquire waiting for a stalled fsync was still waiting after 30s")
	}
	if err := s.Ping(ctx); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Ping during the stall = %v, want store.ErrUnavailable", err)
	}
	// A new call fails at once, without committing anything.
	if err := acquire("refused"); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("acquire during the stall = %v, want store.ErrUnavailable", err)
	}

	close(unhang)
	for deadline := time.Now().Add(10 * time.Second); s.Ping(ctx) != nil; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("Ping still fails 10s after the stalled fsync completed: %v", s.Ping(ctx))
		}
	}
	if err := acquire("after"); err != nil {
		t.Fatalf("acquire after the stall: %v", err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// The commit answered 503 was written once the disk allowed; the one
	// refused during the stall was never made.
	s = open.MustOpen(t, dir, nil)
	defer s.Close()
	want := map[string]bool{"before": true, "during": true, "refused": false, "after": true}
	if err := s.View(ctx, func(tx store.ReadTx) error {
		for key, held := range want {
			if _, found, err := tx.Lock(key, "s-"+key); err != nil || found != held {
				t.Errorf("after reopening, %q held = %v (%v), want %v", key, found, err, held)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// CallerWhoLeavesIsAnsweredWithTheCommit checks that a caller whose
// context ends while its commit waits for the disk is not answered before
// the commit's fate is known: it is then answered as if it had stayed,
// and the commit's audit entry reaches subscribers. Were it answered
// early, with an error, the Manager would count the commit as failed and
// never publish its entry. beforeSync is as for
// StalledDiskFailsClosedUntilItCompletes.
func CallerWhoLeavesIsAnsweredWithTheCommit(t *testing.T, open Open, beforeSync func(s store.Store, hook func())) {
	t.Parallel()
	s, m := open.unswept(t)
	entries, unsubscribe := m.Subscribe("")
	defer unsubscribe()

	syncing, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	beforeSync(s, func() {
		once.Do(func() { close(syncing) })
		<-release
	})
	ctx, leave := context.WithCancel(context.Background())
	answered := make(chan error, 1)
	go func() {
		_, err := m.Acquire(ctx, holdfast.AcquireRequest{Keys: []string{"k"}, Owner: holdfast.Owner{Session: "s", User: "u"}})
		answered <- err
	}()
	<-syncing // the acquire's commit is in memory, waiting for its fsync
	leave()
	close(release)
	select {
	case err := <-answered:
		if err != nil {
			t.Fatalf("acquire whose caller left during its fsync = %v, want its commit's answer, nil", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the acquire was not answered 30s after its fsync completed")
	}
	select {
	case e := <-entries:
		if e.Event != "acquired" || e.Lock.Key != "k" {
			t.Fatalf("subscriber got %+v, want the acquire of k", e)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the acquire's audit entry did not reach the subscriber in 30s")
	}
}
