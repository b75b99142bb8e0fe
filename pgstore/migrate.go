package pgstore

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migration is one embedded, numbered schema change.
type migration struct {
	version int
	name    string
	sql     string // with {schema} still in it
}

// migrations are the embedded schema changes in order. Files are named
// NNNN_what.sql; a file once released is never edited, only followed.
var migrations = mustLoadMigrations()

// SchemaVersion is the schema version this build needs.
var SchemaVersion = migrations[len(migrations)-1].version

func mustLoadMigrations() []migration {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		panic(err)
	}
	var out []migration
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			panic("pgstore: migration file " + e.Name() + " is not named NNNN_what.sql")
		}
		b, err := migrationFiles.ReadFile(path.Join("migrations", e.Name()))
		if err != nil {
			panic(err)
		}
		out = append(out, migration{version: v, name: e.Name(), sql: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	for i, m := range out {
		if m.version != i+1 {
			panic(fmt.Sprintf("pgstore: migration %s: version %d, want %d", m.name, m.version, i+1))
		}
	}
	return out
}

// DefaultSchema is the PostgreSQL schema the tables live in unless
// configured otherwise.
const DefaultSchema = "holdfast"

// schemaName is what a schema name may be: an unquoted PostgreSQL
// identifier, so that it means the same quoted or not.
var schemaName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

func validateSchema(schema string) error {
	if !schemaName.MatchString(schema) {
		return fmt.Errorf("pgstore: schema %q: want 1-63 lower-case letters, digits and underscores, not starting with a digit", schema)
	}
	return nil
}

// Migrate creates or upgrades holdfast's tables in schema (DefaultSchema
// when empty), applying every embedded migration not applied yet, each in
// its own transaction. It is idempotent, and safe when several servers
// run it at once: a transaction-scoped advisory lock lets one migrate
// while the others wait and then find nothing left to do.
func Migrate(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	if schema == "" {
		schema = DefaultSchema
	}
	if err := validateSchema(schema); err != nil {
		return err
	}
	for _, m := range migrations {
		if err := apply(ctx, pool, schema, m); err != nil {
			return classify(fmt.Errorf("pgstore: migration %s: %w", m.name, err))
		}
	}
	return nil
}

func apply(ctx context.Context, pool *pgxpool.Pool, schema string, m migration) error {
	q := quote(schema)
	return pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lockID(schema, classMigrate, "")); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+q); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+q+`.schema_migrations (
			version    integer PRIMARY KEY,
			name       text NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
			return err
		}
		var done bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT FROM `+q+`.schema_migrations WHERE version = $1)`, m.version).Scan(&done); err != nil {
			return err
		}
		if done {
			return nil
		}
		if _, err := tx.Exec(ctx, strings.ReplaceAll(m.sql, "{schema}", q)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO `+q+`.schema_migrations (version, name) VALUES ($1, $2)`, m.version, m.name)
		return err
	})
}

// ErrNotMigrated is returned (wrapped) by New when the schema is missing
// or older than this build.
var ErrNotMigrated = errors.New("schema not migrated")

// checkVersion refuses a schema that is not at this build's version.
func checkVersion(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	var v *int
	err := pool.QueryRow(ctx, `SELECT max(version) FROM `+quote(schema)+`.schema_migrations`).Scan(&v)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "42P01" || pgErr.Code == "3F000") { // undefined table or schema
		return fmt.Errorf("pgstore: schema %q has no holdfast tables: %w; run `holdfast migrate --schema %s` (or pgstore.Migrate) first", schema, ErrNotMigrated, schema)
	}
	if err != nil {
		return classify(fmt.Errorf("pgstore: read schema version: %w", err))
	}
	switch {
	case v == nil || *v < SchemaVersion:
		have := 0
		if v != nil {
			have = *v
		}
		return fmt.Errorf("pgstore: schema %q is at version %d, this build needs %d: %w; run `holdfast migrate --schema %s` (or pgstore.Migrate) first", schema, have, SchemaVersion, ErrNotMigrated, schema)
	case *v > SchemaVersion:
		return fmt.Errorf("pgstore: schema %q is at version %d, newer than this build knows (%d); upgrade holdfast", schema, *v, SchemaVersion)
	}
	return nil
}

func quote(ident string) string { return pgx.Identifier{ident}.Sanitize() }
