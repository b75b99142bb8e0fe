package pgstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"

	"github.com/holdfast/holdfast/store"
)

// Servers sharing a schema tell each other of their commits with
// PostgreSQL's NOTIFY, on a channel named like the schema: a store with
// Config.Notify set sends, in each transaction that appends audit
// entries, "INSTANCE ID,ID,…", and Listen on every other store reads
// those entries back. NOTIFY is delivered only once its transaction has
// committed, and never if it rolled back, so a listener hears of exactly
// the committed entries. The payload carries ids, not entries, because a
// notification holds at most 8000 bytes.

// notifyPayloadMax keeps each payload well under PostgreSQL's 8000 bytes.
const notifyPayloadMax = 7000

func newInstanceID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// queueNotify queues the notifications of the audit entries this
// transaction appended, in as many payloads as they need, after its
// COMMIT, in the same round trip.
//
// Not inside the transaction: a transaction that notifies holds a lock
// that every notifying transaction of the database takes at commit, from
// before its commit record until the record is flushed, so notifying
// commits would each wait for the previous one's disk flush instead of
// sharing it. After the COMMIT, the notifications form an implicit
// transaction of their own (committed at the end of the round trip) that
// does not wait for the disk: its lock is held for a moment, and the
// entries it announces are durable already. A crash of the database may
// lose it, as it loses the listeners' connections. If the COMMIT fails,
// PostgreSQL skips the statements after it; and listeners read the
// entries back by id, so a notification of entries that were never
// committed would find none.
func (t *tx) queueNotify(b *pgx.Batch) {
	if len(t.notified) == 0 {
		return
	}
	var p strings.Builder
	flush := func() {
		b.Queue(`SELECT set_config('synchronous_commit', 'off', true), pg_notify($1, $2)`, t.s.schema, p.String())
		p.Reset()
	}
	for _, id := range t.notified {
		if p.Len() > notifyPayloadMax {
			flush()
		}
		if p.Len() == 0 {
			p.WriteString(t.s.instance)
			p.WriteByte(' ')
		} else {
			p.WriteByte(',')
		}
		p.WriteString(strconv.FormatInt(id, 10))
	}
	flush()
}

// listenRetry is how long Listen waits before connecting again after
// losing its connection.
const listenRetry = time.Second

// listenProbe is how long Listen waits for a notification before it asks
// the database whether its connection still answers. Waiting only reads:
// a connection to a host gone silent (a partition, a power loss, a
// failover by DNS or a load balancer that drops its packets) would wait
// for TCP's keepalive to give up, two and a half minutes with Go's
// defaults (15s idle, then 9 probes 15s apart), and one to a host whose kernel still answers but whose
// PostgreSQL does not would wait for ever, while other servers' commits
// are not streamed.
const listenProbe = 30 * time.Second

// Listen calls fn with the audit entries that other stores on this
// schema commit (those with Config.Notify set), in id order per
// transaction, until ctx ends; it then returns ctx's error. It uses a
// connection of its own, outside the pool, and connects again when it
// loses it, or when the database does not answer a ping on it within
// Config.Timeout (2s if that is negative) after 30s without a
// notification: entries committed
// while it was disconnected are not delivered, so a subscriber that must
// see everything resumes from the audit log. fn runs on Listen's
// goroutine and should not block long.
func (s *Store) Listen(ctx context.Context, fn func([]store.AuditEntry)) error {
	for {
		err := s.listenOnce(ctx, fn)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		s.log.Warn("pgstore: lost the connection that hears other servers' commits; reconnecting", "error", err, "retry_in", listenRetry.String())
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(listenRetry):
		}
	}
}

func (s *Store) listenOnce(ctx context.Context, fn func([]store.AuditEntry)) error {
	conn, err := s.listenConn(ctx)
	if err != nil {
		return err
	}
	defer closeListenConn(ctx, conn)
	for {
		n, err := s.waitForNotification(ctx, conn)
		if err != nil {
			return err
		}
		instance, list, ok := strings.Cut(n.Payload, " ")
		if !ok || instance == s.instance {
			continue // this store's own commits were published by its caller
		}
		ids, err := parseIDs(list)
		if err != nil {
			s.log.Warn("pgstore: listen: ignoring a notification that is not holdfast's", "payload", n.Payload, "error", err)
			continue
		}
		readCtx, cancel := s.bound(ctx)
		entries, err := s.auditByID(readCtx, conn, ids)
		err = s.timeoutOf(readCtx, err)
		cancel()
		if err != nil {
			return err
		}
		if len(entries) > 0 {
			fn(entries)
		}
	}
}

// listenConn connects and listens, within the store's bound on a
// transaction, which counts taking a new connection too.
func (s *Store) listenConn(ctx context.Context) (*pgx.Conn, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	cfg := s.pool.Config().ConnConfig.Copy()
	// pgx's own ways, whatever the pool was given: a deadline, not a
	// cancel request, ends each wait for a notification (a cancel request
	// could land on the ping after it), and pgx keeps the notifications
	// for WaitForNotification.
	cfg.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.DeadlineContextWatcherHandler{Conn: c.Conn()}
	}
	cfg.OnNotification = nil
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, s.timeoutOf(ctx, fmt.Errorf("pgstore: listen: connect: %w", err))
	}
	// The listener reads entries outside any of the store's transactions,
	// so it turns JIT off for its whole session (docs/POSTGRES.md, "JIT"):
	// with SET rather than a startup parameter, which connection poolers
	// may refuse.
	_, err = conn.Exec(ctx, `SET jit = off`)
	if err == nil {
		_, err = conn.Exec(ctx, `LISTEN `+quote(s.schema))
	}
	if err != nil {
		closeListenConn(ctx, conn)
		return nil, s.timeoutOf(ctx, fmt.Errorf("pgstore: listen: %w", err))
	}
	return conn, nil
}

// closeListenConn closes conn, within pingTimeout even after ctx ended.
func closeListenConn(ctx context.Context, conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pingTimeout)
	defer cancel()
	conn.Close(ctx)
}

// waitForNotification waits for the next notification on conn. Each
// s.probeEvery without one, it pings the database on conn, and fails if
// that takes longer than the store gives a transaction (pingTimeout when
// it gives no bound). Notifications
// that arrive meanwhile are kept by pgx for the next wait.
func (s *Store) waitForNotification(ctx context.Context, conn *pgx.Conn) (*pgconn.Notification, error) {
	for {
		waitCtx, cancel := context.WithTimeout(ctx, s.probeEvery)
		n, err := conn.WaitForNotification(waitCtx)
		quiet := timedOut(err) && ctx.Err() == nil && errors.Is(waitCtx.Err(), context.DeadlineExceeded)
		cancel()
		if err == nil {
			return n, nil
		}
		if !quiet {
			return nil, fmt.Errorf("pgstore: listen: %w", err)
		}
		// Bounded even when transactions are not (Config.Timeout
		// negative): else a connection that stopped answering would hold
		// the listener, hearing nothing, for good.
		bound := s.timeout
		if bound <= 0 {
			bound = pingTimeout
		}
		pingCtx, cancel := context.WithTimeout(ctx, bound)
		err = conn.Ping(pingCtx)
		expired := errors.Is(pingCtx.Err(), context.DeadlineExceeded) && ctx.Err() == nil
		cancel()
		if err != nil {
			if expired && timedOut(err) {
				return nil, fmt.Errorf("pgstore: listen: heard nothing for %s, and PostgreSQL did not answer a ping within %s on that connection: %w", s.probeEvery, bound, err)
			}
			return nil, fmt.Errorf("pgstore: listen: ping: %w", err)
		}
	}
}

func parseIDs(list string) ([]int64, error) {
	var ids []int64
	for f := range strings.SplitSeq(list, ",") {
		id, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		return nil, errors.New("no ids")
	}
	return ids, nil
}

// auditByID reads the entries with these ids; one pruned meanwhile is
// left out.
func (s *Store) auditByID(ctx context.Context, conn *pgx.Conn, ids []int64) ([]store.AuditEntry, error) {
	rows, err := conn.Query(ctx, `SELECT id, at, event, `+lockCols+`, actor, reason FROM `+s.q.schema+`.audit
		WHERE id = ANY($1) ORDER BY id`, ids)
	if err != nil {
		return nil, fmt.Errorf("pgstore: listen: read entries: %w", err)
	}
	defer rows.Close()
	var out []store.AuditEntry
	for rows.Next() {
		e, err := scanAudit(rows)
		if err != nil {
			return nil, fmt.Errorf("pgstore: listen: read entries: %w", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: listen: read entries: %w", err)
	}
	return out, nil
}
