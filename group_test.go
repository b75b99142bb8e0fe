package holdfast_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/memstore"
	"github.com/holdfast/holdfast/store"
)

// tapStore is a real store that counts transactions, can hold them before
// they run, fails writes of poisoned keys, and records read-ahead hints.
type tapStore struct {
	store.Store
	updates atomic.Int64
	// hold is how many of the next transactions wait before they run,
	// and holdCommitted how many wait after they committed (as for a
	// disk), each announced on held, until the test closes the channel
	// it sent.
	hold, holdCommitted atomic.Int64
	held                chan chan struct{}
	prepares            bool // the Tx implements store.Preparer
	// panics is how many of the next transactions panic in the store
	// itself, before they run anything; lockPanics counts the writes of
	// panic/ keys, each of which panics.
	panics, lockPanics atomic.Int64
	// exits is how many of the next transactions end their goroutine.
	exits atomic.Int64
	// retryNext makes the next transaction run twice, as a store does
	// after a conflict: its first run, in which writes of retry/ keys
	// panic, is lost whatever it returns.
	retryNext atomic.Bool

	mu       sync.Mutex
	prepared [][2][]string // keys, sessions of each Prepare
}

var errPoisoned = errors.New("poisoned key")

// errDownKey is what writes of down/ keys fail with: the store cannot
// answer, as when its database stops answering mid-transaction.
var errDownKey = fmt.Errorf("tap store: %w: the database did not answer", store.ErrUnavailable)

func newTapStore(now func() time.Time) *tapStore {
	return &tapStore{Store: memstore.New(memstore.Config{Now: now}), held: make(chan chan struct{})}
}

func (s *tapStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	s.updates.Add(1)
	if s.panics.Add(-1) >= 0 {
		panic("store boom")
	}
	if s.exits.Add(-1) >= 0 {
		runtime.Goexit() // as testing's FailNow does
	}
	if s.hold.Add(-1) >= 0 {
		s.wait()
		// A store that waits on the network honours ctx here.
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	run := func(t tapTx) error {
		if s.prepares {
			return fn(preparingTx{t, s})
		}
		return fn(t)
	}
	if s.retryNext.Swap(false) {
		s.Store.Update(ctx, func(tx store.Tx) error {
			run(tapTx{Tx: tx, s: s, first: true})
			return errRetry
		})
	}
	err := s.Store.Update(ctx, func(tx store.Tx) error { return run(tapTx{Tx: tx, s: s}) })
	if s.holdCommitted.Add(-1) >= 0 {
		s.wait()
	}
	return err
}

// wait announces a held transaction and waits until the test lets it go.
func (s *tapStore) wait() {
	release := make(chan struct{})
	s.held <- release
	<-release
}

// tapTx is a tapStore's transaction; first marks the lost first run of
// a transaction that runs twice.
type tapTx struct {
	store.Tx
	s     *tapStore
	first bool
}

var errRetry = errors.New("conflict: run the transaction again")

func (t tapTx) PutLock(l store.Lock) error {
	if strings.HasPrefix(l.Key, "poison/") {
		return errPoisoned
	}
	if strings.HasPrefix(l.Key, "down/") {
		return errDownKey
	}
	if strings.HasPrefix(l.Key, "panic/") {
		t.s.lockPanics.Add(1)
		panic("boom: " + l.Key)
	}
	if strings.HasPrefix(l.Key, "retry/") && t.first {
		t.s.lockPanics.Add(1)
		panic("boom: " + l.Key)
	}
	return t.Tx.PutLock(l)
}

type preparingTx struct {
	tapTx
	s *tapStore
}

func (t preparingTx) Prepare(keys, sessions, _ []string) error {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	t.s.prepared = append(t.s.prepared, [2][]string{slices.Clone(keys), slices.Clone(sessions)})
	return nil
}

// observed records what the Manager's Observer is told.
type observed struct {
	mu  sync.Mutex
	ops []string // "name: error"
}

func (o *observed) Observe(op string, _ time.Duration, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ops = append(o.ops, fmt.Sprintf("%s: %v", op, err))
}

func (o *observed) list() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Sorted(slices.Values(o.ops))
}

// failing lists, in order, the names of the operations observed with an
// error that says substr.
func (o *observed) failing(substr string) []string {
	var names []string
	for _, line := range o.list() {
		if name, err, _ := strings.Cut(line, ": "); strings.Contains(err, substr) {
			names = append(names, name)
		}
	}
	return names
}

func newTapManager(t *testing.T, s *tapStore) *holdfast.Manager {
	t.Helper()
	return newObservedManager(t, s, nil)
}

func newObservedManager(t *testing.T, s store.Store, obs holdfast.Observer) *holdfast.Manager {
	t.Helper()
	m, err := holdfast.New(s, holdfast.Config{SweepInterval: -1, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(); s.Close() })
	return m
}

// holdFirst starts an operation whose transaction the store holds, so
// that the operations started next queue behind it; it returns the
// function that lets it go.
func holdFirst(t *testing.T, m *holdfast.Manager, s *tapStore) (letGo func()) {
	t.Helper()
	s.hold.Store(1)
	done := make(chan error, 1)
	go func() {
		_, err := m.Heartbeat(context.Background(), holdfast.HeartbeatRequest{Session: "s-first"})
		done <- err
	}()
	release := <-s.held
	return func() {
		close(release)
		if err := <-done; err != nil {
			t.Errorf("the held operation: %v", err)
		}
	}
}

// newPreparingManager is a Manager on a tap store that reads ahead and
// that it knows to, as batches need to before they queue.
func newPreparingManager(t *testing.T) (*tapStore, *holdfast.Manager) {
	t.Helper()
	s := newTapStore(nil)
	s.prepares = true
	m := newTapManager(t, s)
	learnPreparing(t, m)
	return s, m
}

// learnPreparing runs one operation, from which the Manager learns that
// the store reads ahead.
func learnPreparing(t *testing.T, m *holdfast.Manager) {
	t.Helper()
	if _, err := m.Heartbeat(context.Background(), holdfast.HeartbeatRequest{Session: "s-learn"}); err != nil {
		t.Fatal(err)
	}
}

// queue starts op and returns once it waits in the queue, so that the
// order of the queue is the order of the calls.
func queue(t *testing.T, m *holdfast.Manager, wg *sync.WaitGroup, op func()) {
	t.Helper()
	before := holdfast.Queued(m)
	wg.Go(op)
	waitQueued(t, m, before+1)
}

// inOneGroup queues ops, in order, behind the transaction holdFirst holds,
// lets it go, so that they run as one group, and waits for every op to
// return, failing the test if that takes a minute: callers left waiting
// forever are what some of the tests are about.
func inOneGroup(t *testing.T, m *holdfast.Manager, letGo func(), ops ...func()) {
	t.Helper()
	var wg sync.WaitGroup
	for _, op := range ops {
		queue(t, m, &wg, op)
	}
	letGo()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("the group's callers still waiting after a minute")
	}
}

func waitQueued(t *testing.T, m *holdfast.Manager, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); holdfast.Queued(m) != n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d operations queued, want %d", holdfast.Queued(m), n)
		}
	}
}

// Operations that arrive while a transaction runs share the next one.
func TestQueuedOperationsShareOneTransaction(t *testing.T) {
	t.Parallel()
	s := newTapStore(nil)
	m := newTapManager(t, s)
	events, cancel := m.Subscribe("")
	defer cancel()

	letGo := holdFirst(t, m, s)
	const n = 10
	var (
		wg   sync.WaitGroup
		res  [n]*holdfast.AcquireResult
		errs [n]error
	)
	for i := range n {
		queue(t, m, &wg, func() {
			res[i], errs[i] = m.Acquire(context.Background(), acquireReq(fmt.Sprintf("order/%d", i), fmt.Sprintf("s-%d", i)))
		})
	}
	letGo()
	wg.Wait()
	if got := s.updates.Load(); got != 2 {
		t.Errorf("%d store transactions, want 2 (the held one, then one for the %d queued)", got, n)
	}
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("acquire %d: %v", i, errs[i])
		}
		if l := res[i].Locks[0]; l.Key != fmt.Sprintf("order/%d", i) || l.Owner.Session != fmt.Sprintf("s-%d", i) {
			t.Errorf("acquire %d granted %s to %s", i, l.Key, l.Owner.Session)
		}
		if i > 0 && res[i].Locks[0].Token <= res[i-1].Locks[0].Token {
			t.Errorf("tokens %d then %d: the group did not run in queue order", res[i-1].Locks[0].Token, res[i].Locks[0].Token)
		}
	}
	for i := range n {
		if e := <-events; e.Event != holdfast.EventAcquired || e.Lock.Key != fmt.Sprintf("order/%d", i) {
			t.Errorf("event %d: %s %s", i, e.Event, e.Lock.Key)
		}
	}
}

// A transaction starts while the previous one is being made durable, but
// no more than two are under way: the third caller queues.
func TestTransactionsInFlightAreBounded(t *testing.T) {
	t.Parallel()
	s := newTapStore(nil)
	m := newTapManager(t, s)
	s.holdCommitted.Store(2)
	var wg sync.WaitGroup
	errs := make([]error, 3)
	acquire := func(i int) func() {
		return func() {
			_, errs[i] = m.Acquire(context.Background(), acquireReq(fmt.Sprintf("order/%d", i), fmt.Sprintf("s-%d", i)))
		}
	}
	committing := func() chan struct{} {
		select {
		case release := <-s.held:
			return release
		case <-time.After(10 * time.Second):
			t.Fatal("no transaction started")
			return nil
		}
	}
	wg.Go(acquire(0))
	first := committing()
	wg.Go(acquire(1))
	second := committing() // it did not wait for the first to be durable
	queue(t, m, &wg, acquire(2))
	close(first)
	close(second)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if got := s.updates.Load(); got != 3 {
		t.Errorf("%d store transactions, want 3", got)
	}
}

// Over a store that merges concurrent commits into its own durable
// writes, groups are not bounded in flight: each starts once the one
// before has run its operations, while those before still wait.
func TestTransactionsInFlightOverAMergerAreUnbounded(t *testing.T) {
	t.Parallel()
	s := newTapStore(nil)
	m := newMergingManager(t, s)
	const n = 4
	s.holdCommitted.Store(n)
	var wg sync.WaitGroup
	errs := make([]error, n)
	var committing []chan struct{}
	for i := range n {
		wg.Go(func() {
			_, errs[i] = m.Acquire(context.Background(), acquireReq(fmt.Sprintf("order/%d", i), fmt.Sprintf("s-%d", i)))
		})
		select {
		case release := <-s.held:
			committing = append(committing, release)
		case <-time.After(10 * time.Second):
			t.Fatalf("transaction %d did not start while %d were waiting to be durable", i+1, i)
		}
	}
	for _, release := range committing {
		close(release)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// Events go out in the order their transactions committed, though the
// leaders that publish them may run in any order once a store.Merger's
// shared write is durable: here the second is answered while the first
// still waits.
func TestEventsArePublishedInCommitOrder(t *testing.T) {
	t.Parallel()
	s := newTapStore(nil)
	m := newMergingManager(t, s)
	events, cancel := m.Subscribe("")
	defer cancel()
	s.holdCommitted.Store(1)
	var wg sync.WaitGroup
	var errFirst error
	wg.Go(func() { _, errFirst = m.Acquire(context.Background(), acquireReq("order/1", "s-1")) })
	var release chan struct{}
	select {
	case release = <-s.held:
	case <-time.After(10 * time.Second):
		t.Fatal("the first transaction did not commit")
	}
	_, err := m.Acquire(context.Background(), acquireReq("order/2", "s-2"))
	close(release)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if errFirst != nil {
		t.Fatal(errFirst)
	}
	expectEvents(t, events, "order/1", "order/2")
}

// Over a store.Merger, a transaction that fails in any way gives its
// place in the order of publication up: the events of those after it
// still come.
func TestEventsComeAfterFailedTransactions(t *testing.T) {
	t.Parallel()
	s := newTapStore(nil)
	m := newMergingManager(t, s)
	events, cancel := m.Subscribe("")
	defer cancel()
	ctx := context.Background()
	if _, err := m.Acquire(ctx, acquireReq("poison/1", "s-1")); err == nil {
		t.Fatal("a poisoned acquire succeeded")
	}
	panicOf(func() { m.Acquire(ctx, acquireReq("panic/2", "s-2")) })
	letGo := holdFirst(t, m, s)
	var grouped error
	inOneGroup(t, m, letGo,
		func() { m.Acquire(ctx, acquireReq("poison/3", "s-3")) },
		func() { _, grouped = m.Acquire(ctx, acquireReq("order/4", "s-4")) },
	)
	if grouped != nil {
		t.Fatal(grouped)
	}
	s.retryNext.Store(true) // its first run's ticket goes unused
	if _, err := m.Acquire(ctx, acquireReq("order/5", "s-5")); err != nil {
		t.Fatal(err)
	}
	expectEvents(t, events, "order/4", "order/5")
}

// expectEvents fails t unless the next events are for keys, in order.
func expectEvents(t *testing.T, events <-chan holdfast.AuditEntry, keys ...string) {
	t.Helper()
	for _, want := range keys {
		select {
		case e := <-events:
			if e.Lock.Key != want {
				t.Fatalf("event for %s, want %s", e.Lock.Key, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("the event for %s never came", want)
		}
	}
}

// merging is a tapStore that says it merges concurrent commits.
type merging struct{ *tapStore }

func (merging) MergesCommits() bool { return true }

// newMergingManager is a Manager over s that takes s for a store.Merger.
func newMergingManager(t *testing.T, s *tapStore) *holdfast.Manager {
	t.Helper()
	return newObservedManager(t, merging{s}, nil)
}

// A group is bounded, so that one commit stays short: what queued beyond
// the bound forms the group after.
func TestGroupsAreBounded(t *testing.T) {
	t.Parallel()
	s := newTapStore(nil)
	m := newTapManager(t, s)
	letGo := holdFirst(t, m, s)
	n := holdfast.MaxGroup + 2
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			_, errs[i] = m.Heartbeat(context.Background(), holdfast.HeartbeatRequest{Session: fmt.Sprintf("s-%d", i)})
		})
	}
	waitQueued(t, m, n)
	letGo()
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if got := s.updates.Load(); got != 3 {
		t.Errorf("%d store transactions, want 3: the held one, a full group, the rest", got)
	}
}

// Under load, concurrent callers share transactions and each still gets
// exactly its own answer.
func TestConcurrentCallersShareCommits(t *testing.T) {
	t.Parallel()
	s := newTapStore(nil)
	m := newTapManager(t, s)
	const callers, cycles = 64, 25
	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() {
			key, session := fmt.Sprintf("order/%d", c), fmt.Sprintf("s-%d", c)
			var last uint64
			for range cycles {
				acq, err := m.Acquire(t.Context(), acquireReq(key, session))
				if err != nil {
					t.Errorf("%s: acquire: %v", session, err)
					return
				}
				l := acq.Locks[0]
				if l.Key != key || l.Owner.Session != session || l.Token <= last {
					t.Errorf("%s got %s of %s under token %d after %d", session, l.Key, l.Owner.Session, l.Token, last)
					return
				}
				last = l.Token
				rel, err := m.Release(t.Context(), holdfast.ReleaseRequest{Session: session, Keys: []string{key}})
				if err != nil {
					t.Errorf("%s: release: %v", session, err)
					return
				}
				if len(rel.Released) != 1 || rel.Released[0].Token != l.Token || len(rel.NotHeld) != 0 {
					t.Errorf("%s released %v (not held %v), want token %d", session, rel.Released, rel.NotHeld, l.Token)
					return
				}
			}
		})
	}
	wg.Wait()
	ops := int64(2 * callers * cycles)
	if got := s.updates.Load(); got >= ops {
		t.Errorf("%d store transactions for %d operations: none were shared", got, ops)
	} else {
		t.Logf("%d store transactions for %d operations", got, ops)
	}
	page, err := m.Locks(t.Context(), holdfast.LockQuery{})
	if err != nil || len(page.Locks) != 0 {
		t.Errorf("still held: %v, %v", page, err)
	}
}

// An operation that fails (here on a store error) fails alone: the others
// in its group commit, nothing it wrote before failing is kept, and each
// operation is observed once, with its own outcome.
func TestFailingOperationFailsAlone(t *testing.T) {
	t.Parallel()
	s := newTapStore(nil)
	var obs observed
	m := newObservedManager(t, s, &obs)
	ctx := context.Background()
	if _, err := m.SetAggregate(ctx, holdfast.Aggregate{Member: "asset/9", Root: "lease/3"}); err != nil {
		t.Fatal(err)
	}
	events, cancel := m.Subscribe("")
	defer cancel()
	before := s.updates.Load()
	obs.ops = nil

	letGo := holdFirst(t, m, s)
	var (
		first, poison, last error
		cycle               error
	)
	inOneGroup(t, m, letGo,
		func() { _, first = m.Acquire(ctx, acquireReq("order/1", "s-1")) },
		func() {
			// order/2 is written before poison/1 fails.
			_, poison = m.Acquire(ctx, holdfast.AcquireRequest{Keys: []string{"order/2", "poison/1"}, Owner: holdfast.Owner{Session: "s-2"}})
		},
		func() {
			_, cycle = m.SetAggregate(ctx, holdfast.Aggregate{Member: "lease/3", Root: "asset/9"})
		},
		func() { _, last = m.Acquire(ctx, acquireReq("order/3", "s-3")) },
	)

	if first != nil || last != nil {
		t.Fatalf("the group's other operations failed: %v, %v", first, last)
	}
	if !errors.Is(poison, holdfast.ErrUnavailable) || !errors.Is(poison, errPoisoned) {
		t.Errorf("the poisoned acquire: %v, want its own store error", poison)
	}
	if !errors.Is(cycle, holdfast.ErrInvalid) {
		t.Errorf("the cycle: %v, want ErrInvalid", cycle)
	}
	// Held, the group with both, without the first failure, without the
	// second, then each failure alone.
	if got := s.updates.Load() - before; got != 6 {
		t.Errorf("%d store transactions, want 6", got)
	}
	page, err := m.Locks(ctx, holdfast.LockQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var held []string
	for _, l := range page.Locks {
		held = append(held, l.Key+" "+l.Owner.Session)
	}
	if want := []string{"order/1 s-1", "order/3 s-3"}; !slices.Equal(held, want) {
		t.Errorf("held %v, want %v", held, want)
	}
	for _, want := range []string{"order/1", "order/3"} {
		if e := <-events; e.Event != holdfast.EventAcquired || e.Lock.Key != want {
			t.Errorf("event %s %s, want acquired %s", e.Event, e.Lock.Key, want)
		}
	}
	select {
	case e := <-events:
		t.Errorf("unexpected event %s %s", e.Event, e.Lock.Key)
	default:
	}
	want := []string{
		"acquire: <nil>", "acquire: <nil>", "acquire: " + poison.Error(),
		"heartbeat: <nil>", "locks: <nil>", "set_aggregate: " + cycle.Error(),
	}
	if got := obs.list(); !slices.Equal(got, want) {
		t.Errorf("observed\n%q\nwant\n%q", got, want)
	}
}

// A refusal is an answer: it does not fail its group, and what the
// refused operation wrote (its session's activity) is kept.
func TestRefusalInGroupKeepsItsWrites(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	var clock atomic.Pointer[time.Time]
	clock.Store(&now)
	s := newTapStore(func() time.Time { return *clock.Load() })
	m := newTapManager(t, s)
	ctx := context.Background()
	if _, err := m.Heartbeat(ctx, holdfast.HeartbeatRequest{Session: "s-2", IdleTimeout: holdfast.Duration(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	later := now.Add(time.Minute)
	clock.Store(&later)
	before := s.updates.Load()

	letGo := holdFirst(t, m, s)
	var bob, carol, dave error
	inOneGroup(t, m, letGo,
		func() { _, bob = m.Acquire(ctx, acquireReq("order/1", "s-1")) },
		func() { _, carol = m.Acquire(ctx, acquireReq("order/1", "s-2")) },
		func() { _, dave = m.Acquire(ctx, acquireReq("order/2", "s-3")) },
	)

	if bob != nil || dave != nil || !errors.Is(carol, holdfast.ErrLocked) {
		t.Fatalf("answers %v, %v, %v: want the second acquire of order/1 refused, the others granted", bob, carol, dave)
	}
	if got := s.updates.Load() - before; got != 2 {
		t.Errorf("%d store transactions, want 2: a refusal must not split its group", got)
	}
	page, err := m.Sessions(ctx, holdfast.SessionQuery{Session: "s-2"})
	if err != nil || len(page.Sessions) != 1 {
		t.Fatalf("sessions: %v, %v", page, err)
	}
	if got := time.Time(page.Sessions[0].LastSeen); !got.Equal(later) {
		t.Errorf("s-2 last seen %v, want %v: the refused acquire's activity was lost", got, later)
	}
}

// One caller giving up does not fail the others: one that gave up while
// queued never runs, and a group runs on while any caller still waits.
func TestCancelledCallerDoesNotFailItsGroup(t *testing.T) {
	t.Parallel()
	s := newTapStore(nil)
	m := newTapManager(t, s)

	letGo := holdFirst(t, m, s)
	var (
		wg                        sync.WaitGroup
		quitter, leader, follower error
	)
	quitCtx, quit := context.WithCancel(context.Background())
	leadCtx, leave := context.WithCancel(context.Background())
	queue(t, m, &wg, func() { _, quitter = m.Acquire(quitCtx, acquireReq("order/0", "s-0")) })
	queue(t, m, &wg, func() { _, leader = m.Acquire(leadCtx, acquireReq("order/1", "s-1")) })
	queue(t, m, &wg, func() { _, follower = m.Acquire(context.Background(), acquireReq("order/2", "s-2")) })
	quit()
	waitQueued(t, m, 2)
	// The group's transaction is held too; its leader gives up meanwhile.
	s.hold.Store(1)
	go letGo()
	release := <-s.held
	leave()
	close(release)
	wg.Wait()

	if !errors.Is(quitter, context.Canceled) {
		t.Errorf("the caller that gave up while queued: %v", quitter)
	}
	if leader != nil || follower != nil {
		t.Errorf("the group failed with its leader's cancellation: %v, %v", leader, follower)
	}
	page, err := m.Locks(context.Background(), holdfast.LockQuery{})
	if err != nil || len(page.Locks) != 2 || page.Locks[0].Key != "order/1" {
		t.Errorf("held %v (%v), want order/1 and order/2", page, err)
	}
}

// A group tells a store that reads ahead every key and session its
// operations name; so do a batch and an operation on several keys. A
// lone operation on one key needs no hint.
func TestPrepareNamesWhatOperationsTouch(t *testing.T) {
	t.Parallel()
	s := newTapStore(nil)
	s.prepares = true
	m := newTapManager(t, s)
	ctx := context.Background()
	if _, err := m.Acquire(ctx, acquireReq("order/9", "s-9")); err != nil {
		t.Fatal(err)
	}
	if len(s.prepared) != 0 {
		t.Fatalf("a lone operation on one key prepared %v", s.prepared)
	}
	// One on several keys reads ahead: it would read each key in a round
	// trip of its own.
	if _, err := m.Acquire(ctx, holdfast.AcquireRequest{Keys: []string{"order/7", "order/8"}, Owner: holdfast.Owner{Session: "s-7"}}); err != nil {
		t.Fatal(err)
	}
	if len(s.prepared) != 1 || !slices.Equal(s.prepared[0][0], []string{"order/7", "order/8"}) || !slices.Equal(s.prepared[0][1], []string{"s-7"}) {
		t.Fatalf("a lone operation on two keys prepared %v, want once its keys and session", s.prepared)
	}
	s.prepared = nil

	letGo := holdFirst(t, m, s)
	errs := make([]error, 6)
	inOneGroup(t, m, letGo,
		func() {
			_, errs[0] = m.Acquire(ctx, holdfast.AcquireRequest{Keys: []string{"order/1", "order/2"}, Owner: holdfast.Owner{Session: "s-1"}})
		},
		func() {
			_, errs[1] = m.Release(ctx, holdfast.ReleaseRequest{Session: "s-9", Keys: []string{"order/9"}})
		},
		func() { _, errs[2] = m.Heartbeat(ctx, holdfast.HeartbeatRequest{Session: "s-3"}) },
		func() {
			_, errs[3] = m.Verify(ctx, holdfast.VerifyRequest{Session: "s-1", Key: "order/2"})
		},
		func() {
			_, errs[4] = m.SetAggregate(ctx, holdfast.Aggregate{Member: "asset/1", Root: "lease/1"})
		},
		func() { _, errs[5] = m.EndSession(ctx, holdfast.EndSessionRequest{Session: "s-4"}) },
	)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("operation %d: %v", i, err)
		}
	}
	want := [2][]string{
		{"order/1", "order/2", "order/9", "order/2", "asset/1", "lease/1"},
		{"s-1", "s-9", "s-3", "s-1", "s-4"},
	}
	if len(s.prepared) != 1 || !slices.Equal(s.prepared[0][0], want[0]) || !slices.Equal(s.prepared[0][1], want[1]) {
		t.Fatalf("prepared %v, want once %v", s.prepared, want)
	}

	s.prepared = nil
	var granted *holdfast.AcquireResult
	var released *holdfast.ReleaseResult
	var batchErrs [2]error
	err := m.Batch(ctx, func(ctx context.Context) {
		granted, batchErrs[0] = m.Acquire(ctx, acquireReq("order/5", "s-5"))
		released, batchErrs[1] = m.Release(ctx, holdfast.ReleaseRequest{Session: "s-1", Keys: []string{"order/1"}})
	})
	if err != nil || batchErrs[0] != nil || batchErrs[1] != nil {
		t.Fatalf("batch: %v, %v", err, batchErrs)
	}
	if granted.Locks[0].Key != "order/5" || len(released.Released) != 1 {
		t.Errorf("batch answers %v, %v", granted.Locks, released.Released)
	}
	want = [2][]string{{"order/5", "order/1"}, {"s-5", "s-1"}}
	if len(s.prepared) != 1 || !slices.Equal(s.prepared[0][0], want[0]) || !slices.Equal(s.prepared[0][1], want[1]) {
		t.Errorf("the batch prepared %v, want once %v", s.prepared, want)
	}
}

// Batches queue like single operations: batches and single calls that
// arrive together share one transaction, and the store is told what all
// of them touch.
func TestQueuedBatchesShareOneTransaction(t *testing.T) {
	t.Parallel()
	s, m := newPreparingManager(t)
	events, cancel := m.Subscribe("")
	defer cancel()
	ctx := context.Background()

	letGo := holdFirst(t, m, s)
	var (
		errs          [5]error
		single, first *holdfast.AcquireResult
		released      *holdfast.ReleaseResult
		batchErrs     [2]error
	)
	inOneGroup(t, m, letGo,
		func() {
			errs[0] = m.Batch(ctx, func(ctx context.Context) {
				first, errs[1] = m.Acquire(ctx, acquireReq("order/1", "s-1"))
				released, errs[2] = m.Release(ctx, holdfast.ReleaseRequest{Session: "s-1", Keys: []string{"order/1"}})
			})
		},
		func() { single, errs[3] = m.Acquire(ctx, acquireReq("order/2", "s-2")) },
		func() {
			errs[4] = m.Batch(ctx, func(ctx context.Context) {
				_, batchErrs[0] = m.Acquire(ctx, acquireReq("order/2", "s-3")) // s-2 holds it
				_, batchErrs[1] = m.Heartbeat(ctx, holdfast.HeartbeatRequest{Session: "s-3"})
			})
		},
	)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if got := s.updates.Load(); got != 3 {
		t.Errorf("%d store transactions, want 3 (the first, the held one, then one for both batches and the single call)", got)
	}
	if len(released.Released) != 1 || released.Released[0].Token != first.Locks[0].Token || single.Locks[0].Key != "order/2" {
		t.Errorf("answers: acquired %v, released %v, single %v", first.Locks, released.Released, single.Locks)
	}
	var locked *holdfast.LockedError
	if !errors.As(batchErrs[0], &locked) || locked.Conflicts[0].Holders[0].Owner.Session != "s-2" || batchErrs[1] != nil {
		t.Errorf("second batch: %v, want its acquire refused as held by s-2 and its heartbeat answered", batchErrs)
	}
	want := [2][]string{{"order/1", "order/1", "order/2", "order/2"}, {"s-1", "s-1", "s-2", "s-3", "s-3"}}
	if len(s.prepared) != 1 || !slices.Equal(s.prepared[0][0], want[0]) || !slices.Equal(s.prepared[0][1], want[1]) {
		t.Errorf("prepared %v, want once %v", s.prepared, want)
	}
	var got []string
	for range 3 {
		e := <-events
		got = append(got, string(e.Event)+" "+e.Lock.Key)
	}
	if want := []string{"acquired order/1", "released order/1", "acquired order/2"}; !slices.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
}

// A batch whose operation fails other than by refusing leaves the group
// it was queued in, which commits without it; then each of its
// operations runs in a transaction of its own.
func TestFailingBatchLeavesItsGroup(t *testing.T) {
	t.Parallel()
	s, m := newPreparingManager(t)
	ctx := context.Background()

	letGo := holdFirst(t, m, s)
	var (
		errs     [2]error
		batchErr [2]error
		calls    int
	)
	inOneGroup(t, m, letGo,
		func() { _, errs[0] = m.Acquire(ctx, acquireReq("order/1", "s-1")) },
		func() {
			errs[1] = m.Batch(ctx, func(ctx context.Context) {
				calls++
				_, batchErr[0] = m.Acquire(ctx, acquireReq("order/2", "s-2"))
				_, batchErr[1] = m.Acquire(ctx, acquireReq("poison/3", "s-3"))
			})
		},
	)
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("calls: %v", errs)
	}
	if batchErr[0] != nil || !errors.Is(batchErr[1], holdfast.ErrUnavailable) {
		t.Errorf("batch answers %v, want order/2 granted and poison/3 unavailable", batchErr)
	}
	if calls != 3 {
		t.Errorf("the batch's fn ran %d times, want 3 (gathering, in the group, then one transaction each)", calls)
	}
	// The first, the held one, the group (rolled back), the group
	// without the batch, then the batch's two operations alone.
	if got := s.updates.Load(); got != 6 {
		t.Errorf("%d store transactions, want 6", got)
	}
	if held := heldKeys(t, m); !slices.Equal(held, []string{"order/1", "order/2"}) {
		t.Errorf("held: %v, want order/1 and order/2", held)
	}
}

// When the store fails an operation because it cannot answer, the whole
// group fails with it, at once: running the others again without it, and
// then it alone, would only meet the same failure, each after as long.
// Nor is an operation taken out of the group before, for failing on its
// own (poison/), run alone once the group, run again without it, finds
// the store unable to answer.
func TestStoreDownFailsTheGroupAtOnce(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		keys []string
		// transactions: the held one, then the group's runs.
		transactions int64
	}{
		{[]string{"order/1", "down/2", "order/3"}, 2},
		{[]string{"order/1", "poison/2", "down/3"}, 3}, // not poison/2 alone
	} {
		t.Run(strings.Join(c.keys, ","), func(t *testing.T) {
			t.Parallel()
			s := newTapStore(nil)
			m := newTapManager(t, s)
			ctx := context.Background()
			letGo := holdFirst(t, m, s)
			errs := make([]error, len(c.keys))
			var ops []func()
			for i, key := range c.keys {
				ops = append(ops, func() { _, errs[i] = m.Acquire(ctx, acquireReq(key, fmt.Sprintf("s-%d", i))) })
			}
			inOneGroup(t, m, letGo, ops...)
			for i, err := range errs {
				if !errors.Is(err, holdfast.ErrUnavailable) || !errors.Is(err, errDownKey) {
					t.Errorf("acquire %s: %v, want the store's unavailability", c.keys[i], err)
				}
			}
			if got := s.updates.Load(); got != c.transactions {
				t.Errorf("%d store transactions, want %d", got, c.transactions)
			}
			wantNothingHeld(t, m, "")
		})
	}
}

// A batch that meets a store unable to answer is not run again one
// operation at a time.
func TestStoreDownFailsTheBatchAtOnce(t *testing.T) {
	t.Parallel()
	s := newTapStore(nil)
	m := newTapManager(t, s)
	calls := 0
	err := m.Batch(context.Background(), func(ctx context.Context) {
		calls++
		m.Acquire(ctx, acquireReq("order/4", "s-4"))
		m.Acquire(ctx, acquireReq("down/5", "s-5"))
	})
	if !errors.Is(err, errDownKey) {
		t.Errorf("Batch = %v, want the store's unavailability", err)
	}
	if got := s.updates.Load(); got != 1 || calls != 1 {
		t.Errorf("the batch took %d store transactions and %d runs of its fn, want 1 and 1", got, calls)
	}
}

// boundedStore bounds its transactions (store.Bounded), so that the
// Manager bounds the wait of queued operations too.
type boundedStore struct {
	*tapStore
	timeout time.Duration
}

func (s boundedStore) TransactionTimeout() time.Duration { return s.timeout }

// Over a store that bounds its transactions, an operation that has waited
// its turn longer than that bound fails unavailable without a transaction
// of its own: behind a hung store, each group ahead of it would otherwise
// add a whole bound to its wait. Here the bound is a nanosecond, so the
// operations queued behind the held transaction have waited too long by
// the time it returns.
func TestQueuedPastTheStoresBoundFail(t *testing.T) {
	t.Parallel()
	s := newTapStore(nil)
	s.prepares = true // so that a batch queues too
	obs := &observed{}
	m := newObservedManager(t, boundedStore{s, time.Nanosecond}, obs)
	ctx := context.Background()
	learnPreparing(t, m)
	before := s.updates.Load()
	letGo := holdFirst(t, m, s)
	var errs [3]error
	inOneGroup(t, m, letGo,
		func() { _, errs[0] = m.Acquire(ctx, acquireReq("order/1", "s-1")) },
		func() { _, errs[1] = m.Heartbeat(ctx, holdfast.HeartbeatRequest{Session: "s-2"}) },
		func() {
			errs[2] = m.Batch(ctx, func(ctx context.Context) {
				m.Acquire(ctx, acquireReq("order/2", "s-3"))
				m.Release(ctx, holdfast.ReleaseRequest{Keys: []string{"order/2"}, Session: "s-3"})
			})
		},
	)
	for i, err := range errs {
		if !errors.Is(err, holdfast.ErrUnavailable) || !strings.Contains(err.Error(), "longer than the store gives a transaction (1ns)") {
			t.Errorf("queued operation %d: %v, want unavailable for having waited too long", i, err)
		}
	}
	if got := s.updates.Load() - before; got != 1 {
		t.Errorf("%d store transactions, want only the held one", got)
	}
	wantNothingHeld(t, m, "")
	// The batch never ran, and its operations are observed all the same.
	failed := obs.failing("longer than the store gives a transaction")
	if want := []string{"acquire", "acquire", "heartbeat", "release"}; !slices.Equal(failed, want) {
		t.Errorf("observed failing: %v, want %v", failed, want)
	}
	// An operation that does not wait is not bounded.
	if _, err := m.Acquire(ctx, acquireReq("order/3", "s-3")); err != nil {
		t.Fatal(err)
	}
}

// countingTx counts the locks a transaction writes.
type countingTx struct {
	store.Tx
	n *atomic.Int64
}

func (t countingTx) PutLock(l store.Lock) error {
	t.n.Add(1)
	return t.Tx.PutLock(l)
}

func (t countingTx) Prepare(keys, sessions, reporting []string) error {
	return t.Tx.(store.Preparer).Prepare(keys, sessions, reporting)
}

// sizingStore records how many locks each transaction wrote.
type sizingStore struct {
	*tapStore
	mu    sync.Mutex
	sizes []int64
}

// Update records the size as the transaction's body ends, under the
// store's write lock, so that sizes come in commit order: two
// transactions in flight may return in either order.
func (s *sizingStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	return s.tapStore.Update(ctx, func(tx store.Tx) error {
		var n atomic.Int64
		err := fn(countingTx{tx, &n})
		s.mu.Lock()
		s.sizes = append(s.sizes, n.Load())
		s.mu.Unlock()
		return err
	})
}

// A batch counts its operations toward the bound of a group: batches
// queued together share a transaction only while they fit in it.
func TestBatchesCountTheirOperationsInAGroup(t *testing.T) {
	t.Parallel()
	tap := newTapStore(nil)
	tap.prepares = true
	s := &sizingStore{tapStore: tap}
	m := newObservedManager(t, s, nil)
	learnPreparing(t, m)
	ctx := context.Background()

	letGo := holdFirst(t, m, tap)
	var wg sync.WaitGroup
	for b := range 3 {
		queue(t, m, &wg, func() {
			err := m.Batch(ctx, func(ctx context.Context) {
				for i := range 60 {
					m.Acquire(ctx, acquireReq(fmt.Sprintf("order/%d/%d", b, i), fmt.Sprintf("s-%d-%d", b, i)))
				}
			})
			if err != nil {
				t.Errorf("batch %d: %v", b, err)
			}
		})
	}
	letGo()
	wg.Wait()
	// The first heartbeat and the held one, then two batches (120
	// operations, within 128), then the third.
	if want := []int64{0, 0, 120, 60}; !slices.Equal(s.sizes, want) {
		t.Errorf("locks written per transaction %v, want %v", s.sizes, want)
	}
}

// A panic in a batch's function reaches the batch's caller, not the
// caller that happened to lead its group, and the group commits without
// the batch.
func TestBatchPanicReachesItsOwnCaller(t *testing.T) {
	t.Parallel()
	s, m := newPreparingManager(t)
	ctx := context.Background()

	letGo := holdFirst(t, m, s)
	var (
		single   error
		panicked any
		calls    int
	)
	inOneGroup(t, m, letGo,
		func() { _, single = m.Acquire(ctx, acquireReq("order/1", "s-1")) },
		func() {
			panicked = panicOf(func() {
				m.Batch(ctx, func(ctx context.Context) {
					if calls++; calls == 2 { // in the group's transaction
						m.Acquire(ctx, acquireReq("order/2", "s-2"))
						panicInBatch()
					}
					m.Acquire(ctx, acquireReq("order/2", "s-2"))
				})
			})
		},
	)
	if single != nil {
		t.Errorf("the single call that led the group: %v", single)
	}
	if msg := fmt.Sprint(panicked); !strings.HasPrefix(msg, "boom\n") || !strings.Contains(msg, "panicInBatch") {
		t.Errorf("the batch's caller recovered %q, want boom and the stack of the goroutine that panicked", msg)
	}
	if held := heldKeys(t, m); !slices.Equal(held, []string{"order/1"}) {
		t.Errorf("held: %v, want order/1 only", held)
	}
	if calls != 2 {
		t.Errorf("the batch's fn ran %d times, want 2 (gathering, then the panic)", calls)
	}
}

func panicInBatch() { panic("boom") }

// flakyStore fails its first transaction on order/2 as if by a conflict
// worth a retry, then fails the retry before it runs anything.
type flakyStore struct {
	store.Store
	first atomic.Bool
}

var errCollided, errDown = errors.New("collided"), errors.New("store down")

type collidingTx struct{ store.Tx }

func (t collidingTx) PutLock(l store.Lock) error {
	if l.Key == "order/2" {
		return errCollided
	}
	return t.Tx.PutLock(l)
}

func (s *flakyStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	if s.first.CompareAndSwap(false, true) {
		s.Store.Update(ctx, func(tx store.Tx) error { return fn(collidingTx{tx}) })
		return errDown
	}
	return s.Store.Update(ctx, fn)
}

// A batch runs its operations one by one only when its own failure is
// what failed its transaction: the store's later, unrelated failure is
// the batch's answer.
func TestBatchAnswersTheStoresLastFailure(t *testing.T) {
	t.Parallel()
	s := &flakyStore{Store: memstore.New(memstore.Config{})}
	m := newObservedManager(t, s, nil)
	err := m.Batch(context.Background(), func(ctx context.Context) {
		m.Acquire(ctx, acquireReq("order/1", "s-1"))
		m.Acquire(ctx, acquireReq("order/2", "s-2"))
	})
	if !errors.Is(err, errDown) {
		t.Errorf("Batch = %v, want the store's %v", err, errDown)
	}
}

// Every operation of a batch is observed once, with the transaction's
// failure when it failed, those after the one that failed it included.
func TestBatchOperationsAreObservedWhenTheStoreFails(t *testing.T) {
	t.Parallel()
	obs := &observed{}
	s := &flakyStore{Store: memstore.New(memstore.Config{})}
	m := newObservedManager(t, s, obs)
	m.Batch(context.Background(), func(ctx context.Context) {
		m.Acquire(ctx, acquireReq("order/1", "s-1"))
		m.Acquire(ctx, acquireReq("order/2", "s-2"))
		m.Release(ctx, holdfast.ReleaseRequest{Session: "s-1", Keys: []string{"order/1"}})
	})
	want := "lock store unavailable, retry later: store down"
	if got := obs.list(); !slices.Equal(got, []string{"acquire: " + want, "acquire: " + want, "release: " + want}) {
		t.Errorf("observed %q", got)
	}
}

// deadStore fails every transaction, before running it, while down is
// set.
type deadStore struct {
	store.Store
	down atomic.Bool
}

func (s *deadStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	if s.down.Load() {
		return fmt.Errorf("dead store: %w", store.ErrUnavailable)
	}
	return s.Store.Update(ctx, fn)
}

// A batch the store fails before running it is observed too, by the
// names of its operations, once each: over a store that does not read
// ahead, and over one that does, where the batch ran before it failed.
func TestBatchesTheStoreNeverRanAreObserved(t *testing.T) {
	t.Parallel()
	fn := func(m *holdfast.Manager) func(ctx context.Context) {
		return func(ctx context.Context) {
			m.Acquire(ctx, acquireReq("order/1", "s-1"))
			m.Heartbeat(ctx, holdfast.HeartbeatRequest{Session: "s-1"})
		}
	}
	want := []string{"acquire", "heartbeat"}

	obs := &observed{}
	s := &deadStore{Store: memstore.New(memstore.Config{})}
	m := newObservedManager(t, s, obs)
	s.down.Store(true)
	if err := m.Batch(context.Background(), fn(m)); !errors.Is(err, holdfast.ErrUnavailable) {
		t.Fatalf("Batch = %v, want unavailable", err)
	}
	if got := obs.failing("store unavailable"); !slices.Equal(got, want) {
		t.Errorf("observed failing: %v, want %v", got, want)
	}

	// Where the store reads ahead, the batch runs before the store fails
	// it: observed once, not again by its names.
	obs = &observed{}
	tap := newTapStore(nil)
	tap.prepares = true
	m = newObservedManager(t, tap, obs)
	learnPreparing(t, m)
	err := m.Batch(context.Background(), func(ctx context.Context) {
		fn(m)(ctx)
		m.Acquire(ctx, acquireReq("down/2", "s-2"))
	})
	if !errors.Is(err, errDownKey) {
		t.Fatalf("Batch = %v, want the store's unavailability", err)
	}
	if got := obs.failing("store unavailable"); !slices.Equal(got, []string{"acquire", "acquire", "heartbeat"}) {
		t.Errorf("observed failing: %v, want each of the batch's operations once", got)
	}
}

// An operation that panics in a group panics on its own caller even when
// the group, run again without it, finds the store unable to answer; the
// others get the store's failure.
func TestPanicInAGroupTheStoreThenFails(t *testing.T) {
	t.Parallel()
	s := newTapStore(nil)
	obs := &observed{}
	m := newObservedManager(t, s, obs)
	ctx := context.Background()
	letGo := holdFirst(t, m, s)
	var errs [3]error
	var panicked any
	inOneGroup(t, m, letGo,
		func() { _, errs[0] = m.Acquire(ctx, acquireReq("order/1", "s-1")) },
		func() {
			panicked = panicOf(func() { _, errs[1] = m.Acquire(ctx, acquireReq("panic/2", "s-2")) })
		},
		func() { _, errs[2] = m.Acquire(ctx, acquireReq("down/3", "s-3")) },
	)
	if msg := fmt.Sprint(panicked); !strings.HasPrefix(msg, "boom: panic/2\n") {
		t.Errorf("the panicking acquire panicked with %q, want its own panic", msg)
	}
	for _, i := range []int{0, 2} {
		if !errors.Is(errs[i], errDownKey) {
			t.Errorf("acquire %d: %v, want the store's unavailability", i, errs[i])
		}
	}
	// The held one, the group, the group without panic/2.
	if got := s.updates.Load(); got != 3 {
		t.Errorf("%d store transactions, want 3", got)
	}
	if got := len(obs.list()); got != 4 {
		t.Errorf("%d operations observed, want 4: %q", got, obs.list())
	}
}

// heldKeys lists the keys held, in key order.
func heldKeys(t *testing.T, m *holdfast.Manager) []string {
	t.Helper()
	page, err := m.Locks(context.Background(), holdfast.LockQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, l := range page.Locks {
		keys = append(keys, l.Key)
	}
	return keys
}

// wantNothingHeld reports any lock m holds; after says when, for the
// message.
func wantNothingHeld(t *testing.T, m *holdfast.Manager, after string) {
	t.Helper()
	if held := heldKeys(t, m); len(held) != 0 {
		t.Errorf("held %v%s, want nothing", held, after)
	}
}

// panicOf calls fn and returns what it panicked with, nil if nothing.
func panicOf(fn func()) (v any) {
	defer func() { v = recover() }()
	fn()
	return nil
}

// An operation that panics in a group's transaction panics on its own
// caller's goroutine, not on the leader's (another caller's), and the
// other operations of its group are answered as if it had not been
// there.
func TestPanickingOperationReachesOnlyItsCaller(t *testing.T) {
	t.Parallel()
	s := newTapStore(nil)
	m := newTapManager(t, s)
	ctx := context.Background()

	letGo := holdFirst(t, m, s)
	var (
		first, last error
		panicked    any
	)
	inOneGroup(t, m, letGo,
		func() { _, first = m.Acquire(ctx, acquireReq("order/1", "s-1")) },
		func() { panicked = panicOf(func() { m.Acquire(ctx, acquireReq("panic/1", "s-2")) }) },
		func() { _, last = m.Acquire(ctx, acquireReq("order/3", "s-3")) },
	)

	if first != nil || last != nil {
		t.Fatalf("the group's other operations: %v, %v", first, last)
	}
	if msg := fmt.Sprint(panicked); !strings.HasPrefix(msg, "boom: panic/1\n") || !strings.Contains(msg, "tapTx.PutLock") {
		t.Errorf("the panicking caller recovered %q, want boom and the stack of the goroutine that panicked", msg)
	}
	if _, err := m.Acquire(ctx, acquireReq("order/4", "s-4")); err != nil {
		t.Fatalf("an acquire after the panic: %v", err)
	}
	if held, want := heldKeys(t, m), []string{"order/1", "order/3", "order/4"}; !slices.Equal(held, want) {
		t.Errorf("held %v, want %v", held, want)
	}
}

// A panic in the store, outside any operation, is raised again on the
// goroutine of the group's leader; every other caller of the group is
// told that the store failed them, and later operations go on. So too
// when the store ends the leader's goroutine.
func TestStorePanicAnswersTheWholeGroup(t *testing.T) {
	t.Parallel()
	t.Run("panic", func(t *testing.T) { t.Parallel(); storeFailsGroup(t, false) })
	t.Run("Goexit", func(t *testing.T) { t.Parallel(); storeFailsGroup(t, true) })
}

func storeFailsGroup(t *testing.T, exit bool) {
	s := newTapStore(nil)
	m := newTapManager(t, s)
	ctx := context.Background()

	letGo := holdFirst(t, m, s)
	if exit { // the held transaction is past the store's checks already
		s.exits.Store(1)
	} else {
		s.panics.Store(1)
	}
	var (
		errs     [2]error
		panicked any
	)
	inOneGroup(t, m, letGo,
		func() { panicked = panicOf(func() { m.Acquire(ctx, acquireReq("order/1", "s-1")) }) },
		func() { _, errs[0] = m.Acquire(ctx, acquireReq("order/2", "s-2")) },
		func() { _, errs[1] = m.Heartbeat(ctx, holdfast.HeartbeatRequest{Session: "s-3"}) },
	)

	if want := any("store boom"); exit {
		if panicked != nil {
			t.Errorf("the group's leader recovered %v, want its goroutine ended", panicked)
		}
	} else if panicked != want {
		t.Errorf("the group's leader recovered %v, want the store's panic", panicked)
	}
	for i, err := range errs {
		if !errors.Is(err, holdfast.ErrUnavailable) {
			t.Errorf("follower %d: %v, want ErrUnavailable", i, err)
		}
	}
	if _, err := m.Acquire(ctx, acquireReq("order/2", "s-2")); err != nil {
		t.Fatalf("an acquire after the panic: %v", err)
	}
	if held := heldKeys(t, m); !slices.Equal(held, []string{"order/2"}) {
		t.Errorf("held %v, want order/2 alone", held)
	}
}

// An operation that panics in a batch fails the whole batch, as a panic
// in the batch's own function does: nothing of it is kept, the operation
// runs once, and Batch raises the panic on its caller.
func TestOperationPanicFailsItsBatch(t *testing.T) {
	t.Parallel()
	for _, prepares := range []bool{false, true} {
		t.Run(fmt.Sprintf("prepares=%v", prepares), func(t *testing.T) {
			t.Parallel()
			s := newTapStore(nil)
			s.prepares = prepares
			m := newTapManager(t, s)
			ctx := context.Background()
			learnPreparing(t, m)

			panicked := panicOf(func() {
				m.Batch(ctx, func(ctx context.Context) {
					m.Acquire(ctx, acquireReq("order/1", "s-1"))
					m.Acquire(ctx, acquireReq("panic/2", "s-2"))
				})
			})
			if msg := fmt.Sprint(panicked); !strings.HasPrefix(msg, "boom: panic/2\n") || !strings.Contains(msg, "tapTx.PutLock") {
				t.Errorf("Batch's caller recovered %q, want boom and the stack of the goroutine that panicked", msg)
			}
			if n := s.lockPanics.Load(); n != 1 {
				t.Errorf("the panicking operation ran %d times, want once", n)
			}
			wantNothingHeld(t, m, " after the batch panicked")
		})
	}
}

// An operation that panicked panics on its caller even if the store runs
// its transaction again: the operation does not run again, and nothing
// of it is kept.
func TestPanicOutlivesTheStoresRetry(t *testing.T) {
	t.Parallel()
	s := newTapStore(nil)
	m := newTapManager(t, s)
	ctx := context.Background()

	s.retryNext.Store(true)
	panicked := panicOf(func() { m.Acquire(ctx, acquireReq("retry/1", "s-1")) })
	if msg := fmt.Sprint(panicked); !strings.HasPrefix(msg, "boom: retry/1\n") {
		t.Errorf("the caller recovered %q, want the first run's panic", msg)
	}
	if n := s.lockPanics.Load(); n != 1 {
		t.Errorf("the operation panicked %d times, want once", n)
	}
	wantNothingHeld(t, m, " after the operation panicked")
}

// commitsObserved records what a CommitObserver is told of commits.
type commitsObserved struct {
	observed
	commits []int // operations of each commit, in order
}

func (o *commitsObserved) ObserveCommit(ops int, d time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if d < 0 {
		ops = -1 // a negative time is wrong: the test fails on it
	}
	o.commits = append(o.commits, ops)
}

// panickyCommits is a CommitObserver that panics when told of a commit
// of several operations, once.
type panickyCommits struct {
	observed
	done atomic.Bool
}

func (o *panickyCommits) ObserveCommit(ops int, _ time.Duration) {
	if ops > 1 && o.done.CompareAndSwap(false, true) {
		panic("observer boom")
	}
}

// A CommitObserver that panics is told before the callers are woken, so
// that its panic, which the group's leader raises, does not wake them
// twice: a second wake-up, left in a reused operation's channel, would
// answer a later operation before it ran.
func TestCommitObserverPanicWakesEachCallerOnce(t *testing.T) {
	t.Parallel()
	s := newTapStore(nil)
	obs := &panickyCommits{}
	m := newObservedManager(t, s, obs)
	ctx := context.Background()
	letGo := holdFirst(t, m, s)
	var panicked any
	inOneGroup(t, m, letGo,
		func() { panicked = panicOf(func() { m.Acquire(ctx, acquireReq("order/1", "s-1")) }) },
		func() { m.Acquire(ctx, acquireReq("order/2", "s-2")) },
	)
	if fmt.Sprint(panicked) != "observer boom" {
		t.Fatalf("the group's leader panicked with %v, want the observer's panic", panicked)
	}
	// Every later operation runs before it is answered.
	for round := range 20 {
		letGo := holdFirst(t, m, s)
		keys := []string{fmt.Sprintf("later/%d/a", round), fmt.Sprintf("later/%d/b", round), fmt.Sprintf("later/%d/c", round)}
		var results [3]*holdfast.AcquireResult
		var errs [3]error
		var ops []func()
		for i, key := range keys {
			ops = append(ops, func() { results[i], errs[i] = m.Acquire(ctx, acquireReq(key, "s-later")) })
		}
		inOneGroup(t, m, letGo, ops...)
		for i, key := range keys {
			if errs[i] != nil || results[i] == nil || len(results[i].Locks) != 1 || results[i].Locks[0].Key != key {
				t.Fatalf("round %d: acquire %s = %+v, %v: answered without running", round, key, results[i], errs[i])
			}
		}
	}
}

// sorted lists the commits' operations in ascending order: over a store
// that merges commits, a group may finish before the one ahead of it.
func (o *commitsObserved) sorted() []int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Sorted(slices.Values(o.commits))
}

// A CommitObserver learns how many operations shared each committed
// transaction: the callers queued behind one transaction share the next,
// a batch counts its operations (refusals too), and a transaction that
// failed is not a commit.
func TestCommitObserverCountsTheOperationsOfEachCommit(t *testing.T) {
	t.Parallel()
	s := newTapStore(nil)
	obs := &commitsObserved{}
	m := newObservedManager(t, s, obs)
	ctx := t.Context()

	letGo := holdFirst(t, m, s)
	const n = 10
	ops := make([]func(), n)
	for i := range ops {
		ops[i] = func() {
			if _, err := m.Acquire(ctx, acquireReq(fmt.Sprintf("order/%d", i), fmt.Sprintf("s-%d", i))); err != nil {
				t.Errorf("acquire %d: %v", i, err)
			}
		}
	}
	inOneGroup(t, m, letGo, ops...)
	if got, want := obs.sorted(), []int{1, n}; !slices.Equal(got, want) {
		t.Fatalf("commits of %v operations, want %v (the held heartbeat, then the %d queued)", got, want, n)
	}

	err := m.Batch(ctx, func(ctx context.Context) {
		m.Acquire(ctx, acquireReq("order/0", "s-other")) // refused: s-0 holds it
		m.Acquire(ctx, acquireReq("order/new", "s-other"))
		m.Release(ctx, holdfast.ReleaseRequest{Session: "s-1", Keys: []string{"order/1"}})
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := obs.sorted(), []int{1, 3, n}; !slices.Equal(got, want) {
		t.Fatalf("commits of %v operations, want %v (then the batch of 3)", got, want)
	}

	if _, err := m.Acquire(ctx, acquireReq("poison/1", "s-1")); err == nil {
		t.Fatal("an acquire of a poisoned key succeeded")
	}
	if got := obs.sorted(); len(got) != 3 {
		t.Errorf("commits of %v operations after a failed transaction, want it not counted", got)
	}
}

// Over a store that reads ahead, a batch queues with single operations and
// shares their commit; an operation that fails other than by refusing is
// left out of the group's commit, and its own failed transaction is not
// one.
func TestCommitObserverCountsABatchInAGroup(t *testing.T) {
	t.Parallel()
	s := newTapStore(nil)
	s.prepares = true
	obs := &commitsObserved{}
	m := newObservedManager(t, s, obs)
	learnPreparing(t, m)
	ctx := t.Context()

	acquire := func(key string) func() {
		return func() { m.Acquire(ctx, acquireReq(key, "s-"+key)) }
	}
	inOneGroup(t, m, holdFirst(t, m, s),
		func() {
			m.Batch(ctx, func(ctx context.Context) {
				m.Acquire(ctx, acquireReq("a/1", "s-a"))
				m.Acquire(ctx, acquireReq("a/2", "s-a"))
			})
		},
		acquire("b/1"), acquire("poison/1"), acquire("b/2"))
	// The learning heartbeat, the held one, then the group without the
	// poisoned acquire: the batch's two operations and two more.
	if got, want := obs.sorted(), []int{1, 1, 4}; !slices.Equal(got, want) {
		t.Errorf("commits of %v operations, want %v", got, want)
	}
}

// unsureStore fails transactions as a store that could not be reached
// does, per its mode: before running them, or after committing them (a
// commit whose answer was lost).
type unsureStore struct {
	store.Store
	mode atomic.Int32 // one of answer, failBefore, failAfter
}

const (
	answer = iota
	failBefore
	failAfter
	panicAfter
)

func (s *unsureStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	switch s.mode.Load() {
	case failBefore:
		return fmt.Errorf("not reached: %w", store.ErrUnavailable)
	case failAfter:
		if err := s.Store.Update(ctx, fn); err != nil {
			return err
		}
		return fmt.Errorf("committed, but the answer was lost: %w", store.ErrUnavailable)
	case panicAfter:
		if err := s.Store.Update(ctx, fn); err != nil {
			return err
		}
		panic("the store panicked after committing")
	}
	return s.Store.Update(ctx, fn)
}

// A transaction the store may have committed although it failed drops
// every subscriber, which then finds its entries in the audit log; one
// the store failed before running it does not.
func TestSubscribersResumeAfterACommitOfUnknownOutcome(t *testing.T) {
	t.Parallel()
	s := &unsureStore{Store: memstore.New(memstore.Config{})}
	m := newObservedManager(t, s, nil)
	ctx := t.Context()
	entries, cancel := m.Subscribe("")
	defer cancel()

	s.mode.Store(failBefore)
	if _, err := m.Acquire(ctx, acquireReq("order/1", "s-1")); !errors.Is(err, holdfast.ErrUnavailable) {
		t.Fatalf("acquire the store did not reach = %v, want unavailable", err)
	}
	s.mode.Store(answer)
	if _, err := m.Acquire(ctx, acquireReq("order/2", "s-2")); err != nil {
		t.Fatal(err)
	}
	if e, ok := <-entries; !ok || e.Lock.Key != "order/2" {
		t.Fatalf("subscriber got %+v (open %v), want the acquire of order/2: a transaction never run dropped it", e, ok)
	}

	s.mode.Store(failAfter)
	if _, err := m.Acquire(ctx, acquireReq("order/3", "s-3")); !errors.Is(err, holdfast.ErrUnavailable) {
		t.Fatalf("acquire whose answer was lost = %v, want unavailable", err)
	}
	select {
	case e, ok := <-entries:
		if ok {
			t.Fatalf("subscriber got %+v, want its channel closed", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a commit of unknown outcome left the subscriber waiting for an entry it will never get")
	}
	s.mode.Store(answer)
	page, err := m.Audit(ctx, holdfast.AuditQuery{Key: "order/3"})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Entries) != 1 || page.Entries[0].Event != holdfast.EventAcquired {
		t.Fatalf("audit of order/3 = %+v, want its acquire, where the dropped subscriber resumes", page.Entries)
	}

	// A transaction that wrote no audit entry (a heartbeat) has nothing
	// a subscriber could miss.
	entries, cancel = m.Subscribe("")
	defer cancel()
	s.mode.Store(failAfter)
	if _, err := m.Heartbeat(ctx, holdfast.HeartbeatRequest{Session: "s-3"}); !errors.Is(err, holdfast.ErrUnavailable) {
		t.Fatalf("heartbeat whose answer was lost = %v, want unavailable", err)
	}
	select {
	case e, ok := <-entries:
		t.Fatalf("after a heartbeat whose answer was lost the subscriber got %+v (open %v), want nothing", e, ok)
	default:
	}
	// Nor does a store that panics after committing get past unseen.
	s.mode.Store(panicAfter)
	func() {
		defer func() { recover() }()
		m.Acquire(ctx, acquireReq("order/4", "s-4"))
	}()
	s.mode.Store(answer)
	select {
	case e, ok := <-entries:
		if ok {
			t.Fatalf("subscriber got %+v, want its channel closed by the panic, not before", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a store that panicked after committing left the subscriber waiting")
	}
}
