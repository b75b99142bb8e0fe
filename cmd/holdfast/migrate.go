package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/holdfast/holdfast/internal/config"
	"github.com/holdfast/holdfast/pgstore"
)

const migrateHelp = `
Usage: holdfast migrate --store postgres://… [--schema holdfast]

Creates or upgrades holdfast's tables in a PostgreSQL schema, applying
every migration this build knows and has not applied yet, then prints the
schema's version. Running it again changes nothing; several at once are
safe. Run it before "holdfast serve --store postgres://…" (or start the
server with --migrate-on-start).

Example:
  holdfast migrate --store postgres://holdfast@db.internal/app --schema holdfast
`

type migrateCommand struct {
	stdout, stderr io.Writer
}

func newMigrateCommand(stdout, stderr io.Writer) *migrateCommand {
	return &migrateCommand{stdout: stdout, stderr: stderr}
}

func (c *migrateCommand) Run(ctx context.Context, args []string) error {
	fs := newFlagSet("migrate", migrateHelp)
	dsn := fs.String("store", os.Getenv("HOLDFAST_STORE"), "PostgreSQL `URL` (env HOLDFAST_STORE)")
	schema := fs.String("schema", envOr("HOLDFAST_SCHEMA", config.DefaultSchema), "PostgreSQL `schema` of holdfast's tables (env HOLDFAST_SCHEMA)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("migrate: unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if !strings.HasPrefix(*dsn, "postgres://") && !strings.HasPrefix(*dsn, "postgresql://") {
		return usagef("migrate: --store must be a postgres:// URL; other stores need no migration")
	}
	pool, err := connectPostgres(ctx, *dsn)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := pgstore.Migrate(ctx, pool, *schema); err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "schema %s is at version %d\n", *schema, pgstore.SchemaVersion)
	return nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
