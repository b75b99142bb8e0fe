package pebblestore

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/holdfast/holdfast/store"
)

// A touch-only commit waits for nothing the log has not already made
// durable, yet is written with the next group and survives a restart.
func TestTouchDoesNotWaitForTheLog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	cfg := Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	s, err := Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	sess := store.Session{ID: "s-81", LastSeen: time.UnixMilli(1000).UTC(), IdleTimeout: time.Minute}
	if err := s.Update(ctx, func(tx store.Tx) error { return tx.PutSession(sess) }); err != nil {
		t.Fatal(err)
	}

	// Hold the log: every append blocks until released. held has room for
	// one signal, so the first append is seen even if it comes before the
	// test waits for it.
	held, release := make(chan struct{}, 1), make(chan struct{})
	appendToLog := s.append
	s.append = func(b *pebble.Batch) error {
		select {
		case held <- struct{}{}:
		default:
		}
		<-release
		return appendToLog(b)
	}

	sess.LastSeen = time.UnixMilli(2000).UTC()
	if err := s.Update(ctx, func(tx store.Tx) error { return tx.(store.Toucher).TouchSession(sess) }); err != nil {
		t.Fatalf("touch: %v", err)
	}
	<-held // the touch is on its way to the log, which is held

	strict := make(chan error, 1)
	go func() {
		strict <- s.Update(ctx, func(tx store.Tx) error { return tx.PutLock(store.Lock{Key: "policy/1", Session: "s-81"}) })
	}()
	select {
	case err := <-strict:
		t.Fatalf("a strict commit returned (%v) while the log was held", err)
	default:
	}
	close(release)
	if err := <-strict; err != nil {
		t.Fatalf("strict commit: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.View(ctx, func(tx store.ReadTx) error {
		got, ok, _ := tx.Session("s-81")
		if !ok || !got.LastSeen.Equal(sess.LastSeen) {
			t.Errorf("after restart the session is %+v (found %v), want LastSeen %v", got, ok, sess.LastSeen)
		}
		return nil
	})
}
