package pgstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/holdfast/holdfast"
)

// Guarded writes: the lock check runs inside the application's own
// transaction, in the same database as the lock table, so that the write
// and the proof that its lock is still held commit together.
//
// The check (the SQL function check_lock, migration 0002) takes the
// key's advisory lock shared. pgstore's writers take that lock exclusive
// before they read or change the key's lock rows, so a force-release,
// takeover, expiry sweep or new grant of the key waits until the guarded
// transaction ends: what the check found stays true until commit.

// AssertLock checks, inside tx, that session holds key (resolved through
// aggregates) under token (any token when 0), by the database clock, and
// keeps it held until tx ends. It also declares the session for protected
// tables (SET LOCAL holdfast.session). schema is the holdfast schema
// (DefaultSchema when empty). A refusal is a *holdfast.LockLostError with
// the reason, or a *holdfast.StaleTokenError; tx is still usable then,
// but should be rolled back.
func AssertLock(ctx context.Context, tx pgx.Tx, schema, key, session string, token uint64) (*holdfast.Lock, error) {
	q, err := assertQuery(schema)
	if err != nil {
		return nil, err
	}
	var c lockCheck
	if err := c.scan(tx.QueryRow(ctx, q, key, session, int64(token))); err != nil {
		return nil, fmt.Errorf("pgstore: assert lock %s: %w", key, err)
	}
	return c.result(key, session)
}

// AssertLockStd is AssertLock for a database/sql transaction on the pgx
// stdlib driver (or any driver speaking to PostgreSQL).
func AssertLockStd(ctx context.Context, tx *sql.Tx, schema, key, session string, token uint64) (*holdfast.Lock, error) {
	q, err := assertQuery(schema)
	if err != nil {
		return nil, err
	}
	var c lockCheck
	if err := c.scan(tx.QueryRowContext(ctx, q, key, session, int64(token))); err != nil {
		return nil, fmt.Errorf("pgstore: assert lock %s: %w", key, err)
	}
	return c.result(key, session)
}

func assertQuery(schema string) (string, error) {
	if schema == "" {
		schema = DefaultSchema
	}
	if err := validateSchema(schema); err != nil {
		return "", err
	}
	// One round trip: the check, and the session declared only if it
	// holds the key.
	return `SELECT c.status, c.message, c.reason, c.lock_key, c.lock_user, c.lock_name, c.lock_shared,
		c.lock_token, c.lock_acquired_at, c.lock_expires_at, c.lock_note, c.actor, c.force_reason,
		CASE WHEN c.status = 'held' THEN set_config('holdfast.session', $2, true) END
	FROM ` + quote(schema) + `.check_lock($1, $2, $3) AS c`, nil
}

// lockCheck is one row of check_lock.
type lockCheck struct {
	status, message, lockKey     string
	reason, user, name, note     *string
	actor, forceReason, declared *string
	shared                       *bool
	token                        *int64
	acquiredAt, expiresAt        *time.Time
}

type scanner interface{ Scan(dest ...any) error }

func (c *lockCheck) scan(row scanner) error {
	return row.Scan(&c.status, &c.message, &c.reason, &c.lockKey, &c.user, &c.name, &c.shared,
		&c.token, &c.acquiredAt, &c.expiresAt, &c.note, &c.actor, &c.forceReason, &c.declared)
}

// result turns the check into the lock or the refusal.
func (c *lockCheck) result(requested, session string) (*holdfast.Lock, error) {
	var l *holdfast.Lock
	if c.token != nil {
		mode := holdfast.Exclusive
		if deref(c.shared) {
			mode = holdfast.Shared
		}
		l = &holdfast.Lock{
			Key: c.lockKey, RequestedKey: requested, Mode: mode,
			Owner:      holdfast.Owner{Session: session, User: deref(c.user), Name: deref(c.name)},
			AcquiredAt: deref(c.acquiredAt).UTC(), ExpiresAt: deref(c.expiresAt).UTC(),
			Token: uint64(*c.token), Note: deref(c.note),
		}
	}
	switch c.status {
	case "held":
		return l, nil
	case "stale":
		return nil, &holdfast.StaleTokenError{Lock: *l, Message: c.message}
	case "lost":
		return nil, &holdfast.LockLostError{Reason: holdfast.LostReason(deref(c.reason)), Lock: l,
			Actor: deref(c.actor), ForceReason: deref(c.forceReason), Message: c.message}
	}
	return nil, fmt.Errorf("pgstore: check_lock answered %q", c.status)
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// Constraint names the guard functions raise with, so that their errors
// can be told apart from any other.
const (
	constraintLock    = "holdfast_lock"
	constraintFence   = "holdfast_fence"
	constraintProtect = "holdfast_protect"
)

// GuardError turns an error raised by holdfast's guards in the database —
// assert_lock, a fenced table's trigger, a protected table's trigger —
// into the lock manager's errors: *holdfast.LockLostError,
// *holdfast.StaleTokenError or *holdfast.LockedError, each wrapping the
// database error. Any other error is returned as it is. It works on the
// errors of pgx and of database/sql over the pgx stdlib driver.
func GuardError(err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return err
	}
	msg := pgErr.Message
	switch pgErr.ConstraintName {
	case constraintLock:
		if pgErr.Detail == "stale_token" {
			return &guardError{err: err, as: &holdfast.StaleTokenError{Message: msg}}
		}
		return &guardError{err: err, as: &holdfast.LockLostError{Reason: holdfast.LostReason(pgErr.Detail), Message: msg}}
	case constraintFence:
		stored, _ := strconv.ParseUint(pgErr.Detail, 10, 64)
		return &guardError{err: err, as: &holdfast.StaleTokenError{Lock: holdfast.Lock{Token: stored}, Message: msg}}
	case constraintProtect:
		return &guardError{err: err, as: &holdfast.LockedError{Message: msg}}
	}
	return err
}

// guardError is a holdfast error that keeps the database error beneath
// it, so both errors.As(err, **pgconn.PgError) and errors.Is(err,
// holdfast.ErrLocked) work.
type guardError struct {
	err error
	as  error
}

func (e *guardError) Error() string   { return e.as.Error() }
func (e *guardError) Unwrap() []error { return []error{e.as, e.err} }
