package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast/holdfast/internal/pgtest"
	"github.com/holdfast/holdfast/pgstore"
	"github.com/holdfast/holdfast/store"
)

// A private PostgreSQL stopped and started under a store with pooled
// connections, once by a fast shutdown and once by a crash: a transaction
// under way when the database goes fails with store.ErrUnavailable and is
// not committed; while it is down every call fails at once with
// store.ErrUnavailable; once it is back the same store serves again, every
// call, and what was committed before is still there.
func TestDatabaseRestart(t *testing.T) {
	t.Parallel()
	db := pgtest.Start(t)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, db.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	schema := randomSchema()
	if err := pgstore.Migrate(ctx, pool, schema); err != nil {
		t.Fatal(err)
	}
	s := open(t, pool, schema, nil)
	put := func(member string) error {
		return s.Update(ctx, func(tx store.Tx) error {
			return tx.PutAggregate(store.Aggregate{Member: member, Root: "lease/1"})
		})
	}
	has := func(member string) bool {
		t.Helper()
		var found bool
		if err := s.View(ctx, func(tx store.ReadTx) (err error) {
			_, found, err = tx.Aggregate(member)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return found
	}

	for i, mode := range []pgtest.Mode{pgtest.Fast, pgtest.Immediate} {
		committed, inFlight := fmt.Sprintf("asset/%d", i), fmt.Sprintf("asset/in-flight-%d", i)
		if err := put(committed); err != nil {
			t.Fatal(err)
		}
		// Warm several pooled connections, so that the pool holds dead
		// ones after the restart.
		warm := make(chan error)
		for range 4 {
			go func() {
				warm <- s.View(ctx, func(tx store.ReadTx) error {
					_, _, err := tx.Aggregate(committed)
					time.Sleep(20 * time.Millisecond)
					return err
				})
			}()
		}
		for range 4 {
			if err := <-warm; err != nil {
				t.Fatal(err)
			}
		}

		midway, stopped := make(chan struct{}), make(chan struct{})
		done := make(chan error)
		go func() {
			done <- s.Update(ctx, func(tx store.Tx) error {
				if err := tx.PutAggregate(store.Aggregate{Member: inFlight, Root: "lease/1"}); err != nil {
					return err
				}
				if _, _, err := tx.Aggregate(committed); err != nil {
					return err
				}
				close(midway)
				<-stopped
				return nil
			})
		}()
		<-midway
		db.Stop(mode)
		close(stopped)
		if err := <-done; !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("%s stop: the transaction under way ended with %v, want ErrUnavailable", mode, err)
		}

		for name, call := range map[string]func(context.Context) error{
			"Ping":   s.Ping,
			"Update": func(context.Context) error { return put("asset/while-down") },
			"View":   func(ctx context.Context) error { return s.View(ctx, func(store.ReadTx) error { return nil }) },
		} {
			start := time.Now()
			if err := call(ctx); !errors.Is(err, store.ErrUnavailable) {
				t.Errorf("%s stop: %s with the database down = %v, want ErrUnavailable", mode, name, err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("%s stop: %s took %s to fail; a refused connection should fail at once", mode, name, d)
			}
		}

		db.Start()
		deadline := time.Now().Add(30 * time.Second)
		for s.Ping(ctx) != nil {
			if time.Now().After(deadline) {
				t.Fatalf("%s stop: the store does not answer 30s after the database started again", mode)
			}
			time.Sleep(20 * time.Millisecond)
		}
		for n := range 10 {
			if err := put(fmt.Sprintf("asset/after-%d-%d", i, n)); err != nil {
				t.Fatalf("%s stop: write %d once the database answers again: %v", mode, n, err)
			}
		}
		if !has(committed) {
			t.Errorf("%s stop: a write committed before the stop is gone", mode)
		}
		if has(inFlight) {
			t.Errorf("%s stop: the transaction cut off by the stop was committed, though it failed", mode)
		}
	}
}
