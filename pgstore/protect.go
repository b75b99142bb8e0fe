package pgstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Execer runs a statement: a *pgxpool.Pool, a *pgx.Conn or a pgx.Tx.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Trigger names, one of each per table.
const (
	protectTrigger = "holdfast_protect"
	fenceTrigger   = "holdfast_fence"
)

// Protect installs a trigger on table so that an UPDATE or DELETE of a row
// whose key another session holds (the key, or an ancestor of it, by the
// database clock) fails with SQLSTATE 55P03 (lock_not_available) and a
// message naming the holder, since and until. keyExpr is an SQL
// expression over the row's columns giving its lock key, such as
// `'policy/' || id`. A transaction of the holder passes once it has
// declared its session (AssertLock does, or SET LOCAL holdfast.session =
// '…'). table may be schema-qualified ("app.policies"). Installing it
// again replaces the key expression.
func Protect(ctx context.Context, db Execer, schema, table, keyExpr string) error {
	if schema == "" {
		schema = DefaultSchema
	}
	if err := validateSchema(schema); err != nil {
		return err
	}
	if strings.TrimSpace(keyExpr) == "" {
		return fmt.Errorf("pgstore: protect %s: the key expression is empty", table)
	}
	t := quoteTable(table)
	// Check the expression against the table now rather than at the first
	// UPDATE; the trigger runs it as written.
	check := `SELECT (` + keyExpr + `)::text FROM ` + t + ` AS row LIMIT 0`
	if _, err := db.Exec(ctx, check); err != nil {
		return fmt.Errorf("pgstore: protect %s: key expression %q: %w", table, keyExpr, err)
	}
	ddl := `CREATE OR REPLACE TRIGGER ` + protectTrigger + ` BEFORE UPDATE OR DELETE ON ` + t +
		` FOR EACH ROW EXECUTE FUNCTION ` + quote(schema) + `.protect_row(` + literal(keyExpr) + `)`
	if _, err := db.Exec(ctx, ddl); err != nil {
		return fmt.Errorf("pgstore: protect %s: %w", table, err)
	}
	return nil
}

// Unprotect removes Protect's trigger from table; it is not an error if
// there is none.
func Unprotect(ctx context.Context, db Execer, table string) error {
	return dropTrigger(ctx, db, protectTrigger, table)
}

// Fence installs a trigger on table so that an UPDATE which lowers column,
// the fencing token of the row's last guarded write, fails: the write was
// made under an older grant than one that has written since. Writers set
// column to their lock's token; GuardError turns the refusal into a
// *holdfast.StaleTokenError. An UPDATE that leaves column as it is passes
// (protect the table to refuse writes without a lock).
func Fence(ctx context.Context, db Execer, schema, table, column string) error {
	if schema == "" {
		schema = DefaultSchema
	}
	if err := validateSchema(schema); err != nil {
		return err
	}
	t := quoteTable(table)
	if _, err := db.Exec(ctx, `SELECT `+quote(column)+`::bigint FROM `+t+` LIMIT 0`); err != nil {
		return fmt.Errorf("pgstore: fence %s: column %q: %w", table, column, err)
	}
	ddl := `CREATE OR REPLACE TRIGGER ` + fenceTrigger + ` BEFORE UPDATE ON ` + t +
		` FOR EACH ROW EXECUTE FUNCTION ` + quote(schema) + `.fence_row(` + literal(column) + `)`
	if _, err := db.Exec(ctx, ddl); err != nil {
		return fmt.Errorf("pgstore: fence %s: %w", table, err)
	}
	return nil
}

// Unfence removes Fence's trigger from table.
func Unfence(ctx context.Context, db Execer, table string) error {
	return dropTrigger(ctx, db, fenceTrigger, table)
}

func dropTrigger(ctx context.Context, db Execer, trigger, table string) error {
	if _, err := db.Exec(ctx, `DROP TRIGGER IF EXISTS `+trigger+` ON `+quoteTable(table)); err != nil {
		return fmt.Errorf("pgstore: drop %s from %s: %w", trigger, table, err)
	}
	return nil
}

// quoteTable quotes a table name, schema-qualified or not.
func quoteTable(table string) string {
	return pgx.Identifier(strings.Split(table, ".")).Sanitize()
}

// literal quotes s as an SQL string literal (standard_conforming_strings
// on, as it is by default).
func literal(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}
