package pgstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast/holdfast/internal/pgtest"
	"github.com/holdfast/holdfast/internal/tcpproxy"
	"github.com/holdfast/holdfast/pgstore"
	"github.com/holdfast/holdfast/store"
)

// When the database cannot be reached, every call fails with
// store.ErrUnavailable, nothing is decided, and the store serves again by
// itself once the database is back.
func TestUnreachableDatabaseIsUnavailable(t *testing.T) {
	t.Parallel()
	p, viaProxy, schema := behindProxy(t)
	s := open(t, viaProxy, schema, nil)

	write := func() error {
		return s.Update(t.Context(), func(tx store.Tx) error {
			return tx.PutAggregate(store.Aggregate{Member: "asset/9", Root: "lease/3"})
		})
	}
	if err := write(); err != nil {
		t.Fatalf("Update through the proxy: %v", err)
	}

	p.Cut()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for name, err := range map[string]error{
		"Ping":   s.Ping(ctx),
		"Update": write(),
		"View":   s.View(ctx, func(tx store.ReadTx) error { _, _, err := tx.Aggregate("asset/9"); return err }),
	} {
		if !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("%s with the database gone = %v, want ErrUnavailable", name, err)
		}
	}
	if _, err := pgstore.New(ctx, viaProxy, pgstore.Config{Schema: schema}); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("New with the database gone = %v, want ErrUnavailable", err)
	}

	p.Restore()
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping once the database is back: %v", err)
	}
	if err := write(); err != nil {
		t.Fatalf("Update once the database is back: %v", err)
	}
}

// When the database stops answering without closing its connections (a
// network partition, a hung host), every call fails with
// store.ErrUnavailable once Config.Timeout has passed, not when the
// caller gives up, and the store serves again once the database answers.
func TestHungDatabaseIsUnavailable(t *testing.T) {
	t.Parallel()
	p, viaProxy, schema := behindProxy(t)
	s, err := pgstore.New(t.Context(), viaProxy, pgstore.Config{Schema: schema, Logger: quiet, Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	write := func(ctx context.Context) error {
		return s.Update(ctx, func(tx store.Tx) error {
			return tx.PutAggregate(store.Aggregate{Member: "asset/9", Root: "lease/3"})
		})
	}
	read := func(ctx context.Context) error {
		return s.View(ctx, func(tx store.ReadTx) error { _, _, err := tx.Aggregate("asset/9"); return err })
	}
	// Before and after the stall the store answers, but each call has
	// only the short bound, which a busy machine can take to connect or
	// commit: those calls get a few tries.
	eventually := func(what string, call func(context.Context) error) {
		t.Helper()
		var err error
		for range 20 {
			if err = call(t.Context()); err == nil {
				return
			}
		}
		t.Fatalf("%s: %v", what, err)
	}
	eventually("Update through the proxy", write)

	p.Stall()
	defer p.Restore() // before viaProxy.Close, should the test fail here
	// The callers would wait far longer: the store's own bound must end
	// their calls, and say so.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for name, call := range map[string]func(context.Context) error{"Update": write, "View": read} {
		err := call(ctx)
		if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), "did not answer within 300ms") {
			t.Errorf("%s with the database hung = %v, want ErrUnavailable saying how long it waited", name, err)
		}
		if ctx.Err() != nil {
			t.Fatalf("%s returned only when its caller gave up", name)
		}
	}

	p.Restore()
	eventually("Update once the database answers again", write)
	eventually("View once the database answers again", read)
}

func TestClosedStoreIsUnavailable(t *testing.T) {
	t.Parallel()
	pool := testPool(t)
	s := open(t, pool, newSchema(t, pool), nil)
	s.Close()
	ctx := t.Context()
	for name, err := range map[string]error{
		"Ping":   s.Ping(ctx),
		"Update": s.Update(ctx, func(store.Tx) error { return nil }),
		"View":   s.View(ctx, func(store.ReadTx) error { return nil }),
	} {
		if !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("%s after Close = %v, want ErrUnavailable", name, err)
		}
	}
}

// behindProxy makes a schema and a pool whose connections go through a
// proxy the test can cut or stall; the pool closes when the test ends.
func behindProxy(t *testing.T) (*tcpproxy.Proxy, *pgxpool.Pool, string) {
	t.Helper()
	schema := newSchema(t, testPool(t))
	p, dsn := pgtest.BehindProxy(t, pgtest.SharedDSN(t))
	pool, err := pgxpool.New(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close) // before the proxy's own cleanup cuts it
	return p, pool, schema
}
