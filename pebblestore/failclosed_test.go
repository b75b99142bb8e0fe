package pebblestore

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/holdfast/holdfast/store"
)

func TestFailedWriteFailsClosed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	cfg := Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	s, err := Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	put := func(key string) error {
		return s.Update(ctx, func(tx store.Tx) error { return tx.PutLock(store.Lock{Key: key, Session: "s"}) })
	}
	if err := put("kept"); err != nil {
		t.Fatal(err)
	}

	diskFull := errors.New("no space left on device")
	s.append = func(*pebble.Batch) error { return diskFull }
	if err := put("lost"); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Update with a failing disk = %v, want ErrUnavailable", err)
	}
	// Memory is ahead of disk now: nothing may be answered from it.
	for name, err := range map[string]error{
		"Ping":   s.Ping(ctx),
		"Update": put("later"),
		"View":   s.View(ctx, func(store.ReadTx) error { return nil }),
	} {
		if !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("%s after a failed write = %v, want ErrUnavailable", name, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	// A restart recovers the last durable state.
	s, err = Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.View(ctx, func(tx store.ReadTx) error {
		if _, ok, _ := tx.Lock("kept", "s"); !ok {
			t.Error("the durable write is gone")
		}
		if _, ok, _ := tx.Lock("lost", "s"); ok {
			t.Error("the failed write is there")
		}
		return nil
	})
}
