package pgstore_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/holdfast/holdfast/pgstore"
)

func TestNewRefusesAnUnmigratedSchema(t *testing.T) {
	t.Parallel()
	pool := testPool(t)
	_, err := pgstore.New(t.Context(), pool, pgstore.Config{Schema: "hf_test_never_migrated", Logger: quiet})
	if !errors.Is(err, pgstore.ErrNotMigrated) {
		t.Fatalf("New on a missing schema = %v, want ErrNotMigrated", err)
	}
	if !strings.Contains(err.Error(), "run `holdfast migrate --schema hf_test_never_migrated` (or pgstore.Migrate) first") {
		t.Fatalf("error %q does not name the command to run, with the schema", err)
	}

	// A schema whose version is behind the build is refused the same way.
	schema := newSchema(t, pool)
	if _, err := pool.Exec(t.Context(), `DELETE FROM `+schema+`.schema_migrations WHERE version = $1`, pgstore.SchemaVersion); err != nil {
		t.Fatal(err)
	}
	if _, err := pgstore.New(t.Context(), pool, pgstore.Config{Schema: schema, Logger: quiet}); !errors.Is(err, pgstore.ErrNotMigrated) {
		t.Fatalf("New on an old schema = %v, want ErrNotMigrated", err)
	}
}

func TestMigrateIsIdempotentAndSafeConcurrently(t *testing.T) {
	t.Parallel()
	pool := testPool(t)
	schema := newSchema(t, pool) // migrated once already

	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() { errs <- pgstore.Migrate(t.Context(), pool, schema) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent Migrate: %v", err)
		}
	}
	var n, v int
	if err := pool.QueryRow(t.Context(), `SELECT count(*), max(version) FROM `+schema+`.schema_migrations`).Scan(&n, &v); err != nil {
		t.Fatal(err)
	}
	if n != pgstore.SchemaVersion || v != pgstore.SchemaVersion {
		t.Fatalf("schema_migrations has %d rows up to version %d, want %d", n, v, pgstore.SchemaVersion)
	}
	open(t, pool, schema, nil)
}

func TestMigrateOnAFreshSchemaFromManyNodes(t *testing.T) {
	t.Parallel()
	pool := testPool(t)
	schema := randomSchema()
	t.Cleanup(func() { pool.Exec(context.Background(), `DROP SCHEMA IF EXISTS `+schema+` CASCADE`) })
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() { errs <- pgstore.Migrate(t.Context(), pool, schema) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("Migrate racing on a new schema: %v", err)
		}
	}
	open(t, pool, schema, nil)
}

func TestSchemaNamesAreValidated(t *testing.T) {
	t.Parallel()
	pool := testPool(t)
	for _, bad := range []string{"Holdfast", "hold-fast", `x"; DROP SCHEMA public; --`, "1st", strings.Repeat("a", 64)} {
		if err := pgstore.Migrate(t.Context(), pool, bad); err == nil || !strings.Contains(err.Error(), "schema") {
			t.Errorf("Migrate(%q) = %v, want a refusal of the name", bad, err)
		}
		if _, err := pgstore.New(t.Context(), pool, pgstore.Config{Schema: bad}); err == nil {
			t.Errorf("New(%q) succeeded", bad)
		}
	}
}
