package pgstore_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/pgstore"
)

// refusedByHolder fails t unless err is the protect trigger's refusal
// naming Alice.
func refusedByHolder(t *testing.T, what string, err error) {
	t.Helper()
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "55P03" {
		t.Fatalf("%s while policy/1 is held = %v, want SQLSTATE 55P03", what, err)
	}
	for _, want := range []string{"policy/1", "being edited by Alice", "since", "until"} {
		if !strings.Contains(pgErr.Message, want) {
			t.Errorf("%s: message %q does not contain %q", what, pgErr.Message, want)
		}
	}
	if mapped := pgstore.GuardError(err); !errors.Is(mapped, holdfast.ErrLocked) {
		t.Errorf("GuardError(%v) does not match ErrLocked", err)
	}
}

func TestProtectRefusesOthersWhileHeld(t *testing.T) {
	t.Parallel()
	g := newGuarded(t)
	if err := pgstore.Protect(t.Context(), g.pool, g.schema, g.table, `'policy/' || id`); err != nil {
		t.Fatal(err)
	}
	alice := g.acquire(t, "policy/1", "alice-tab", "Alice", time.Hour)

	// Raw SQL, as from psql.
	_, err := g.pool.Exec(t.Context(), `UPDATE `+g.table+` SET premium = 1 WHERE id = 1`)
	refusedByHolder(t, "raw UPDATE", err)
	_, err = g.pool.Exec(t.Context(), `DELETE FROM `+g.table+` WHERE id = 1`)
	refusedByHolder(t, "raw DELETE", err)
	// A bulk UPDATE touching the held row among free ones fails whole.
	_, err = g.pool.Exec(t.Context(), `UPDATE `+g.table+` SET premium = premium + 1`)
	refusedByHolder(t, "bulk UPDATE", err)
	// A background job on a connection of its own.
	job, err := pgx.Connect(t.Context(), g.pool.Config().ConnConfig.ConnString())
	if err != nil {
		t.Fatal(err)
	}
	defer job.Close(t.Context())
	_, err = job.Exec(t.Context(), `UPDATE `+g.table+` SET premium = 0 WHERE premium > 0`)
	refusedByHolder(t, "background job", err)
	// Declaring someone else's session does not help.
	err = pgx.BeginFunc(t.Context(), g.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(t.Context(), `SET LOCAL holdfast.session = 'mallory'`); err != nil {
			return err
		}
		_, err := tx.Exec(t.Context(), `UPDATE `+g.table+` SET premium = 1 WHERE id = 1`)
		return err
	})
	refusedByHolder(t, "another declared session", err)
	for id := 1; id <= 20; id++ {
		if p := g.premium(t, id); p != 100 {
			t.Fatalf("premium of %d = %d after refused writes, want 100", id, p)
		}
	}
	// Rows nobody holds are free.
	if _, err := g.pool.Exec(t.Context(), `UPDATE `+g.table+` SET premium = 2 WHERE id = 2`); err != nil {
		t.Fatalf("UPDATE of a free row: %v", err)
	}

	// The holder passes, through AssertLock or by declaring its session.
	if err := g.guardedWrite(t, 1, 111, "alice-tab", alice.Token); err != nil {
		t.Fatalf("the holder's guarded write: %v", err)
	}
	err = pgx.BeginFunc(t.Context(), g.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(t.Context(), `SET LOCAL holdfast.session = 'alice-tab'`); err != nil {
			return err
		}
		_, err := tx.Exec(t.Context(), `UPDATE `+g.table+` SET premium = premium + 1 WHERE id = 1`)
		return err
	})
	if err != nil || g.premium(t, 1) != 112 {
		t.Fatalf("the holder's declared write: %v, premium %d", err, g.premium(t, 1))
	}
	// The declaration ends with its transaction.
	_, err = g.pool.Exec(t.Context(), `UPDATE `+g.table+` SET premium = 1 WHERE id = 1`)
	refusedByHolder(t, "UPDATE after the holder's transaction", err)

	// Free again: everyone succeeds.
	if _, err := g.m.Release(t.Context(), holdfast.ReleaseRequest{Session: "alice-tab", Keys: []string{"policy/1"}}); err != nil {
		t.Fatal(err)
	}
	for _, sql := range []string{
		`UPDATE ` + g.table + ` SET premium = 1 WHERE id = 1`,
		`UPDATE ` + g.table + ` SET premium = premium + 1`,
	} {
		if _, err := g.pool.Exec(t.Context(), sql); err != nil {
			t.Fatalf("%s once free: %v", sql, err)
		}
	}
	if _, err := job.Exec(t.Context(), `DELETE FROM `+g.table+` WHERE id = 1`); err != nil {
		t.Fatalf("background job once free: %v", err)
	}
}

// A lock on an ancestor covers the row; an expired lock does not.
func TestProtectCoveringAndExpiredLocks(t *testing.T) {
	t.Parallel()
	g := newGuarded(t)
	if err := pgstore.Protect(t.Context(), g.pool, g.schema, g.table, `'policy/' || id`); err != nil {
		t.Fatal(err)
	}
	g.acquire(t, "policy", "alice-tab", "Alice", time.Hour)
	_, err := g.pool.Exec(t.Context(), `UPDATE `+g.table+` SET premium = 1 WHERE id = 3`)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "55P03" || !strings.Contains(pgErr.Message, "covered by policy") {
		t.Fatalf("UPDATE under a covering lock = %v, want 55P03 naming the covering key", err)
	}
	g.clock.Add(-3 * time.Hour)
	g.acquire(t, "other/1", "bob-tab", "Bob", time.Minute)
	if err := pgstore.Protect(t.Context(), g.pool, g.schema, g.table, `'other/' || id`); err != nil {
		t.Fatal(err)
	}
	if _, err := g.pool.Exec(t.Context(), `UPDATE `+g.table+` SET premium = 1 WHERE id = 1`); err != nil {
		t.Fatalf("UPDATE of a row whose lock expired by the database clock: %v", err)
	}
}

func TestUnprotect(t *testing.T) {
	t.Parallel()
	g := newGuarded(t)
	if err := pgstore.Protect(t.Context(), g.pool, g.schema, g.table, `'policy/' || id`); err != nil {
		t.Fatal(err)
	}
	g.acquire(t, "policy/1", "alice-tab", "Alice", time.Hour)
	_, err := g.pool.Exec(t.Context(), `UPDATE `+g.table+` SET premium = 1 WHERE id = 1`)
	refusedByHolder(t, "UPDATE", err)
	if err := pgstore.Unprotect(t.Context(), g.pool, g.table); err != nil {
		t.Fatal(err)
	}
	if _, err := g.pool.Exec(t.Context(), `UPDATE `+g.table+` SET premium = 1 WHERE id = 1`); err != nil {
		t.Fatalf("UPDATE after Unprotect: %v", err)
	}
	if err := pgstore.Protect(t.Context(), g.pool, g.schema, g.table, `no_such_column || 'x'`); err == nil {
		t.Fatal("Protect accepted a key expression over a missing column")
	}
}

// Hazard: a plain write begun before an acquisition must not land after
// the locked write. On a protected table the acquisition waits for the
// plain write's transaction, so the locked write comes last.
func TestProtectedWriteBeforeAcquireIsOrderedFirst(t *testing.T) {
	t.Parallel()
	g := newGuarded(t)
	if err := pgstore.Protect(t.Context(), g.pool, g.schema, g.table, `'policy/' || id`); err != nil {
		t.Fatal(err)
	}
	plain, err := g.pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Rollback(t.Context())
	if _, err := plain.Exec(t.Context(), `UPDATE `+g.table+` SET premium = 1 WHERE id = 9`); err != nil {
		t.Fatal(err)
	}
	acquired := make(chan holdfast.Lock, 1)
	go func() {
		res, err := g.m.Acquire(t.Context(), holdfast.AcquireRequest{Keys: []string{"policy/9"}, Owner: holdfast.Owner{Session: "bob-tab", Name: "Bob"}})
		if err != nil {
			t.Error(err)
			close(acquired)
			return
		}
		acquired <- res.Locks[0]
	}()
	waitForAdvisoryWaiter(t, g, "policy/9")
	select {
	case <-acquired:
		t.Fatal("the acquire finished while a plain write of the row was uncommitted")
	default:
	}
	if err := plain.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	bob, ok := <-acquired
	if !ok {
		t.FailNow()
	}
	if err := g.guardedWrite(t, 9, 900, "bob-tab", bob.Token); err != nil {
		t.Fatal(err)
	}
	if p := g.premium(t, 9); p != 900 {
		t.Fatalf("premium = %d, want the locked write's 900", p)
	}
}
