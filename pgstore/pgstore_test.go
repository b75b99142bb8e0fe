package pgstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/holdfast/holdfast/internal/pgtest"
	"github.com/holdfast/holdfast/pgstore"
	"github.com/holdfast/holdfast/store"
	"github.com/holdfast/holdfast/store/storetest"
)

// The tests run against the PostgreSQL that HOLDFAST_TEST_POSTGRES names
// (a DSN such as postgres://postgres@127.0.0.1:5432/test). Every test gets
// a schema of its own, dropped when it ends, so tests run in parallel on
// one database.

var shared struct {
	once sync.Once
	pool *pgxpool.Pool
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.pool != nil {
		shared.pool.Close()
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// testPool returns the pool shared by every test, or skips the test when
// no database is configured (fails it under CI=true).
func testPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	dsn := pgtest.SharedDSN(t)
	shared.once.Do(func() {
		cfg, err := pgxpool.ParseConfig(dsn)
		if err != nil {
			shared.err = err
			return
		}
		cfg.MaxConns = 64 // one per benchmark goroutine
		shared.pool, shared.err = pgxpool.NewWithConfig(context.Background(), cfg)
	})
	if shared.err != nil {
		t.Fatalf("HOLDFAST_TEST_POSTGRES: %v", shared.err)
	}
	return shared.pool
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// newSchema migrates a fresh schema with a random name and drops it when
// t ends.
func newSchema(t testing.TB, pool *pgxpool.Pool) string {
	t.Helper()
	return newSchemaAt(t, pool, pgstore.SchemaVersion)
}

// newSchemaAt makes a schema as an older build's migrations left it.
func newSchemaAt(t testing.TB, pool *pgxpool.Pool, version int) string {
	t.Helper()
	schema := randomSchema()
	if err := pgstore.MigrateTo(t.Context(), pool, schema, version); err != nil {
		t.Fatalf("Migrate to version %d: %v", version, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := pool.Exec(ctx, `DROP SCHEMA `+schema+` CASCADE`); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return schema
}

func randomSchema() string {
	var b [6]byte
	rand.Read(b[:])
	return "hf_test_" + hex.EncodeToString(b[:])
}

func open(t testing.TB, pool *pgxpool.Pool, schema string, now func() time.Time) *pgstore.Store {
	t.Helper()
	s, err := pgstore.New(t.Context(), pool, pgstore.Config{Schema: schema, Now: now, Logger: quiet})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// harness opens each store on a schema of its own; Reopen makes a new
// Store over the same schema, as a restarted server would.
func harness() storetest.Harness {
	var schemas sync.Map // *pgstore.Store → schema
	return storetest.Harness{
		Open: func(t testing.TB, now func() time.Time) store.Store {
			pool := testPool(t)
			schema := newSchema(t, pool)
			s := open(t, pool, schema, now)
			schemas.Store(s, schema)
			return s
		},
		Reopen: func(t testing.TB, old store.Store, now func() time.Time) store.Store {
			schema, _ := schemas.Load(old)
			if err := old.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			s := open(t, testPool(t), schema.(string), now)
			schemas.Store(s, schema)
			return s
		},
	}
}

func TestConformance(t *testing.T) {
	t.Parallel()
	testPool(t)
	storetest.Run(t, harness())
}
