package embeddedtest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/store"
)

// AuditT0 is the clock of the audit tests: AppendAuditEntries appends
// its entries from there, one a minute.
var AuditT0 = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

// OpenAudit opens the store in dir with its clock at AuditT0, and closes
// it at the end of t.
func (open Open) OpenAudit(t *testing.T, dir string) store.Store {
	t.Helper()
	s := open.MustOpen(t, dir, func() time.Time { return AuditT0 })
	t.Cleanup(func() { s.Close() })
	return s
}

// auditEntries are appended one per minute, with IDs 1 to 8.
var auditEntries = []store.AuditEntry{
	{Event: "acquired", Lock: store.Lock{Key: "order/5", Session: "s-1", User: "u-ann", Token: 1}, Actor: "u-ann"},
	{Event: "acquired", Lock: store.Lock{Key: "order/5/line/1", Session: "s-2", User: "u-bob", Token: 2}},
	{Event: "acquired", Lock: store.Lock{Key: "order/55", Session: "s-1", User: "u-ann", Token: 3}},
	{Event: "released", Lock: store.Lock{Key: "order/5", Session: "s-1", User: "u-ann", Token: 1}},
	{Event: "force_released", Lock: store.Lock{Key: "order/5/line/1", Session: "s-2", User: "u-bob", Token: 2}, Actor: "u-admin", Reason: "on leave"},
	{Event: "acquired", Lock: store.Lock{Key: "policy/1", Session: "s-3", User: "u-cy", Token: 4, Shared: true}},
	{Event: "expired", Lock: store.Lock{Key: "order/55", Session: "s-1", User: "u-ann", Token: 3}},
	{Event: "acquired", Lock: store.Lock{Key: "order", Session: "s-3", User: "u-cy", Token: 5}},
}

// AppendAuditEntries appends the eight audit entries, one update each,
// and returns them as stored.
func AppendAuditEntries(t *testing.T, s store.Store) []store.AuditEntry {
	t.Helper()
	var want []store.AuditEntry
	for i, e := range auditEntries {
		e.At = AuditT0.Add(time.Duration(i) * time.Minute)
		err := s.Update(context.Background(), func(tx store.Tx) error {
			id, err := tx.AppendAudit(e)
			e.ID = id
			return err
		})
		if err != nil {
			t.Fatalf("AppendAudit: %v", err)
		}
		if e.ID != uint64(i+1) {
			t.Fatalf("entry %d has ID %d", i+1, e.ID)
		}
		want = append(want, e)
	}
	return want
}

// ListAudit lists the audit entries q asks for.
func ListAudit(t *testing.T, s store.Store, q store.AuditQuery) []store.AuditEntry {
	t.Helper()
	var got []store.AuditEntry
	err := s.View(context.Background(), func(tx store.ReadTx) (err error) {
		got, err = tx.Audit(q)
		return err
	})
	if err != nil {
		t.Fatalf("Audit(%+v): %v", q, err)
	}
	return got
}

// PageAudit follows the cursor, two entries a page, in the order q asks.
func PageAudit(t *testing.T, s store.Store, q store.AuditQuery) []store.AuditEntry {
	t.Helper()
	q.Limit = 2
	var all []store.AuditEntry
	for range 100 {
		page := ListAudit(t, s, q)
		all = append(all, page...)
		if len(page) < q.Limit {
			return all
		}
		if q.Newest {
			q.Before = page[len(page)-1].ID
		} else {
			q.After = page[len(page)-1].ID
		}
	}
	t.Fatalf("Audit(%+v): the cursor never ends", q)
	return nil
}

// IDs lists the IDs of entries, in order.
func IDs(entries []store.AuditEntry) []uint64 {
	out := make([]uint64, 0, len(entries))
	for _, e := range entries {
		out = append(out, e.ID)
	}
	return out
}

// AuditInMemory tells how many audit entries a store holds in memory.
type AuditInMemory func(store.Store) int

func (inMemory AuditInMemory) check(t *testing.T, s store.Store) {
	t.Helper()
	if n := inMemory(s); n != 0 {
		t.Fatalf("memdb holds %d audit entries, want none", n)
	}
}

// AuditLivesOnDiskOnly checks that the audit log is kept on disk only,
// and is listed from there the same way after a reopen: in both orders,
// by page, with every filter.
func AuditLivesOnDiskOnly(t *testing.T, open Open, inMemory AuditInMemory) {
	t.Parallel()
	dir := t.TempDir()
	s := open.OpenAudit(t, dir)
	want := AppendAuditEntries(t, s)
	inMemory.check(t, s)
	if got := ListAudit(t, s, store.AuditQuery{}); !reflect.DeepEqual(got, want) {
		t.Fatalf("before reopen:\n%+v\nwant:\n%+v", got, want)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = open.OpenAudit(t, dir)
	inMemory.check(t, s)
	if got := ListAudit(t, s, store.AuditQuery{}); !reflect.DeepEqual(got, want) {
		t.Fatalf("after reopen:\n%+v\nwant:\n%+v", got, want)
	}
	cases := []struct {
		name string
		q    store.AuditQuery
		want []uint64 // oldest first
	}{
		{"all", store.AuditQuery{}, []uint64{1, 2, 3, 4, 5, 6, 7, 8}},
		{"key and below", store.AuditQuery{Key: "order/5"}, []uint64{1, 2, 4, 5}},
		{"session", store.AuditQuery{Session: "s-1"}, []uint64{1, 3, 4, 7}},
		{"user", store.AuditQuery{User: "u-cy"}, []uint64{6, 8}},
		{"event", store.AuditQuery{Event: "acquired"}, []uint64{1, 2, 3, 6, 8}},
		{"since", store.AuditQuery{Since: AuditT0.Add(5 * time.Minute)}, []uint64{6, 7, 8}},
		{"key and event", store.AuditQuery{Key: "order", Event: "acquired"}, []uint64{1, 2, 3, 8}},
	}
	for _, c := range cases {
		if got := IDs(PageAudit(t, s, c.q)); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s oldest first: %v, want %v", c.name, got, c.want)
		}
		newest := c.q
		newest.Newest = true
		reversed := make([]uint64, len(c.want))
		for i, id := range c.want {
			reversed[len(c.want)-1-i] = id
		}
		if got := IDs(PageAudit(t, s, newest)); !reflect.DeepEqual(got, reversed) {
			t.Errorf("%s newest first: %v, want %v", c.name, got, reversed)
		}
	}
	if got := ListAudit(t, s, store.AuditQuery{After: 3, Limit: 2}); !reflect.DeepEqual(got, want[3:5]) {
		t.Errorf("after 3, limit 2: %+v", got)
	}
	if got := IDs(ListAudit(t, s, store.AuditQuery{Newest: true, Before: 4})); !reflect.DeepEqual(got, []uint64{3, 2, 1}) {
		t.Errorf("newest before 4: %v", got)
	}
}

// PruneAudit prunes in an update of its own and returns how many entries
// it deleted.
func PruneAudit(t *testing.T, s store.Store, before time.Time, limit int) int {
	t.Helper()
	var n int
	err := s.Update(context.Background(), func(tx store.Tx) (err error) {
		n, err = tx.PruneAudit(before, limit)
		return err
	})
	if err != nil {
		t.Fatalf("PruneAudit: %v", err)
	}
	return n
}

// PruneAuditOnDisk checks that PruneAudit deletes the oldest entries from
// disk, in batches, only when its transaction commits; the ID counter
// outlives the whole log.
func PruneAuditOnDisk(t *testing.T, open Open) {
	t.Parallel()
	dir := t.TempDir()
	s := open.OpenAudit(t, dir)
	AppendAuditEntries(t, s)
	cut := AuditT0.Add(5*time.Minute + time.Second) // entries 1 to 6 are older

	refused := errors.New("refused")
	err := s.Update(context.Background(), func(tx store.Tx) error {
		if n, err := tx.PruneAudit(cut, 0); n != 6 || err != nil {
			t.Errorf("PruneAudit in a refused update = %d, %v", n, err)
		}
		return refused
	})
	if !errors.Is(err, refused) {
		t.Fatalf("Update = %v", err)
	}
	if got := IDs(ListAudit(t, s, store.AuditQuery{})); len(got) != 8 {
		t.Fatalf("a refused prune deleted entries: %v left", got)
	}

	// Two prunes in one transaction continue where the first stopped.
	err = s.Update(context.Background(), func(tx store.Tx) error {
		for _, want := range []int{2, 2} {
			if n, err := tx.PruneAudit(cut, 2); n != want || err != nil {
				t.Errorf("PruneAudit = %d, %v; want %d", n, err, want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := PruneAudit(t, s, cut, 5); n != 2 {
		t.Errorf("last batch pruned %d, want 2", n)
	}
	if n := PruneAudit(t, s, cut, 5); n != 0 {
		t.Errorf("pruned %d more, want 0", n)
	}
	if got := IDs(ListAudit(t, s, store.AuditQuery{Newest: true})); !reflect.DeepEqual(got, []uint64{8, 7}) {
		t.Fatalf("left after pruning: %v, want [8 7]", got)
	}

	if n := PruneAudit(t, s, AuditT0.Add(time.Hour), 0); n != 2 {
		t.Errorf("pruned %d of the last entries, want 2", n)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open.OpenAudit(t, dir)
	if got := ListAudit(t, s, store.AuditQuery{}); len(got) != 0 {
		t.Fatalf("pruned entries back after reopen: %v", IDs(got))
	}
	err = s.Update(context.Background(), func(tx store.Tx) error {
		id, err := tx.AppendAudit(store.AuditEntry{At: AuditT0, Event: "acquired", Lock: store.Lock{Key: "k"}})
		if id != 9 {
			t.Errorf("audit ID after the whole log was pruned: %d, want 9", id)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := IDs(ListAudit(t, s, store.AuditQuery{})); !reflect.DeepEqual(got, []uint64{9}) {
		t.Fatalf("log after reopen and append: %v", got)
	}
}

// AuditListingHoldsUpNoCommit checks that while the Manager lists the
// audit log, reading into it for the entries of keys under a prefix
// (newest first, as the console's page of a lock does, and oldest first), locks
// are acquired and released: a listing that held the store's lock while
// it read a long log would hold up every lock operation until it ended.
// duringWalk makes every later audit entry a walk of the log reads call
// hook first; open may cut the log into small segments, so that the
// commits made during the walk go on into new ones.
func AuditListingHoldsUpNoCommit(t *testing.T, open Open, duringWalk func(s store.Store, hook func())) {
	t.Parallel()
	s, m := open.unswept(t)
	ctx := context.Background()
	cycle := func(key string) error {
		owner := holdfast.Owner{Session: "s-" + key, User: "u"}
		if _, err := m.Acquire(ctx, holdfast.AcquireRequest{Keys: []string{key}, Owner: owner}); err != nil {
			return fmt.Errorf("acquire %s: %w", key, err)
		}
		if _, err := m.Release(ctx, holdfast.ReleaseRequest{Session: owner.Session, Keys: []string{key}}); err != nil {
			return fmt.Errorf("release %s: %w", key, err)
		}
		return nil
	}
	for i := range 100 {
		if err := cycle(fmt.Sprintf("before/%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	for _, newest := range []bool{true, false} {
		reading, release := make(chan struct{}), make(chan struct{})
		var first atomic.Bool
		first.Store(true)
		duringWalk(s, func() {
			if first.CompareAndSwap(true, false) {
				close(reading)
				<-release
			}
		})
		listed := make(chan error, 1)
		go func() {
			page, err := m.Audit(ctx, holdfast.AuditQuery{Key: "before", Newest: newest})
			if err == nil && len(page.Entries) == 0 {
				err = errors.New("listed no entry under before/")
			}
			for _, e := range page.Entries {
				if err == nil && !strings.HasPrefix(e.Lock.Key, "before/") {
					err = fmt.Errorf("listed an entry of %s for the keys under before/", e.Lock.Key)
				}
			}
			listed <- err
		}()
		select {
		case <-reading:
		case <-time.After(30 * time.Second):
			close(release)
			t.Fatalf("newest first %t: the listing read no audit entry in 30s", newest)
		}
		cycled := make(chan error, 1)
		go func() {
			for i := range 100 {
				if err := cycle(fmt.Sprintf("during/%t/%d", newest, i)); err != nil {
					cycled <- err
					return
				}
			}
			cycled <- nil
		}()
		select {
		case err := <-cycled:
			if err != nil {
				close(release)
				t.Fatalf("newest first %t, during the listing: %v", newest, err)
			}
		case <-time.After(30 * time.Second):
			close(release)
			t.Fatalf("newest first %t: 100 acquires and releases were not done in 30s while a listing read the audit log", newest)
		}
		close(release)
		if err := <-listed; err != nil {
			t.Fatalf("newest first %t: Audit: %v", newest, err)
		}
	}
}
