package embeddedtest

import (
	"context"
	"errors"
	"testing"

	"github.com/holdfast/holdfast/store"
)

// FailedWriteFailsClosed checks that once a write fails on disk, memory
// being ahead of disk, the store answers ErrUnavailable to everything, and
// that a reopen recovers the last durable state. failDisk makes every
// later write of s fail with err.
func FailedWriteFailsClosed(t *testing.T, open Open, failDisk func(s store.Store, err error)) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	s := open.MustOpen(t, dir, nil)
	put := func(key string) error {
		return s.Update(ctx, func(tx store.Tx) error { return tx.PutLock(store.Lock{Key: key, Session: "s"}) })
	}
	if err := put("kept"); err != nil {
		t.Fatal(err)
	}

	failDisk(s, errors.New("no space left on device"))
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
	s = open.MustOpen(t, dir, nil)
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
