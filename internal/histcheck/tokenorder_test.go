package histcheck_test

import (
	"context"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/internal/histcheck"
	"github.com/holdfast/holdfast/internal/pgtest"
	"github.com/holdfast/holdfast/pgstore"
	"github.com/holdfast/holdfast/store"
)

// pausingStore holds one transaction open after its work, before its
// commit, for as long as the test says.
type pausingStore struct {
	store.Store
	mu     sync.Mutex
	armed  bool
	paused chan struct{} // closed once the armed transaction has done its work
	resume chan struct{} // closed by the test to let it commit
}

// pauseNext arms the next Update.
func (s *pausingStore) pauseNext() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armed, s.paused, s.resume = true, make(chan struct{}), make(chan struct{})
}

func (s *pausingStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	s.mu.Lock()
	pause := s.armed
	s.armed = false
	paused, resume := s.paused, s.resume
	s.mu.Unlock()
	return s.Store.Update(ctx, func(tx store.Tx) error {
		err := fn(tx)
		if pause && err == nil {
			close(paused)
			<-resume
			pause = false // a retry runs without pausing
		}
		return err
	})
}

// TestSiblingTokensCommitOutOfOrder is the history that failed
// TestRealStoresPass/pgstore once in CI. PostgreSQL grants of unrelated
// keys run side by side: an acquire of h/a draws its token and, before it
// commits, an acquire of the sibling h/b draws a higher one and commits,
// and a read of their parent h lists h/b alone. Fencing orders tokens
// among grants of related keys (a key, its ancestors and its descendants),
// which is what a write under a lock needs, and in real time (the
// sequence); it does not order two overlapping grants of unrelated keys,
// so the checker must accept the history.
func TestSiblingTokensCommitOutOfOrder(t *testing.T) {
	t.Parallel()
	dsn := pgtest.SharedDSN(t)
	schema := newSchema(t, dsn)
	ctx := context.Background()
	newStore := func() store.Store {
		pool, err := pgxpool.New(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		st, err := pgstore.New(ctx, pool, pgstore.Config{Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	// Two nodes, so that the second node's requests do not queue behind
	// the paused transaction inside one Manager. The first sweeps never:
	// a sweep's transaction would take the pause armed for the acquire
	// (it did once in CI, on a loaded machine).
	pausing := &pausingStore{Store: newStore()}
	first, second := serveConfig(t, pausing, holdfast.Config{SweepInterval: -1}), serve(t, newStore())

	rec := histcheck.NewRecorder(longTTL)
	acquire := func(session, key string) histcheck.Input {
		return histcheck.Input{Kind: histcheck.Acquire, Family: "h", Session: session, Keys: []string{key}}
	}
	pausing.pauseNext()
	done := make(chan histcheck.Output)
	go func() { done <- rec.Do(ctx, first, 0, acquire("s0", "h/a")) }()
	<-pausing.paused
	b := rec.Do(ctx, second, 1, acquire("s1", "h/b"))
	read := rec.Do(ctx, second, 2, histcheck.Input{Kind: histcheck.Holders, Family: "h", Keys: []string{"h"}})
	close(pausing.resume)
	a := <-done

	if a.Outcome != histcheck.OK || b.Outcome != histcheck.OK || read.Outcome != histcheck.OK {
		t.Fatalf("acquire h/a %+v, acquire h/b %+v, read h %+v; want all three answered", a, b, read)
	}
	if a.Grants[0].Token >= b.Grants[0].Token || len(read.Grants) != 1 || read.Grants[0].Key != "h/b" {
		t.Fatalf("h/a token %d, h/b token %d, read of h %+v: not the interleaving under test", a.Grants[0].Token, b.Grants[0].Token, read.Grants)
	}
	if err := histcheck.Check(rec.History(), histcheck.CheckConfig{}); err != nil {
		t.Fatalf("a history PostgreSQL gives was rejected: %v", err)
	}
}
