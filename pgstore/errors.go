package pgstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/puddle/v2"

	"github.com/holdfast/holdfast/store"
)

// classify is the one place that decides what a failure means to the
// lock manager. Everything that says "the database cannot answer now" —
// a lost or refused connection, a timeout, a server shutting down or
// starting up, a read-only server, exhausted resources — becomes
// store.ErrUnavailable, which the Manager answers with 503 and never with
// a decision. Other errors (a bug in a statement, say) are returned as
// they are.
func classify(err error) error {
	if err == nil || errors.Is(err, store.ErrUnavailable) {
		return err
	}
	if unavailable(err) {
		return fmt.Errorf("pgstore: %w: %w", store.ErrUnavailable, err)
	}
	return err
}

func unavailable(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code[:2] {
		case "08", // connection exception
			"53", // insufficient resources: too many connections, out of memory or lock slots
			"57", // operator intervention: admin shutdown, crash shutdown, starting up, statement timeout
			"58": // system error: I/O
			return true
		}
		switch pgErr.Code {
		case "25006", // read_only_sql_transaction: a standby, or a primary turned read-only
			"55P03", "40001", "40P01": // collisions that outlasted the retries
			return true
		}
		return false
	}
	var netErr net.Error
	var connectErr *pgconn.ConnectError
	return errors.As(err, &netErr) || errors.As(err, &connectErr) || pgconn.Timeout(err) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, puddle.ErrClosedPool)
}

// timedOut reports whether err is a timeout: of a context, or of the
// connection's deadline, which pgx sets when a context ends.
func timedOut(err error) bool {
	var netErr net.Error
	return errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err) || errors.As(err, &netErr) && netErr.Timeout()
}

// isRetry reports whether the transaction failed only because it collided
// with another one, so that running it again may succeed.
func isRetry(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	switch pgErr.Code {
	case codeLockOrder, "40001", "40P01": // serialization_failure, deadlock_detected
		return true
	}
	return false
}

// codeLockOrder is lock_not_available: take_locks gave up waiting for a
// lock out of order (or a lock_timeout configured on the database ran
// out).
const codeLockOrder = "55P03"

func isLockOrder(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == codeLockOrder
}
