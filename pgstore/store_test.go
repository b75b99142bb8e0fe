package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/store"
)

func nextToken(t *testing.T, s store.Store) uint64 {
	t.Helper()
	var tok uint64
	err := s.Update(t.Context(), func(tx store.Tx) (err error) {
		tok, err = tx.NextToken()
		return err
	})
	if err != nil {
		t.Fatalf("NextToken: %v", err)
	}
	return tok
}

func TestTokensNeverGoBack(t *testing.T) {
	t.Parallel()
	pool := testPool(t)
	schema := newSchema(t, pool)
	s := open(t, pool, schema, nil)

	first := nextToken(t, s)
	var rolledBack uint64
	refused := errors.New("refused")
	err := s.Update(t.Context(), func(tx store.Tx) (err error) {
		if rolledBack, err = tx.NextToken(); err != nil {
			return err
		}
		return refused
	})
	if !errors.Is(err, refused) {
		t.Fatalf("Update = %v, want the callback's error", err)
	}
	second := nextToken(t, s)
	if !(first < rolledBack && rolledBack < second) {
		t.Fatalf("tokens %d, %d (rolled back), %d: want strictly increasing, a rollback never gives a token back", first, rolledBack, second)
	}

	s.Close()
	again := open(t, pool, schema, nil)
	if third := nextToken(t, again); third <= second {
		t.Fatalf("token after reopen %d, want above %d", third, second)
	}
}

func TestNowIsTheDatabaseClock(t *testing.T) {
	t.Parallel()
	pool := testPool(t)
	s := open(t, pool, newSchema(t, pool), nil)
	dbNow := func() time.Time {
		var now time.Time
		if err := pool.QueryRow(t.Context(), `SELECT clock_timestamp()`).Scan(&now); err != nil {
			t.Fatal(err)
		}
		return now
	}
	before := dbNow()
	var got time.Time
	if err := s.Update(t.Context(), func(tx store.Tx) error { got = tx.Now(); return nil }); err != nil {
		t.Fatal(err)
	}
	after := dbNow()
	if got.Before(before) || got.After(after) || got.Location() != time.UTC {
		t.Fatalf("Tx.Now() = %v, want the database's time between %v and %v, in UTC", got, before, after)
	}
}

// A transaction on order/42 holds off one on order/42/line/7 until it
// commits, and the second then sees what the first wrote; a transaction
// on the sibling order/43 goes ahead meanwhile.
func TestCoveringKeysSerialiseSiblingsDoNot(t *testing.T) {
	t.Parallel()
	pool := testPool(t)
	schema := newSchema(t, pool)
	s := open(t, pool, schema, nil)
	// Cancelling ends the first update if the test fails half-way.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	put := func(tx store.Tx, key, session string) error {
		if err := tx.Related(key, func(store.Lock) bool { return true }); err != nil {
			return err
		}
		now := tx.Now()
		return tx.PutLock(store.Lock{Key: key, Session: session, Token: 1, AcquiredAt: now, ExpiresAt: now.Add(time.Hour)})
	}

	inside, finish := make(chan struct{}), make(chan struct{})
	var once sync.Once
	first := make(chan error, 1)
	go func() {
		first <- s.Update(ctx, func(tx store.Tx) error {
			if err := put(tx, "order/42", "s-1"); err != nil {
				return err
			}
			once.Do(func() { close(inside) })
			select {
			case <-finish:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	select {
	case <-inside:
	case err := <-first:
		t.Fatalf("first update: %v", err)
	}

	if err := s.Update(ctx, func(tx store.Tx) error { return put(tx, "order/43", "s-3") }); err != nil {
		t.Fatalf("sibling update while order/42 is open: %v", err)
	}

	type seen struct {
		locks []store.Lock
		err   error
	}
	second := make(chan seen, 1)
	go func() {
		var got []store.Lock
		err := s.Update(ctx, func(tx store.Tx) error {
			got = got[:0]
			return tx.Related("order/42/line/7", func(l store.Lock) bool { got = append(got, l); return true })
		})
		second <- seen{got, err}
	}()
	waitForLockWait(t, ctx, schema, nil)
	close(finish)
	if err := <-first; err != nil {
		t.Fatalf("first update: %v", err)
	}
	res := <-second
	if res.err != nil {
		t.Fatalf("descendant update: %v", res.err)
	}
	if len(res.locks) != 1 || res.locks[0].Key != "order/42" || res.locks[0].Session != "s-1" {
		t.Fatalf("descendant update saw %+v, want the lock the first update committed on order/42", res.locks)
	}
}

// waitForLockWait waits until some transaction of schema is waiting for
// an advisory lock, or until done is closed.
func waitForLockWait(t *testing.T, ctx context.Context, schema string, done <-chan struct{}) {
	t.Helper()
	pool := testPool(t)
	for {
		var waiting bool
		err := pool.QueryRow(ctx, `SELECT EXISTS (
			SELECT FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
			WHERE l.locktype = 'advisory' AND NOT l.granted AND a.query LIKE '%"' || $1 || '".take_locks%')`, schema).Scan(&waiting)
		if err != nil {
			t.Fatalf("waiting for a transaction to wait: %v", err)
		}
		if waiting {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no transaction of %s ever waited for an advisory lock", schema)
		case <-done:
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// Many sessions acquire overlapping sets of keys, at several levels of the
// hierarchy and in every order, through the Manager. None may fail (no
// deadlock, no give-up), and no two may ever hold conflicting locks.
func TestOverlappingMultiKeyAcquires(t *testing.T) {
	t.Parallel()
	pool := testPool(t)
	s := open(t, pool, newSchema(t, pool), nil)
	m, err := holdfast.New(s, holdfast.Config{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()

	keySpace := []string{"order/1", "order/1/line/1", "order/1/line/2", "order/2", "order/3", "order/3/line/1", "order/4", "order/5"}
	const workers, rounds = 24, 40
	var (
		mu               sync.Mutex
		holders          = map[string]string{} // key → session, as granted and not yet released
		wg               sync.WaitGroup
		granted, refused int
	)
	conflict := func(session string, keys []string) string {
		for k, h := range holders {
			for _, want := range keys {
				if h != session && (holdfast.Covers(k, want) || holdfast.Covers(want, k)) {
					return fmt.Sprintf("%s holds %s while %s was granted %s", h, k, session, want)
				}
			}
		}
		return ""
	}
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 7))
			o := holdfast.Owner{Session: fmt.Sprintf("s-%d", w), User: fmt.Sprintf("u-%d", w)}
			for range rounds {
				keys := make([]string, 1+r.IntN(4))
				for i := range keys {
					keys[i] = keySpace[r.IntN(len(keySpace))]
				}
				res, err := m.Acquire(t.Context(), holdfast.AcquireRequest{Keys: keys, Owner: o})
				if errors.Is(err, holdfast.ErrLocked) {
					mu.Lock()
					refused++
					mu.Unlock()
					continue
				}
				if err != nil {
					errs <- fmt.Errorf("Acquire %v by %s: %w", keys, o.Session, err)
					return
				}
				var got []string
				for _, l := range res.Locks {
					got = append(got, l.Key)
				}
				mu.Lock()
				granted++
				if msg := conflict(o.Session, got); msg != "" {
					mu.Unlock()
					errs <- errors.New(msg)
					return
				}
				for _, k := range got {
					holders[k] = o.Session
				}
				mu.Unlock()
				// Hold the locks across a request of their own before
				// giving them up.
				if _, err := m.Verify(t.Context(), holdfast.VerifyRequest{Key: got[0], Session: o.Session, Token: res.Locks[0].Token}); err != nil {
					errs <- fmt.Errorf("Verify %s by %s: %w", got[0], o.Session, err)
					return
				}
				mu.Lock()
				for _, k := range got {
					delete(holders, k)
				}
				mu.Unlock()
				if _, err := m.Release(t.Context(), holdfast.ReleaseRequest{Session: o.Session, Keys: got}); err != nil {
					errs <- fmt.Errorf("Release %v by %s: %w", got, o.Session, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if granted == 0 {
		t.Fatal("nothing was ever granted")
	}
	t.Logf("%d grants, %d refusals", granted, refused)
}

// TestRaiseTokensHoldsTheSequence: while one transaction raises the token
// counter, another server's draw waits for it to end, so that no token is
// drawn between the raise's read of the counter and its move, which would
// then put the counter back below that token.
func TestRaiseTokensHoldsTheSequence(t *testing.T) {
	t.Parallel()
	pool, schema, raiser, drawer, ctx := raiseServers(t)
	nextToken(t, drawer)

	const floor = 1 << 30
	commit := openRaise(t, ctx, raiser, floor, true)

	drawn := make(chan uint64, 1)
	go func() {
		var tok uint64
		err := drawer.Update(ctx, func(tx store.Tx) (err error) {
			tok, err = tx.NextToken()
			return err
		})
		if err != nil {
			t.Errorf("NextToken while the raise is open: %v", err)
		}
		drawn <- tok
	}()
	for waiting := false; !waiting; {
		err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_locks
			WHERE locktype = 'relation' AND NOT granted AND relation = ($1 || '.token_seq')::regclass)`, schema).Scan(&waiting)
		if err != nil {
			t.Fatalf("looking for a draw waiting for the sequence: %v", err)
		}
		select {
		case tok := <-drawn:
			t.Fatalf("token %d drawn while the raise's transaction was open", tok)
		case <-ctx.Done():
			t.Fatal("no draw waited for the sequence")
		case <-time.After(5 * time.Millisecond):
		}
	}
	if err := commit(); err != nil {
		t.Fatalf("the raise: %v", err)
	}
	if tok := <-drawn; tok <= floor {
		t.Fatalf("token drawn after the raise: %d, want above %d", tok, floor)
	}
}

// A floor the counter has passed already takes no lock: a server that
// starts with token_floor left in its configuration holds up no other
// server's draws, and needs no right to alter the sequence.
func TestRaiseTokensBelowTheCounterTakesNoLock(t *testing.T) {
	t.Parallel()
	_, _, raiser, drawer, ctx := raiseServers(t)
	floor := nextToken(t, drawer)

	commit := openRaise(t, ctx, raiser, floor, false)
	// Drawn while the raise's transaction is still open.
	if tok := nextToken(t, drawer); tok <= floor {
		t.Fatalf("token drawn after %d: %d", floor, tok)
	}
	if err := commit(); err != nil {
		t.Fatalf("the raise: %v", err)
	}
}

// openRaise raises s's token counter to floor in a transaction it leaves
// open, once RaiseTokens has answered as want says, until commit is
// called; commit returns the transaction's error.
func openRaise(t *testing.T, ctx context.Context, s store.Store, floor uint64, want bool) (commit func() error) {
	t.Helper()
	raised, finish := make(chan error, 1), make(chan struct{})
	committed := make(chan error, 1)
	go func() {
		committed <- s.Update(ctx, func(tx store.Tx) error {
			ok, err := tx.RaiseTokens(floor)
			if err == nil && ok != want {
				err = fmt.Errorf("RaiseTokens(%d) reported a raise: %t, want %t", floor, ok, want)
			}
			raised <- err
			if err != nil {
				return err
			}
			select {
			case <-finish:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	if err := <-raised; err != nil {
		t.Fatal(err)
	}
	return func() error {
		close(finish)
		return <-committed
	}
}

// raiseServers opens two stores on one new schema, as two servers would:
// one to raise the token counter, one to draw; ctx bounds the test.
func raiseServers(t *testing.T) (pool *pgxpool.Pool, schema string, raiser, drawer store.Store, ctx context.Context) {
	t.Helper()
	pool = testPool(t)
	schema = newSchema(t, pool)
	raiser, drawer = open(t, pool, schema, nil), open(t, pool, schema, nil)
	// Registered after the stores' cleanups, so it runs before them: a
	// transaction a failed test left open ends before its store closes.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return pool, schema, raiser, drawer, ctx
}
