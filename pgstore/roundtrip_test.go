package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/internal/pgtest"
	"github.com/holdfast/holdfast/store"
)

// roundTrips counts what a pool sends: each batch and each lone query is
// one round trip. It counts statements too, and notes whether any relaxed
// durability.
type roundTrips struct {
	n, statements atomic.Int64
	relaxed       atomic.Bool
}

func (r *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	r.n.Add(1)
	r.statements.Add(1)
	return ctx
}
func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (r *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	r.n.Add(1)
	return ctx
}
func (r *roundTrips) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	r.statements.Add(1)
	if strings.Contains(d.SQL, "synchronous_commit") {
		r.relaxed.Store(true)
	}
}
func (r *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// countedPool is a pool of one connection whose round trips are counted.
func countedPool(t *testing.T) (*roundTrips, *pgxpool.Pool) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(pgtest.SharedDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	counter := &roundTrips{}
	cfg.ConnConfig.Tracer = counter
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return counter, pool
}

// The lock paths stay a few round trips each: a change that adds one
// shows up here. Only a heartbeat, which changes nothing but the session's
// activity, commits without waiting for the disk.
func TestRoundTrips(t *testing.T) {
	t.Parallel()
	schema := newSchema(t, testPool(t))
	counter, pool := countedPool(t)
	m, err := holdfast.New(hinted{Store: open(t, pool, schema, nil)}, holdfast.Config{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()

	ctx := t.Context()
	o := holdfast.Owner{Session: "s-bob", User: "u-bob", Name: "Bob"}
	acquire := func() error {
		_, err := m.Acquire(ctx, holdfast.AcquireRequest{Keys: []string{"policy/1"}, Owner: o})
		return err
	}
	release := func() error {
		_, err := m.Release(ctx, holdfast.ReleaseRequest{Session: o.Session, Keys: []string{"policy/1"}})
		return err
	}
	heartbeat := func() error {
		_, err := m.Heartbeat(ctx, holdfast.HeartbeatRequest{Session: o.Session})
		return err
	}
	// A Batch of many operations, prepared by the Manager with the keys
	// and sessions they name and the sessions whose lost records they
	// report, costs a constant number of round trips: Prepare, which opens
	// the transaction, and commit.
	var keys, sessions []string
	for i := range 32 {
		keys = append(keys, fmt.Sprintf("order/%d", i))
		sessions = append(sessions, fmt.Sprintf("s-%d", i))
	}
	batch := func(op func(ctx context.Context, i int) error) func() error {
		return func() error {
			var failed error
			err := m.Batch(ctx, func(ctx context.Context) {
				failed = nil
				for i := range sessions {
					if err := op(ctx, i); err != nil && failed == nil {
						failed = err
					}
				}
			})
			return errors.Join(err, failed)
		}
	}
	acquireMany := batch(func(ctx context.Context, i int) error {
		_, err := m.Acquire(ctx, holdfast.AcquireRequest{Keys: keys[i : i+1], Owner: holdfast.Owner{Session: sessions[i]}})
		return err
	})
	// Refusals read the record of each holder they meet, which Prepare
	// reads with the holder's lock rows: a round trip per holder otherwise.
	refuseMany := batch(func(ctx context.Context, i int) error {
		_, err := m.Acquire(ctx, holdfast.AcquireRequest{Keys: keys[i : i+1], Owner: holdfast.Owner{Session: "t-" + sessions[i]}})
		var locked *holdfast.LockedError
		if !errors.As(err, &locked) || len(locked.Conflicts) != 1 || len(locked.Conflicts[0].Holders) != 1 || locked.Conflicts[0].Holders[0].Owner.Session != sessions[i] {
			return fmt.Errorf("acquire of %s by another session: %v, want it refused as held by %s", keys[i], err, sessions[i])
		}
		return nil
	})
	heartbeatMany := batch(func(ctx context.Context, i int) error {
		res, err := m.Heartbeat(ctx, holdfast.HeartbeatRequest{Session: sessions[i]})
		if err == nil && res.Session.Locks != 1 {
			err = fmt.Errorf("heartbeat %s: %+v, want one lock", sessions[i], res)
		}
		return err
	})
	releaseMany := batch(func(ctx context.Context, i int) error {
		res, err := m.Release(ctx, holdfast.ReleaseRequest{Session: sessions[i], Keys: keys[i : i+1]})
		if err == nil && len(res.Released) != 1 {
			err = fmt.Errorf("release %s: %+v, want it released", keys[i], res)
		}
		return err
	})

	// An operation on many keys, alone, is prepared as a batch is: a round
	// trip per key otherwise.
	var eight []string
	for i := range 8 {
		eight = append(eight, fmt.Sprintf("claim/%d", i))
	}
	acquireEight := func() error {
		_, err := m.Acquire(ctx, holdfast.AcquireRequest{Keys: eight, Owner: o})
		return err
	}
	releaseEight := func() error {
		res, err := m.Release(ctx, holdfast.ReleaseRequest{Session: o.Session, Keys: eight})
		if err == nil && len(res.Released) != len(eight) {
			err = fmt.Errorf("release %q: %+v, want all released", eight, res)
		}
		return err
	}

	// One round first, so every statement is prepared on the connection.
	for _, op := range []func() error{acquire, heartbeat, release, acquireMany, refuseMany, heartbeatMany, releaseMany, acquireEight, releaseEight} {
		if err := op(); err != nil {
			t.Fatal(err)
		}
	}
	// The writes of a batch go out as a statement per table, not one per
	// operation: a batch costs about as many statements as one operation.
	for _, c := range []struct {
		name            string
		op              func() error
		max, statements int64
		relaxed         bool // commits without waiting for the disk
	}{
		{"acquire", acquire, 4, 11, false},
		{"heartbeat", heartbeat, 5, 11, true},
		{"release", release, 4, 10, false},
		{"32 acquires in a batch", acquireMany, 2, 7, false},
		{"32 refused acquires in a batch", refuseMany, 2, 6, false},
		{"32 heartbeats in a batch", heartbeatMany, 2, 9, true},
		{"32 releases in a batch", releaseMany, 2, 7, false},
		{"acquire of 8 keys", acquireEight, 2, 7, false},
		{"release of 8 keys", releaseEight, 2, 7, false},
	} {
		counter.relaxed.Store(false)
		before, statementsBefore := counter.n.Load(), counter.statements.Load()
		if err := c.op(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		n, statements := counter.n.Load()-before, counter.statements.Load()-statementsBefore
		t.Logf("%s: %d round trips, %d statements", c.name, n, statements)
		if n > c.max || statements > c.statements {
			t.Errorf("%s took %d round trips and %d statements, want at most %d and %d", c.name, n, statements, c.max, c.statements)
		}
		if got := counter.relaxed.Load(); got != c.relaxed {
			t.Errorf("%s committed with synchronous_commit off: %v, want %v (only a heartbeat that changes nothing but activity may)", c.name, got, c.relaxed)
		}
	}
}

// Prepare reads the records of the sessions holding the lock rows it
// reads, so that the operations, which read the record of each holder
// they meet, make no round trip for them; with or without sessions of
// its own named.
func TestPrepareReadsHolders(t *testing.T) {
	t.Parallel()
	schema := newSchema(t, testPool(t))
	counter, pool := countedPool(t)
	st := open(t, pool, schema, nil)
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Millisecond)
	holder := store.Session{ID: "s-holder", User: "u-holder", Name: "Holder", LastSeen: now, IdleTimeout: time.Minute}
	if err := st.Update(ctx, func(tx store.Tx) error {
		if err := grant(tx, "order/1", holder.ID, now); err != nil {
			return err
		}
		return tx.PutSession(holder)
	}); err != nil {
		t.Fatal(err)
	}
	for _, sessions := range [][]string{nil, {"s-other"}} {
		if err := st.Update(ctx, func(tx store.Tx) error {
			if err := tx.(store.Preparer).Prepare([]string{"order/1"}, sessions, nil); err != nil {
				return err
			}
			before := counter.n.Load()
			s, found, err := tx.Session(holder.ID)
			if err != nil {
				return err
			}
			if n := counter.n.Load() - before; n != 0 {
				t.Errorf("Prepare naming sessions %q: reading the holder's record took %d round trips, want none", sessions, n)
			}
			if !found || s.User != holder.User || s.Name != holder.Name || !s.LastSeen.Equal(holder.LastSeen) || s.IdleTimeout != holder.IdleTimeout {
				t.Errorf("Prepare naming sessions %q: holder read as %+v (found %v), want %+v", sessions, s, found, holder)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// Listing locks, or the locks related to a key, shows who holds each, and
// listing sessions shows how many locks each holds. The Manager judges the
// locks from their holders' records, which a read gets with the lock rows:
// the transaction's start, the listing and its end. It counts the locks of
// a page of sessions at once, a round trip more, rather than a round trip
// per session. A holder that went idle is judged as before: its locks and
// its session are left out.
func TestListingsReadWhatTheyShowWithTheirRows(t *testing.T) {
	t.Parallel()
	schema := newSchema(t, testPool(t))
	counter, pool := countedPool(t)
	var clock atomic.Int64
	clock.Store(time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC).UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()).UTC() }
	m, err := holdfast.New(open(t, pool, schema, now), holdfast.Config{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx := t.Context()
	const sessions = 40
	for i := range sessions {
		req := holdfast.AcquireRequest{Keys: []string{fmt.Sprintf("order/%d/a", i), fmt.Sprintf("order/%d/b", i)},
			Owner: holdfast.Owner{Session: fmt.Sprintf("s-%02d", i), User: "u"}}
		if i == 7 {
			req.IdleTimeout = holdfast.Duration(time.Minute)
		}
		if _, err := m.Acquire(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	clock.Add(int64(2 * time.Minute)) // s-07 is idle now, its locks no longer count

	for _, c := range []struct {
		name  string
		list  func() (int, error)
		want  int
		trips int64
	}{
		{"locks", func() (int, error) {
			page, err := m.Locks(ctx, holdfast.LockQuery{Limit: 1000})
			if err != nil {
				return 0, err
			}
			for _, l := range page.Locks {
				if l.Owner.Session == "s-07" {
					return 0, fmt.Errorf("the idle session's lock %s is listed", l.Key)
				}
			}
			return len(page.Locks), nil
		}, 2 * (sessions - 1), 3},
		{"locks under a prefix", func() (int, error) {
			page, err := m.Locks(ctx, holdfast.LockQuery{Prefix: "order/"})
			if err != nil {
				return 0, err
			}
			return len(page.Locks), nil
		}, 2 * (sessions - 1), 3},
		{"locks related to a key", func() (int, error) {
			page, err := m.Locks(ctx, holdfast.LockQuery{Key: "order"})
			if err != nil {
				return 0, err
			}
			return len(page.Locks), nil
		}, 2 * (sessions - 1), 3},
		{"sessions", func() (int, error) {
			page, err := m.Sessions(ctx, holdfast.SessionQuery{Limit: 1000})
			if err != nil {
				return 0, err
			}
			for _, s := range page.Sessions {
				if s.ID == "s-07" || s.Locks != 2 {
					return 0, fmt.Errorf("session %s is listed with %d locks, want every live one with its 2 and not the idle one", s.ID, s.Locks)
				}
			}
			return len(page.Sessions), nil
		}, sessions - 1, 4},
	} {
		before := counter.n.Load()
		got, err := c.list()
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		n := counter.n.Load() - before
		t.Logf("%s: %d listed in %d round trips", c.name, got, n)
		if got != c.want {
			t.Errorf("%s listed %d, want %d", c.name, got, c.want)
		}
		if n > c.trips {
			t.Errorf("listing %s took %d round trips, want at most %d, not one per holder or session", c.name, n, c.trips)
		}
	}
}
