package pgstore_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/pgstore"
)

// fakeClock is the lock manager's clock in these tests; the guards in the
// database judge by the database clock, so it starts at the database's
// time and only moves to make the manager expire a lock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// guarded is a migrated schema, a manager over it and an application
// table "policies" (id, premium, fence) in the same schema.
type guarded struct {
	pool   *pgxpool.Pool
	schema string
	table  string
	clock  *fakeClock
	m      *holdfast.Manager
}

func newGuarded(t *testing.T) *guarded {
	t.Helper()
	pool := testPool(t)
	schema := newSchema(t, pool)
	clock := &fakeClock{now: time.Now().UTC()}
	s := open(t, pool, schema, clock.Now)
	m, err := holdfast.New(s, holdfast.Config{})
	if err != nil {
		t.Fatalf("holdfast.New: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	g := &guarded{pool: pool, schema: schema, table: schema + ".policies", clock: clock, m: m}
	g.exec(t, `CREATE TABLE `+g.table+` (id int PRIMARY KEY, premium int NOT NULL, fence bigint NOT NULL DEFAULT 0)`)
	g.exec(t, `INSERT INTO `+g.table+` SELECT i, 100, 0 FROM generate_series(1, 20) AS i`)
	return g
}

func (g *guarded) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	if _, err := g.pool.Exec(t.Context(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func (g *guarded) premium(t *testing.T, id int) int {
	t.Helper()
	var p int
	if err := g.pool.QueryRow(t.Context(), `SELECT premium FROM `+g.table+` WHERE id = $1`, id).Scan(&p); err != nil {
		t.Fatal(err)
	}
	return p
}

func (g *guarded) acquire(t *testing.T, key, session, name string, ttl time.Duration) holdfast.Lock {
	t.Helper()
	res, err := g.m.Acquire(t.Context(), holdfast.AcquireRequest{
		Keys: []string{key}, Owner: holdfast.Owner{Session: session, User: name, Name: name},
		TTL: holdfast.Duration(ttl),
	})
	if err != nil {
		t.Fatalf("Acquire %s for %s: %v", key, session, err)
	}
	return res.Locks[0]
}

// guardedWrite sets the premium of policy id inside one transaction that
// first asserts the lock; it returns AssertLock's or the write's error.
func (g *guarded) guardedWrite(t *testing.T, id, premium int, session string, token uint64) error {
	t.Helper()
	return pgx.BeginFunc(t.Context(), g.pool, func(tx pgx.Tx) error {
		if _, err := pgstore.AssertLock(t.Context(), tx, g.schema, policyKey(id), session, token); err != nil {
			return err
		}
		_, err := tx.Exec(t.Context(), `UPDATE `+g.table+` SET premium = $1 WHERE id = $2`, premium, id)
		return err
	})
}

func policyKey(id int) string { return "policy/" + strconv.Itoa(id) }

func TestLockIDMatchesAdvisoryScheme(t *testing.T) {
	t.Parallel()
	pool := testPool(t)
	schema := newSchema(t, pool)
	for _, key := range []string{"policy/1", "order/42/line/7", "a", "ключ/ü/€", strings.Repeat("x/", 100)} {
		var got int64
		if err := pool.QueryRow(t.Context(), `SELECT `+schema+`.lock_id('k', $1)`, key).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if want := pgstore.LockKeyID(schema, key); got != want {
			t.Errorf("SQL lock_id(%q) = %d, Go lockID = %d: the guards would not wait for pgstore's writers", key, got, want)
		}
	}
}

func TestAssertLockHeldDeclaresSession(t *testing.T) {
	t.Parallel()
	g := newGuarded(t)
	l := g.acquire(t, "policy/1", "alice-tab", "Alice", time.Hour)
	err := pgx.BeginFunc(t.Context(), g.pool, func(tx pgx.Tx) error {
		got, err := pgstore.AssertLock(t.Context(), tx, g.schema, "policy/1", "alice-tab", l.Token)
		if err != nil {
			return err
		}
		if got.Token != l.Token || got.Key != "policy/1" || got.Owner.Name != "Alice" || got.Mode != holdfast.Exclusive {
			t.Errorf("AssertLock = %+v, want the grant %+v", got, l)
		}
		var declared string
		if err := tx.QueryRow(t.Context(), `SELECT current_setting('holdfast.session')`).Scan(&declared); err != nil {
			return err
		}
		if declared != "alice-tab" {
			t.Errorf("holdfast.session = %q, want alice-tab", declared)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("guarded transaction: %v", err)
	}

	// Another session, or this one with another token, is refused.
	err = g.guardedWrite(t, 1, 1, "mallory", 0)
	var lost *holdfast.LockLostError
	if !errors.As(err, &lost) || lost.Reason != holdfast.LostNeverHeld {
		t.Fatalf("guarded write by a session that never held it = %v, want LockLostError never_held", err)
	}
	err = g.guardedWrite(t, 1, 1, "alice-tab", l.Token+1000)
	var stale *holdfast.StaleTokenError
	if !errors.As(err, &stale) || stale.Lock.Token != l.Token || !errors.Is(err, holdfast.ErrStaleToken) {
		t.Fatalf("guarded write with a wrong token = %v, want StaleTokenError naming token %d", err, l.Token)
	}
	if p := g.premium(t, 1); p != 100 {
		t.Fatalf("premium = %d after refused writes, want 100", p)
	}
}

// A lock that expired by the database clock is refused even before any
// sweep removed it.
func TestAssertLockExpiredByDatabaseClock(t *testing.T) {
	t.Parallel()
	g := newGuarded(t)
	g.clock.Add(-2 * time.Hour) // the manager grants it in the database's past
	l := g.acquire(t, "policy/2", "alice-tab", "Alice", time.Minute)
	err := g.guardedWrite(t, 2, 7, "alice-tab", l.Token)
	var lost *holdfast.LockLostError
	if !errors.As(err, &lost) || lost.Reason != holdfast.LostExpired {
		t.Fatalf("guarded write under a lock expired by the database clock = %v, want LockLostError expired", err)
	}
}

// Hazard: a holder whose lock expired and was granted to someone else
// writes late.
func TestGuardRefusesLateWriteAfterExpiryAndRegrant(t *testing.T) {
	t.Parallel()
	g := newGuarded(t)
	alice := g.acquire(t, "policy/3", "alice-tab", "Alice", time.Minute)
	g.clock.Add(2 * time.Minute)
	bob := g.acquire(t, "policy/3", "bob-tab", "Bob", time.Hour)
	if bob.Token <= alice.Token {
		t.Fatalf("tokens: Bob %d after Alice %d", bob.Token, alice.Token)
	}
	if err := g.guardedWrite(t, 3, 300, "bob-tab", bob.Token); err != nil {
		t.Fatalf("Bob's guarded write: %v", err)
	}

	// Without the guard Alice's late write lands over Bob's.
	g.exec(t, `UPDATE `+g.table+` SET premium = 999 WHERE id = 3`)
	if p := g.premium(t, 3); p != 999 {
		t.Fatalf("the unguarded late write did not land (premium %d): the hazard is not reproduced", p)
	}
	g.exec(t, `UPDATE `+g.table+` SET premium = 300 WHERE id = 3`)

	err := g.guardedWrite(t, 3, 999, "alice-tab", alice.Token)
	var lost *holdfast.LockLostError
	if !errors.As(err, &lost) || lost.Reason != holdfast.LostExpired || !errors.Is(err, holdfast.ErrLockLost) {
		t.Fatalf("Alice's late guarded write = %v, want LockLostError expired", err)
	}
	if lost.Lock == nil || lost.Lock.Token != alice.Token {
		t.Errorf("lost lock = %+v, want Alice's grant (token %d)", lost.Lock, alice.Token)
	}
	if p := g.premium(t, 3); p != 300 {
		t.Fatalf("premium = %d, want Bob's 300", p)
	}
}

// Hazard: a force-released holder writes late.
func TestGuardRefusesLateWriteAfterForceRelease(t *testing.T) {
	t.Parallel()
	g := newGuarded(t)
	alice := g.acquire(t, "policy/4", "alice-tab", "Alice", time.Hour)
	if _, err := g.m.ForceRelease(t.Context(), holdfast.ForceReleaseRequest{Keys: []string{"policy/4"}, Reason: "Alice is on leave", Actor: "admin-carol"}); err != nil {
		t.Fatal(err)
	}

	g.exec(t, `UPDATE `+g.table+` SET premium = 444 WHERE id = 4`)
	if p := g.premium(t, 4); p != 444 {
		t.Fatalf("the unguarded late write did not land (premium %d): the hazard is not reproduced", p)
	}
	g.exec(t, `UPDATE `+g.table+` SET premium = 100 WHERE id = 4`)

	err := g.guardedWrite(t, 4, 444, "alice-tab", alice.Token)
	var lost *holdfast.LockLostError
	if !errors.As(err, &lost) || lost.Reason != holdfast.LostForceReleased || lost.Actor != "admin-carol" || lost.ForceReason != "Alice is on leave" {
		t.Fatalf("late guarded write = %v (%+v), want LockLostError force_released by admin-carol", err, lost)
	}
	if !strings.Contains(lost.Message, "admin-carol") || !strings.Contains(lost.Message, "Alice is on leave") {
		t.Errorf("message %q does not say who released it and why", lost.Message)
	}
	if p := g.premium(t, 4); p != 100 {
		t.Fatalf("premium = %d, want 100", p)
	}
}

// waitForAdvisoryWaiter returns once some backend waits for the advisory
// lock of key.
func waitForAdvisoryWaiter(t *testing.T, g *guarded, key string) {
	t.Helper()
	id := pgstore.LockKeyID(g.schema, key)
	for {
		var waiting bool
		err := g.pool.QueryRow(t.Context(), `SELECT EXISTS (SELECT FROM pg_locks WHERE locktype = 'advisory'
			AND NOT granted AND classid::bigint = ($1::bigint >> 32) & 4294967295 AND objid::bigint = $1::bigint & 4294967295 AND objsubid = 1)`, id).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		if waiting {
			return
		}
		select {
		case <-t.Context().Done():
			t.Fatal("nobody ever waited for the key's lock")
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// A force-release racing a guarded transaction waits for its commit: the
// write lands under the lock, and the release comes after it, never both
// "released" and "written under the lock" out of order.
func TestForceReleaseWaitsForGuardedTransaction(t *testing.T) {
	t.Parallel()
	g := newGuarded(t)
	alice := g.acquire(t, "policy/5", "alice-tab", "Alice", time.Hour)

	tx, err := g.pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := pgstore.AssertLock(t.Context(), tx, g.schema, "policy/5", "alice-tab", alice.Token); err != nil {
		t.Fatal(err)
	}

	released := make(chan error, 1)
	go func() {
		_, err := g.m.ForceRelease(context.Background(), holdfast.ForceReleaseRequest{Keys: []string{"policy/5"}, Reason: "stuck", Actor: "admin"})
		released <- err
	}()
	waitForAdvisoryWaiter(t, g, "policy/5")
	select {
	case err := <-released:
		t.Fatalf("force-release finished (%v) while the guarded transaction was open", err)
	default:
	}
	if _, err := tx.Exec(t.Context(), `UPDATE `+g.table+` SET premium = 555 WHERE id = 5`); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(t.Context()); err != nil {
		t.Fatalf("guarded commit: %v", err)
	}
	if err := <-released; err != nil {
		t.Fatalf("force-release: %v", err)
	}
	if p := g.premium(t, 5); p != 555 {
		t.Fatalf("premium = %d, want the guarded write", p)
	}
	var lost *holdfast.LockLostError
	if err := g.guardedWrite(t, 5, 1, "alice-tab", alice.Token); !errors.As(err, &lost) || lost.Reason != holdfast.LostForceReleased {
		t.Fatalf("write after the release = %v, want force_released", err)
	}
}

// The same guard through database/sql on the pgx stdlib driver.
func TestAssertLockStd(t *testing.T) {
	t.Parallel()
	g := newGuarded(t)
	alice := g.acquire(t, "policy/6", "alice-tab", "Alice", time.Hour)
	db := stdlib.OpenDBFromPool(g.pool)
	defer db.Close()

	write := func(token uint64) error {
		tx, err := db.BeginTx(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if _, err := pgstore.AssertLockStd(t.Context(), tx, g.schema, "policy/6", "alice-tab", token); err != nil {
			return err
		}
		if _, err := tx.ExecContext(t.Context(), `UPDATE `+g.table+` SET premium = 666 WHERE id = 6`); err != nil {
			return err
		}
		return tx.Commit()
	}
	if err := write(alice.Token); err != nil {
		t.Fatalf("guarded write while held: %v", err)
	}
	if _, err := g.m.Release(t.Context(), holdfast.ReleaseRequest{Session: "alice-tab", Keys: []string{"policy/6"}}); err != nil {
		t.Fatal(err)
	}
	var lost *holdfast.LockLostError
	if err := write(alice.Token); !errors.As(err, &lost) || lost.Reason != holdfast.LostReleased {
		t.Fatalf("guarded write after release = %v, want LockLostError released", err)
	}
}

// The SQL function, for any language: it raises 55000 with the reason,
// and GuardError reads it back.
func TestAssertLockSQLFunction(t *testing.T) {
	t.Parallel()
	g := newGuarded(t)
	alice := g.acquire(t, "policy/7", "alice-tab", "Alice", time.Hour)
	var token int64
	if err := g.pool.QueryRow(t.Context(), `SELECT `+g.schema+`.assert_lock('policy/7', 'alice-tab')`).Scan(&token); err != nil || uint64(token) != alice.Token {
		t.Fatalf("assert_lock while held = %d, %v; want token %d", token, err, alice.Token)
	}
	if _, err := g.m.ForceRelease(t.Context(), holdfast.ForceReleaseRequest{Keys: []string{"policy/7"}, Reason: "audit", Actor: "admin"}); err != nil {
		t.Fatal(err)
	}
	_, err := g.pool.Exec(t.Context(), `SELECT `+g.schema+`.assert_lock('policy/7', 'alice-tab', $1)`, int64(alice.Token))
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "55000" || pgErr.Detail != "force_released" || !strings.Contains(pgErr.Message, "admin") {
		t.Fatalf("assert_lock after force-release = %v, want 55000 with detail force_released", err)
	}
	var lost *holdfast.LockLostError
	if mapped := pgstore.GuardError(err); !errors.As(mapped, &lost) || lost.Reason != holdfast.LostForceReleased || !errors.As(mapped, &pgErr) {
		t.Fatalf("GuardError = %v, want a LockLostError that still unwraps to the PgError", mapped)
	}
}

// Hazard: a write prepared before the current grant (under an older
// token) lands after the locked write. A fenced table refuses it.
func TestFenceRefusesWriteFromBeforeTheGrant(t *testing.T) {
	t.Parallel()
	g := newGuarded(t)
	old := g.acquire(t, "policy/8", "alice-tab", "Alice", time.Hour)
	if _, err := g.m.Release(t.Context(), holdfast.ReleaseRequest{Session: "alice-tab", Keys: []string{"policy/8"}}); err != nil {
		t.Fatal(err)
	}
	bob := g.acquire(t, "policy/8", "bob-tab", "Bob", time.Hour)
	fencedWrite := func(premium int, token uint64) error {
		_, err := g.pool.Exec(t.Context(), `UPDATE `+g.table+` SET premium = $1, fence = $2 WHERE id = 8`, premium, int64(token))
		return pgstore.GuardError(err)
	}
	if err := fencedWrite(800, bob.Token); err != nil {
		t.Fatal(err)
	}
	// Unfenced, the older write outranks Bob's.
	if err := fencedWrite(1, old.Token); err != nil || g.premium(t, 8) != 1 {
		t.Fatalf("unfenced old write: %v, premium %d; the hazard is not reproduced", err, g.premium(t, 8))
	}
	if err := fencedWrite(800, bob.Token); err != nil {
		t.Fatal(err)
	}

	if err := pgstore.Fence(t.Context(), g.pool, g.schema, g.table, "fence"); err != nil {
		t.Fatal(err)
	}
	err := fencedWrite(1, old.Token)
	var stale *holdfast.StaleTokenError
	if !errors.As(err, &stale) || stale.Lock.Token != bob.Token || !errors.Is(err, holdfast.ErrStaleToken) {
		t.Fatalf("fenced old write = %v, want StaleTokenError naming Bob's token %d", err, bob.Token)
	}
	if err := fencedWrite(801, bob.Token); err != nil {
		t.Fatalf("Bob's second write with the same token: %v", err)
	}
	if p := g.premium(t, 8); p != 801 {
		t.Fatalf("premium = %d, want Bob's 801", p)
	}
	if err := pgstore.Unfence(t.Context(), g.pool, g.table); err != nil {
		t.Fatal(err)
	}
	if err := fencedWrite(2, old.Token); err != nil {
		t.Fatalf("after Unfence: %v", err)
	}
}
