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
	pool := testPool(t)
	schema := newSchema(t, pool)
	a, b := open(t, pool, schema, nil), open(t, pool, schema, nil)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	ended := store.Session{ID: "s", LastSeen: now, EndedAt: now, EndReason: "session_ended"}
	if err := a.Update(ctx, func(tx store.Tx) error { return tx.PutSession(ended) }); err != nil {
		t.Fatal(err)
	}

	readEnded, granted := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	runs := 0
	go func() {
		done <- a.Update(ctx, func(tx store.Tx) error {
			runs++
			s, _, err := tx.Session("s")
			if err != nil {
				return err
			}
			if runs == 1 {
				close(readEnded)
				<-granted
			}
			l, held, err := tx.Lock("k", "s")
			if err != nil || !held || !s.Ended() {
				return err
			}
			return tx.DeleteLock(l.Key, l.Session) // a lock of an ended session
		})
	}()

	<-readEnded
	err := b.Update(ctx, func(tx store.Tx) error {
		if err := tx.PutSession(store.Session{ID: "s", LastSeen: now}); err != nil {
			return err
		}
		token, err := tx.NextToken()
		if err != nil {
			return err
		}
		return tx.PutLock(store.Lock{Key: "k", Session: "s", Token: token, AcquiredAt: now, ExpiresAt: now.Add(time.Hour)})
	})
	close(granted)
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
		t.Fatalf("the lock granted to the restarted session was deleted on a stale read of the session (the transaction ran %d times)", runs)
	}
	if runs < 2 {
		t.Errorf("the transaction that read the session before it changed ran %d time(s); it must run again", runs)
	}
}

// TestDeleteOnAStaleHolderRunsAgain is the same interleaving where Prepare
// read the holder's record, with the lock rows of the key it holds: a
// deletion on that read must check the record too.
func TestDeleteOnAStaleHolderRunsAgain(t *testing.T) {
	t.Parallel()
	pool := testPool(t)
	schema := newSchema(t, pool)
	a, b := open(t, pool, schema, nil), open(t, pool, schema, nil)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	if err := a.Update(ctx, func(tx store.Tx) error {
		token, err := tx.NextToken()
		if err != nil {
			return err
		}
		if err := tx.PutLock(store.Lock{Key: "k", Session: "s", Token: token, AcquiredAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
			return err
		}
		return tx.PutSession(store.Session{ID: "s", LastSeen: now, EndedAt: now, EndReason: "session_ended"})
	}); err != nil {
		t.Fatal(err)
	}

	prepared, restarted := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	runs := 0
	go func() {
		done <- a.Update(ctx, func(tx store.Tx) error {
			runs++
			if err := tx.(store.Preparer).Prepare([]string{"k"}, []string{"t"}, nil); err != nil {
				return err
			}
			if runs == 1 {
				close(prepared)
				<-restarted
			}
			s, _, err := tx.Session("s")
			if err != nil {
				return err
			}
			l, held, err := tx.Lock("k", "s")
			if err != nil || !held || !s.Ended() {
				return err
			}
			return tx.DeleteLock(l.Key, l.Session) // a lock of an ended session
		})
	}()

	<-prepared
	err := b.Update(ctx, func(tx store.Tx) error { return tx.PutSession(store.Session{ID: "s", LastSeen: now}) })
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
