package implicit_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/client"
	"github.com/holdfast/holdfast/implicit"
	"github.com/holdfast/holdfast/memstore"
	"github.com/holdfast/holdfast/server"
)

// record is the application's record in these tests.
type record struct {
	Title string
	// Token is the fencing token of the grant the record was last written
	// under, as a real repository would store it with the row.
	Token uint64
}

// memRepo is an application's own repository: a map, fenced by token.
type memRepo struct {
	mu      sync.Mutex
	rows    map[int]record
	updates int
}

func newMemRepo() *memRepo {
	return &memRepo{rows: map[int]record{1: {Title: "one"}, 2: {Title: "two"}, 3: {Title: "three"}}}
}

func (r *memRepo) Find(ctx context.Context, id int) (record, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.rows[id]
	if !ok {
		return record{}, errors.New("not found")
	}
	return v, nil
}

func (r *memRepo) Update(ctx context.Context, id int, v record) error {
	g, ok := implicit.GrantFrom(ctx)
	if !ok {
		return errors.New("update without a verified grant")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if g.Token < r.rows[id].Token {
		return errors.New("stale write")
	}
	v.Token = g.Token
	r.rows[id] = v
	r.updates++
	return nil
}

func (r *memRepo) Delete(ctx context.Context, id int) error {
	if _, ok := implicit.GrantFrom(ctx); !ok {
		return errors.New("delete without a verified grant")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.rows, id)
	return nil
}

func (r *memRepo) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.updates
}

// config is built anew for each use: Validate fills in the Types map.
func config() holdfast.Config {
	return holdfast.Config{
		SweepInterval: -1,
		Types: map[string]holdfast.TypePolicy{
			"doc":      {Policy: holdfast.ExclusiveWrite},
			"secret":   {Policy: holdfast.ExclusiveRead},
			"page":     {Policy: holdfast.ReadWrite},
			"coverage": {Policy: holdfast.ExclusiveWrite},
		},
	}
}

// services runs f against the in-process Manager and against the HTTP
// client talking to a real server over that Manager.
func services(t *testing.T, f func(t *testing.T, svc holdfast.Service)) {
	t.Run("manager", func(t *testing.T) {
		t.Parallel()
		m, err := holdfast.New(memstore.New(memstore.Config{}), config())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		f(t, m)
	})
	t.Run("client", func(t *testing.T) {
		t.Parallel()
		m, err := holdfast.New(memstore.New(memstore.Config{}), config())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		srv, err := server.New(server.Config{Manager: m, Anonymous: true, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		ts := httptest.NewServer(srv)
		t.Cleanup(ts.Close)
		c, err := client.New(client.Config{BaseURL: ts.URL})
		if err != nil {
			t.Fatal(err)
		}
		f(t, c)
	})
}

var (
	bob   = holdfast.Owner{Session: "bob-1", User: "bob", Name: "Bob Smith"}
	bob2  = holdfast.Owner{Session: "bob-2", User: "bob", Name: "Bob Smith"}
	alice = holdfast.Owner{Session: "alice-1", User: "alice", Name: "Alice Jones"}
)

func as(o holdfast.Owner) context.Context { return implicit.WithOwner(context.Background(), o) }

func wrap[T any](t *testing.T, svc holdfast.Service, typ string, inner implicit.Repository[int, T]) *implicit.Repo[int, T] {
	t.Helper()
	reg, err := implicit.NewRegistry(svc, config())
	if err != nil {
		t.Fatal(err)
	}
	r, err := implicit.Wrap(reg, typ, inner)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func wantLost(t *testing.T, err error, reason holdfast.LostReason) {
	t.Helper()
	var lost *holdfast.LockLostError
	if !errors.As(err, &lost) {
		t.Fatalf("err = %v, want a *LockLostError (%s)", err, reason)
	}
	if lost.Reason != reason {
		t.Fatalf("reason = %s, want %s (%v)", lost.Reason, reason, err)
	}
}

func wantLockedBy(t *testing.T, err error, name string) {
	t.Helper()
	var locked *holdfast.LockedError
	if !errors.As(err, &locked) {
		t.Fatalf("err = %v, want a *LockedError", err)
	}
	if h := locked.Conflicts[0].Holders[0].Owner.Name; h != name {
		t.Fatalf("holder = %q, want %q", h, name)
	}
}

func TestExclusiveWriteVerifiesAndNeverAcquiresOnWrite(t *testing.T) {
	t.Parallel()
	services(t, func(t *testing.T, svc holdfast.Service) {
		inner := newMemRepo()
		docs := wrap(t, svc, "doc", inner)
		ctx := context.Background()

		// Reading takes no lock under exclusive-write.
		if _, err := docs.Find(as(alice), 1); err != nil {
			t.Fatal(err)
		}
		if hs, err := docs.Holders(ctx, 1); err != nil || len(hs) != 0 {
			t.Fatalf("holders after find = %v, %v; want none", hs, err)
		}

		// A write without a lock is refused and takes none.
		err := docs.Update(as(alice), 1, record{Title: "blind"})
		wantLost(t, err, holdfast.LostNeverHeld)
		if err := docs.Delete(as(alice), 1); !errors.Is(err, holdfast.ErrLockLost) {
			t.Fatalf("delete without lock: %v", err)
		}
		if hs, _ := docs.Holders(ctx, 1); len(hs) != 0 {
			t.Fatalf("a refused write left locks: %v", hs)
		}
		if inner.count() != 0 {
			t.Fatal("the repository was written without a lock")
		}

		// Edit acquires before loading; the holder can write, others cannot.
		v, l, err := docs.Edit(as(bob), 1, implicit.EditOptions{Note: "review"})
		if err != nil {
			t.Fatal(err)
		}
		if v.Title != "one" || l.Key != "doc/1" || l.Mode != holdfast.Exclusive {
			t.Fatalf("edit = %+v, %+v", v, l)
		}
		_, _, err = docs.Edit(as(alice), 1, implicit.EditOptions{})
		wantLockedBy(t, err, "Bob Smith")
		wantLost(t, docs.Update(as(alice), 1, record{Title: "alice"}), holdfast.LostNeverHeld)

		bobPage := implicit.WithToken(as(bob), l.Token)
		if err := docs.Update(bobPage, 1, record{Title: "bob"}); err != nil {
			t.Fatal(err)
		}
		if got, _ := inner.Find(ctx, 1); got.Title != "bob" || got.Token != l.Token {
			t.Fatalf("row = %+v, want bob's write under token %d", got, l.Token)
		}

		// After an administrator breaks the lock, the late save is refused
		// with who did it and why.
		if _, err := svc.ForceRelease(ctx, holdfast.ForceReleaseRequest{Keys: []string{"doc/1"}, Reason: "Bob is on leave", Actor: "carol"}); err != nil {
			t.Fatal(err)
		}
		err = docs.Update(bobPage, 1, record{Title: "late"})
		wantLost(t, err, holdfast.LostForceReleased)
		var lost *holdfast.LockLostError
		errors.As(err, &lost)
		if lost.Actor != "carol" || lost.ForceReason != "Bob is on leave" {
			t.Fatalf("lost = %+v", lost)
		}
		if got, _ := inner.Find(ctx, 1); got.Title != "bob" {
			t.Fatalf("late write landed: %+v", got)
		}
	})
}

func TestStaleTokenFromAnOlderGrantIsRefused(t *testing.T) {
	t.Parallel()
	services(t, func(t *testing.T, svc holdfast.Service) {
		docs := wrap(t, svc, "doc", newMemRepo())
		_, first, err := docs.Edit(as(bob), 2, implicit.EditOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := docs.Release(as(bob), 2); err != nil {
			t.Fatal(err)
		}
		if _, _, err := docs.Edit(as(bob), 2, implicit.EditOptions{}); err != nil {
			t.Fatal(err)
		}
		// The same session, but the page was opened under the first grant.
		err = docs.Update(implicit.WithToken(as(bob), first.Token), 2, record{Title: "old page"})
		if !errors.Is(err, holdfast.ErrStaleToken) {
			t.Fatalf("err = %v, want stale token", err)
		}
	})
}

func TestTakeoverFromOwnOtherTab(t *testing.T) {
	t.Parallel()
	services(t, func(t *testing.T, svc holdfast.Service) {
		docs := wrap(t, svc, "doc", newMemRepo())
		_, tab1, err := docs.Edit(as(bob), 3, implicit.EditOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = docs.Edit(as(bob2), 3, implicit.EditOptions{})
		wantLockedBy(t, err, "Bob Smith")
		// Someone else cannot take over.
		if _, _, err := docs.Edit(as(alice), 3, implicit.EditOptions{Takeover: true}); !errors.Is(err, holdfast.ErrLocked) {
			t.Fatalf("alice takeover: %v", err)
		}
		_, tab2, err := docs.Edit(as(bob2), 3, implicit.EditOptions{Takeover: true})
		if err != nil {
			t.Fatal(err)
		}
		if tab2.Token <= tab1.Token {
			t.Fatalf("takeover token %d not above %d", tab2.Token, tab1.Token)
		}
		wantLost(t, docs.Update(implicit.WithToken(as(bob), tab1.Token), 3, record{Title: "tab 1"}), holdfast.LostTakenOver)
		if err := docs.Update(implicit.WithToken(as(bob2), tab2.Token), 3, record{Title: "tab 2"}); err != nil {
			t.Fatal(err)
		}
	})
}

func TestExclusiveReadLocksOnFind(t *testing.T) {
	t.Parallel()
	services(t, func(t *testing.T, svc holdfast.Service) {
		secrets := wrap(t, svc, "secret", newMemRepo())
		if _, err := secrets.Find(as(bob), 1); err != nil {
			t.Fatal(err)
		}
		_, err := secrets.Find(as(alice), 1)
		wantLockedBy(t, err, "Bob Smith")
		if err := secrets.Update(as(bob), 1, record{Title: "bob"}); err != nil {
			t.Fatal(err)
		}
		if _, err := secrets.Find(context.Background(), 1); !errors.Is(err, implicit.ErrNoOwner) {
			t.Fatalf("find without owner: %v", err)
		}
	})
}

func TestReadWriteSharesReadsAndUpgradesOnWrite(t *testing.T) {
	t.Parallel()
	services(t, func(t *testing.T, svc holdfast.Service) {
		inner := newMemRepo()
		pages := wrap(t, svc, "page", inner)
		ctx := context.Background()
		for _, o := range []holdfast.Owner{bob, alice} {
			if _, err := pages.Find(as(o), 1); err != nil {
				t.Fatal(err)
			}
		}
		hs, err := pages.Holders(ctx, 1)
		if err != nil || len(hs) != 2 || hs[0].Mode != holdfast.Shared {
			t.Fatalf("holders = %+v, %v; want two shared", hs, err)
		}
		// Another reader blocks the upgrade: refused now, naming her.
		wantLockedBy(t, pages.Update(as(bob), 1, record{Title: "bob"}), "Alice Jones")
		if inner.count() != 0 {
			t.Fatal("written while another reader held the record")
		}
		if err := pages.Release(as(alice), 1); err != nil {
			t.Fatal(err)
		}
		if err := pages.Update(as(bob), 1, record{Title: "bob"}); err != nil {
			t.Fatal(err)
		}
		hs, _ = pages.Holders(ctx, 1)
		if len(hs) != 1 || hs[0].Mode != holdfast.Exclusive || hs[0].Owner.Session != bob.Session {
			t.Fatalf("after upgrade holders = %+v", hs)
		}
		// A reader who never read is not upgraded implicitly.
		wantLost(t, pages.Update(as(alice), 2, record{Title: "blind"}), holdfast.LostNeverHeld)
	})
}

func TestAggregateMemberLocksItsRoot(t *testing.T) {
	t.Parallel()
	services(t, func(t *testing.T, svc holdfast.Service) {
		ctx := context.Background()
		reg, err := implicit.NewRegistry(svc, config())
		if err != nil {
			t.Fatal(err)
		}
		docs, err := implicit.Wrap[int, record](reg, "doc", newMemRepo())
		if err != nil {
			t.Fatal(err)
		}
		coverages, err := implicit.Wrap[int, record](reg, "coverage", newMemRepo())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := svc.SetAggregate(ctx, holdfast.Aggregate{Member: "coverage/2", Root: "doc/1"}); err != nil {
			t.Fatal(err)
		}
		_, l, err := coverages.Edit(as(bob), 2, implicit.EditOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if l.Key != "doc/1" || l.RequestedKey != "coverage/2" {
			t.Fatalf("lock = %+v, want doc/1 requested as coverage/2", l)
		}
		_, _, err = docs.Edit(as(alice), 1, implicit.EditOptions{})
		wantLockedBy(t, err, "Bob Smith")
		if err := coverages.Update(implicit.WithToken(as(bob), l.Token), 2, record{Title: "raised"}); err != nil {
			t.Fatal(err)
		}
		if err := docs.Update(as(bob), 1, record{Title: "same aggregate"}); err != nil {
			t.Fatalf("the root's lock covers the root too: %v", err)
		}
		if _, err := implicit.Wrap[int, record](reg, "doc", newMemRepo()); err == nil {
			t.Fatal("a second repository for one record type was handed out")
		}
	})
}
