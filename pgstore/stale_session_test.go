package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/holdfast/holdfast/store"
)

// TestDeleteOnAStaleSessionRunsAgain is the interleaving the history
// checker found with three nodes: a transaction reads a session as ended,
// another node then starts the session again and grants it a lock, and the
// first transaction, seeing that lock, deletes it as the lock of an ended
// session. Deleting a session's lock must check the session is still as
// read, and run the transaction again when it is not.
func TestDeleteOnAStaleSessionRunsAgain(t *testing.T) {
	t.Parallel()
	now := time.Now().UTC().Truncate(time.Millisecond)
	deleteOnStaleRead(t, now,
		func(tx store.Tx) error {
			return tx.PutSession(store.Session{ID: "s", LastSeen: now, EndedAt: now, EndReason: "session_ended"})
		},
		nil,
		func(tx store.Tx) error {
			if err := tx.PutSession(store.Session{ID: "s", LastSeen: now}); err != nil {
				return err
			}
			return putLock(tx, now)
		})
}

// TestDeleteOnAStaleHolderRunsAgain is the same interleaving where Prepare
// read the holder's record, with the lock rows of the key it holds: a
// deletion on that read must check the record too.
func TestDeleteOnAStaleHolderRunsAgain(t *testing.T) {
	t.Parallel()
	now := time.Now().UTC().Truncate(time.Millisecond)
	deleteOnStaleRead(t, now,
		func(tx store.Tx) error {
			if err := putLock(tx, now); err != nil {
				return err
			}
			return tx.PutSession(store.Session{ID: "s", LastSeen: now, EndedAt: now, EndReason: "session_ended"})
		},
		func(tx store.Tx) error { return tx.(store.Preparer).Prepare([]string{"k"}, []string{"t"}, nil) },
		func(tx store.Tx) error { return tx.PutSession(store.Session{ID: "s", LastSeen: now}) })
}

// putLock grants session s the lock on k.
func putLock(tx store.Tx, now time.Time) error { return grant(tx, "k", "s", now) }

// grant grants session the lock on key for an hour from now.
func grant(tx store.Tx, key, session string, now time.Time) error {
	token, err := tx.NextToken()
	if err != nil {
		return err
	}
	return tx.PutLock(store.Lock{Key: key, Session: session, Token: token, AcquiredAt: now, ExpiresAt: now.Add(time.Hour)})
}

// deleteOnStaleRead sets a schema up, then runs on one store a transaction
// that (after prepare, if not nil) reads session s and deletes its lock on
// k if s read as ended. After its first Prepare, or else its first read of
// s, restart runs on another store, starting s again. The lock must be
// held when both are done, and the first transaction must have run again.
func deleteOnStaleRead(t *testing.T, now time.Time, setup, prepare, restart func(store.Tx) error) {
	t.Helper()
	pool := testPool(t)
	schema := newSchema(t, pool)
	a, b := open(t, pool, schema, nil), open(t, pool, schema, nil)
	ctx := context.Background()
	if err := a.Update(ctx, setup); err != nil {
		t.Fatal(err)
	}

	read, restarted := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	runs := 0
	go func() {
		done <- a.Update(ctx, func(tx store.Tx) error {
			runs++
			pause := func() {
				if runs == 1 {
					close(read)
					<-restarted
				}
			}
			if prepare != nil {
				if err := prepare(tx); err != nil {
					return err
				}
				pause()
			}
			s, _, err := tx.Session("s")
			if err != nil {
				return err
			}
			if prepare == nil {
				pause()
			}
			l, held, err := tx.Lock("k", "s")
			if err != nil || !held || !s.Ended() {
				return err
			}
			return tx.DeleteLock(l.Key, l.Session) // a lock of an ended session
		})
	}()

	<-read
	err := b.Update(ctx, restart)
	close(restarted)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	var held bool
	if err := b.View(ctx, func(tx store.ReadTx) (err error) {
		_, held, err = tx.Lock("k", "s")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if !held {
		t.Fatalf("the lock of the restarted session was deleted on a stale read of the session (the transaction ran %d times)", runs)
	}
	if runs < 2 {
		t.Errorf("the transaction that read the session before it changed ran %d time(s); it must run again", runs)
	}
}

// A holder's record that Prepare read is not what the transaction reads
// once it holds the holder's session lock: that read sees the record as
// it stands, which others can no longer change.
func TestHolderLockedAfterPrepareIsReadUnderItsLock(t *testing.T) {
	t.Parallel()
	pool := testPool(t)
	schema := newSchema(t, pool)
	a, b := open(t, pool, schema, nil), open(t, pool, schema, nil)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	if err := a.Update(ctx, func(tx store.Tx) error {
		if err := putLock(tx, now); err != nil {
			return err
		}
		return tx.PutSession(store.Session{ID: "s", LastSeen: now, EndedAt: now, EndReason: "session_ended"})
	}); err != nil {
		t.Fatal(err)
	}
	restarted := store.Session{ID: "s", Name: "restarted", LastSeen: now}
	if err := a.Update(ctx, func(tx store.Tx) error {
		if err := tx.(store.Preparer).Prepare([]string{"k"}, []string{"t"}, nil); err != nil {
			return err
		}
		if err := b.Update(ctx, func(tx store.Tx) error { return tx.PutSession(restarted) }); err != nil {
			return err
		}
		if _, err := tx.SessionLocks("s"); err != nil { // takes the session's lock
			return err
		}
		s, _, err := tx.Session("s")
		if err != nil {
			return err
		}
		if s.Ended() || s.Name != restarted.Name {
			t.Errorf("read under its lock, the session is %+v; want it as restarted after Prepare, %+v", s, restarted)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
