// Package pgstore is holdfast's PostgreSQL store: the lock table lives in
// a schema of a PostgreSQL database (the application's own, if it likes),
// and several holdfast servers can share it.
//
// Every Update is one READ COMMITTED transaction. Transactions that touch
// the same records serialise through transaction-scoped advisory locks
// taken in a deadlock-free way (see advisory.go), so no check-then-act race
// is possible between servers. Expiry is judged by the database's clock,
// so servers with skewed clocks agree. Fencing tokens come from a
// sequence. An acknowledged Update is committed with the database's
// durability settings (keep synchronous_commit on).
//
// The tables are created by Migrate (the `holdfast migrate` command); New
// refuses a schema that is not at this build's version.
package pgstore

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast/holdfast/store"
)

// Config configures a Store. The zero value is usable.
type Config struct {
	// Schema is the PostgreSQL schema of the tables; default "holdfast".
	Schema string
	// Now replaces the database clock. It exists for tests only (the
	// conformance suite moves a fake clock); in production the database
	// clock must decide expiry, or servers with skewed clocks disagree.
	Now func() time.Time
	// Logger receives retries and failures; default slog.Default().
	Logger *slog.Logger
	// Notify makes every transaction that appends audit entries announce
	// them to Listen on other stores over the same schema (see
	// notify.go). It costs one NOTIFY per such commit, which PostgreSQL
	// serialises across the database, so a single server leaves it off.
	Notify bool
	// Timeout bounds each transaction, from taking a connection to its
	// commit, retries included: a database that stops answering without
	// closing its connections (a network partition, a hung host) fails
	// the operation with store.ErrUnavailable after this long, instead of
	// holding its caller until the operating system gives up on the
	// connection. The time the caller's own code takes inside the
	// transaction (a Manager.Batch's fn) counts too, as does a wait for
	// locks that another server's transaction holds. The Manager also
	// fails operations that wait longer than this for their turn
	// (store.Bounded). Default DefaultTimeout; negative: only ctx bounds
	// a transaction.
	Timeout time.Duration
}

// DefaultTimeout is Config.Timeout's default: well above what any
// transaction of the store takes on a database that answers (a batch of
// a thousand keys takes milliseconds), well below what a person waits for
// before giving up on a click.
const DefaultTimeout = 5 * time.Second

// Store is the PostgreSQL store.Store. It does not own its pool.
type Store struct {
	pool   *pgxpool.Pool
	schema string
	q, rq  queries // the statements of write and of read transactions
	now    func() time.Time
	log    *slog.Logger
	closed atomic.Bool
	// notify and instance: see Config.Notify; instance tells this store's
	// notifications from others'.
	notify   bool
	instance string
	// timeout and timedOut: see Config.Timeout; timedOut is the cause of
	// a transaction's context that ran out of it.
	timeout  time.Duration
	timedOut error
	// probeEvery is how long Listen waits for a notification before it
	// pings the database (listenProbe; tests shorten it).
	probeEvery time.Duration
}

var _ store.Store = (*Store)(nil)

// New returns a store over the tables in cfg.Schema, which Migrate must
// have brought to this build's version.
func New(ctx context.Context, pool *pgxpool.Pool, cfg Config) (*Store, error) {
	if cfg.Schema == "" {
		cfg.Schema = DefaultSchema
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if err := validateSchema(cfg.Schema); err != nil {
		return nil, err
	}
	if err := checkVersion(ctx, pool, cfg.Schema); err != nil {
		return nil, err
	}
	q := newQueries(cfg.Schema)
	return &Store{
		pool:     pool,
		schema:   cfg.Schema,
		q:        q,
		rq:       q.forReads(),
		now:      cfg.Now,
		log:      cfg.Logger,
		notify:   cfg.Notify,
		instance: newInstanceID(),
		timeout:  cfg.Timeout,
		timedOut: fmt.Errorf("pgstore: %w: PostgreSQL did not answer within %s", store.ErrUnavailable, cfg.Timeout),

		probeEvery: listenProbe,
	}, nil
}

// bound gives a transaction its share of Config.Timeout.
func (s *Store) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if s.timeout < 0 {
		return ctx, func() {}
	}
	return context.WithTimeoutCause(ctx, s.timeout, s.timedOut)
}

// timeoutOf says, of a transaction's err, that it timed out because it ran
// out of Config.Timeout, rather than its caller's patience, which the
// caller knows of already.
func (s *Store) timeoutOf(ctx context.Context, err error) error {
	if err != nil && context.Cause(ctx) == s.timedOut && timedOut(err) {
		return fmt.Errorf("%w (%w)", s.timedOut, err)
	}
	return err
}

// TransactionTimeout is Config.Timeout: the Manager bounds the wait of the
// operations queued behind a transaction by it too (store.Bounded).
func (s *Store) TransactionTimeout() time.Duration { return s.timeout }

var _ store.Bounded = (*Store)(nil)

// maxAttempts bounds how often Update runs fn when transactions keep
// colliding; each collision makes the next attempt take its locks up front
// in order, so a second attempt nearly always succeeds.
const maxAttempts = 10

// Update runs fn in one READ COMMITTED transaction, again when the
// transaction collided with another (a lock taken out of order, a
// deadlock or a serialization failure), and returns once it is committed.
func (s *Store) Update(ctx context.Context, fn func(store.Tx) error) error {
	if err := s.usable(ctx); err != nil {
		return err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var learned map[int64]bool
	for attempt := 1; ; attempt++ {
		t, err := s.begin(ctx, true, learned)
		if err == nil {
			err = t.run(func() error { return fn(t) })
			if err == nil {
				err = t.commit()
			}
		}
		err = s.timeoutOf(ctx, err) // before close's ROLLBACK takes its time
		if t != nil {
			t.close()
		}
		if !isRetry(err) {
			return classify(err)
		}
		if attempt == maxAttempts {
			s.log.Warn("pgstore: transaction keeps colliding; giving up", slog.Int("attempts", attempt), slog.Any("error", err))
			return fmt.Errorf("pgstore: %d attempts collided with other transactions: %w: %w", attempt, store.ErrUnavailable, err)
		}
		s.log.Debug("pgstore: transaction collided; retrying", slog.Int("attempt", attempt), slog.Any("error", err))
		if t != nil {
			learned = t.locks.wanted()
		}
		if !isLockOrder(err) {
			// PostgreSQL's deadlock detector broke a cycle (it may pick
			// any transaction in it, even one waiting in order), or a
			// serialization failure: back off a little so the others
			// can finish.
			select {
			case <-ctx.Done():
				return classify(s.timeoutOf(ctx, ctx.Err()))
			case <-time.After(time.Duration(rand.Int64N(int64(attempt) * int64(time.Millisecond)))):
			}
		}
	}
}

// View runs fn in a read-only REPEATABLE READ transaction, so all its
// reads see one snapshot.
func (s *Store) View(ctx context.Context, fn func(store.ReadTx) error) error {
	if err := s.usable(ctx); err != nil {
		return err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	t, err := s.begin(ctx, false, nil)
	if err != nil {
		return classify(s.timeoutOf(ctx, err))
	}
	defer t.close()
	err = t.run(func() error { return fn(t) })
	if err == nil {
		err = t.commit()
	}
	return classify(s.timeoutOf(ctx, err))
}

// pingTimeout bounds Ping, so a readiness probe answers while the
// database hangs.
const pingTimeout = 2 * time.Second

// PoolStat reports the state of the connection pool, for metrics: a pool
// whose acquires wait shows a database, or a pool_max_conns, too small for
// the load.
func (s *Store) PoolStat() *pgxpool.Stat { return s.pool.Stat() }

// Ping checks that the database answers and accepts writes: a standby in
// recovery or a read-only transaction default cannot confirm durability.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.usable(ctx); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	var readOnly bool
	err := s.pool.QueryRow(ctx, `SELECT pg_is_in_recovery() OR current_setting('transaction_read_only')::boolean`).Scan(&readOnly)
	if err != nil {
		return classify(fmt.Errorf("pgstore: ping: %w", err))
	}
	if readOnly {
		return fmt.Errorf("pgstore: ping: the database is read-only: %w", store.ErrUnavailable)
	}
	return nil
}

// Close makes every later call fail with store.ErrUnavailable. It leaves
// the pool open: the caller that made it closes it.
func (s *Store) Close() error {
	s.closed.Store(true)
	return nil
}

var errClosed = fmt.Errorf("pgstore: closed: %w", store.ErrUnavailable)

func (s *Store) usable(ctx context.Context) error {
	if s.closed.Load() {
		return errClosed
	}
	return ctx.Err()
}

// begin acquires a connection for a transaction. The transaction opens
// with its first round trip (see tx.start), so that the first reads, and
// all of Prepare, share it.
func (s *Store) begin(ctx context.Context, write bool, learned map[int64]bool) (*tx, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("pgstore: acquire a connection: %w", err)
	}
	t := &tx{s: s, q: &s.rq, ctx: ctx, conn: conn, write: write}
	if write {
		t.q = &s.q
		for id, x := range learned {
			t.locks.need(id, x)
		}
	}
	// Most deployments map no aggregates; knowing that saves each lock
	// operation its aggregate lookup. It is read under the shared
	// aggregates lock in a write transaction, so it stays true until
	// commit.
	t.lockAggregates(false)
	return t, nil
}
