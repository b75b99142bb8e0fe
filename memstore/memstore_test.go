package memstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/holdfast/holdfast/internal/embeddedtest"
	"github.com/holdfast/holdfast/memstore"
	"github.com/holdfast/holdfast/store"
)

func TestUpdateIsAtomicAndClockInjected(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 10, 47, 0, 0, time.UTC)
	s := memstore.New(memstore.Config{Now: func() time.Time { return now }})
	ctx := context.Background()

	refused := errors.New("refused")
	err := s.Update(ctx, func(tx store.Tx) error {
		tx.PutLock(store.Lock{Key: "policy/1", Session: "s"})
		return refused
	})
	if !errors.Is(err, refused) {
		t.Fatalf("Update = %v, want the callback's error", err)
	}
	err = s.View(ctx, func(tx store.ReadTx) error {
		if got := tx.Now(); !got.Equal(now) {
			t.Errorf("Now = %v, want the injected %v", got, now)
		}
		if _, ok, _ := tx.Lock("policy/1", "s"); ok {
			t.Error("a failed update left its lock behind")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestClosedStoreIsUnavailable(t *testing.T) {
	embeddedtest.ClosedStoreIsUnavailable(t, func(string, func() time.Time) (store.Store, error) {
		return memstore.New(memstore.Config{}), nil
	})
}

func TestCanceledContextRunsNothing(t *testing.T) {
	t.Parallel()
	s := memstore.New(memstore.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ran := false
	if err := s.Update(ctx, func(store.Tx) error { ran = true; return nil }); !errors.Is(err, context.Canceled) || ran {
		t.Fatalf("Update with a canceled context = %v (ran %v)", err, ran)
	}
}
