package holdfast_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/memstore"
	"github.com/holdfast/holdfast/store"
)

// countingStore counts the transactions a real store is asked for.
type countingStore struct {
	store.Store
	updates atomic.Int64
}

func (s *countingStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	s.updates.Add(1)
	return s.Store.Update(ctx, fn)
}

func newBatchManager(t *testing.T) (*holdfast.Manager, *countingStore) {
	t.Helper()
	s := &countingStore{Store: memstore.New(memstore.Config{})}
	m, err := holdfast.New(s, holdfast.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(); s.Close() })
	return m, s
}

func acquireReq(key, session string) holdfast.AcquireRequest {
	return holdfast.AcquireRequest{Keys: []string{key}, Owner: holdfast.Owner{Session: session, User: "u-" + session}}
}

func TestBatchRunsEveryOperationInOneCommit(t *testing.T) {
	t.Parallel()
	m, s := newBatchManager(t)
	ctx := t.Context()
	events, cancel := m.Subscribe("")
	defer cancel()

	var (
		bob, carol   *holdfast.AcquireResult
		carolErr     error
		released     *holdfast.ReleaseResult
		heartbeat    *holdfast.HeartbeatResult
		errs         [4]error
		beforeCommit int
	)
	err := m.Batch(ctx, func(ctx context.Context) {
		bob, errs[0] = m.Acquire(ctx, acquireReq("policy/1", "s-bob"))
		carol, carolErr = m.Acquire(ctx, acquireReq("policy/1", "s-carol"))
		heartbeat, errs[1] = m.Heartbeat(ctx, holdfast.HeartbeatRequest{Session: "s-bob"})
		released, errs[2] = m.Release(ctx, holdfast.ReleaseRequest{Session: "s-bob", Keys: []string{"policy/1"}})
		carol, errs[3] = m.Acquire(ctx, acquireReq("policy/1", "s-carol"))
		beforeCommit = len(events)
	})
	if err != nil {
		t.Fatalf("Batch: %v", err)
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("operation %d: %v", i, err)
		}
	}
	if got := s.updates.Load(); got != 1 {
		t.Errorf("the batch took %d store transactions, want 1", got)
	}
	var locked *holdfast.LockedError
	if !errors.As(carolErr, &locked) || locked.Conflicts[0].Holders[0].Token != bob.Locks[0].Token {
		t.Errorf("carol's first acquire = %v, want locked by bob's grant", carolErr)
	}
	if heartbeat.Session.Locks != 1 {
		t.Errorf("heartbeat counts %d locks, want 1", heartbeat.Session.Locks)
	}
	if len(released.Released) != 1 || carol.Locks[0].Token <= bob.Locks[0].Token {
		t.Errorf("released %v, carol's token %d after bob's %d", released.Released, carol.Locks[0].Token, bob.Locks[0].Token)
	}
	if beforeCommit != 0 {
		t.Errorf("%d events were published before the batch committed", beforeCommit)
	}
	var got []holdfast.Event
	for range 3 {
		got = append(got, (<-events).Event)
	}
	if want := []holdfast.Event{holdfast.EventAcquired, holdfast.EventReleased, holdfast.EventAcquired}; !slices.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
}

// An operation that fails for a reason other than a refusal must undo
// only its own writes: the batch runs again, one transaction each.
func TestBatchFailureUndoesOnlyTheFailingOperation(t *testing.T) {
	t.Parallel()
	m, _ := newBatchManager(t)
	ctx := t.Context()
	if _, err := m.SetAggregate(ctx, holdfast.Aggregate{Member: "asset/9", Root: "lease/3"}); err != nil {
		t.Fatal(err)
	}
	var errs [3]error
	calls := 0
	err := m.Batch(ctx, func(ctx context.Context) {
		calls++
		_, errs[0] = m.Acquire(ctx, acquireReq("order/1", "s-bob"))
		_, errs[1] = m.SetAggregate(ctx, holdfast.Aggregate{Member: "lease/3", Root: "asset/9"}) // a cycle
		_, errs[2] = m.Acquire(ctx, acquireReq("order/2", "s-carol"))
	})
	if err != nil {
		t.Fatalf("Batch: %v", err)
	}
	if calls != 2 {
		t.Errorf("fn ran %d times, want 2 (shared, then one transaction each)", calls)
	}
	if errs[0] != nil || errs[2] != nil || !errors.Is(errs[1], holdfast.ErrInvalid) {
		t.Fatalf("results %v, want the cycle refused as invalid and both acquires granted", errs)
	}
	page, err := m.Locks(ctx, holdfast.LockQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Locks) != 2 {
		t.Errorf("held after the batch: %v, want order/1 and order/2", page.Locks)
	}
}
