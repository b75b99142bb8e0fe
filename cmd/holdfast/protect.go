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

const protectHelp = `
Usage: holdfast protect --store postgres://… --table T --key EXPR [--schema holdfast]

Installs a trigger on table T (in the application's database, beside
holdfast's schema) so that an UPDATE or DELETE of a row whose lock key
another session holds fails with SQLSTATE 55P03 and a message naming the
holder, since and until — from psql, a bulk UPDATE or a background job
alike. EXPR is an SQL expression over the row's columns giving its key.
The holder's own transactions pass once they declare the session:
SET LOCAL holdfast.session = '…' (pgstore.AssertLock does it). Running it
again replaces the key expression; "holdfast unprotect" removes it.

Example:
  holdfast protect --store postgres://app@db.internal/app --table policies --key "'policy/' || id"
`

const unprotectHelp = `
Usage: holdfast unprotect --store postgres://… --table T

Removes the trigger "holdfast protect" installed on table T. Removing it
from a table that has none is not an error.

Example:
  holdfast unprotect --store postgres://app@db.internal/app --table policies
`

type protectCommand struct {
	stdout, stderr io.Writer
	remove         bool
}

func newProtectCommand(stdout, stderr io.Writer) *protectCommand {
	return &protectCommand{stdout: stdout, stderr: stderr}
}

func newUnprotectCommand(stdout, stderr io.Writer) *protectCommand {
	return &protectCommand{stdout: stdout, stderr: stderr, remove: true}
}

func (c *protectCommand) Run(ctx context.Context, args []string) error {
	name, help := "protect", protectHelp
	if c.remove {
		name, help = "unprotect", unprotectHelp
	}
	fs := newFlagSet(name, help)
	dsn := fs.String("store", os.Getenv("HOLDFAST_STORE"), "PostgreSQL `URL` (env HOLDFAST_STORE)")
	table := fs.String("table", "", "the `table` to protect, schema-qualified if need be")
	var schema, key *string
	if !c.remove {
		schema = fs.String("schema", envOr("HOLDFAST_SCHEMA", config.DefaultSchema), "PostgreSQL `schema` of holdfast's tables (env HOLDFAST_SCHEMA)")
		key = fs.String("key", "", "SQL `expression` over the row's columns giving its lock key")
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return usagef("%s: unexpected arguments: %s", name, strings.Join(fs.Args(), " "))
	case !strings.HasPrefix(*dsn, "postgres://") && !strings.HasPrefix(*dsn, "postgresql://"):
		return usagef("%s: --store must be a postgres:// URL", name)
	case *table == "":
		return usagef("%s: --table is required", name)
	case !c.remove && strings.TrimSpace(*key) == "":
		return usagef("protect: --key is required, e.g. --key \"'policy/' || id\"")
	}
	pool, err := connectPostgres(ctx, *dsn)
	if err != nil {
		return err
	}
	defer pool.Close()
	if c.remove {
		if err := pgstore.Unprotect(ctx, pool, *table); err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "table %s is no longer protected\n", *table)
		return nil
	}
	if err := pgstore.Protect(ctx, pool, *schema, *table, *key); err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "table %s is protected: a row whose key (%s) another session holds cannot be updated or deleted\n", *table, *key)
	return nil
}
