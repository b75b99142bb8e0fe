package histcheck_test

import (
	"context"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/client"
	"github.com/holdfast/holdfast/internal/histcheck"
	"github.com/holdfast/holdfast/internal/pgtest"
	"github.com/holdfast/holdfast/logstore"
	"github.com/holdfast/holdfast/memstore"
	"github.com/holdfast/holdfast/pebblestore"
	"github.com/holdfast/holdfast/pgstore"
	"github.com/holdfast/holdfast/server"
	"github.com/holdfast/holdfast/store"
)

const longTTL = 24 * time.Hour

// serve runs a real HTTP server over a Manager on st and returns a client
// of it.
func serve(t testing.TB, st store.Store) holdfast.Service {
	t.Helper()
	return serveConfig(t, st, holdfast.Config{})
}

// serveConfig is serve with a Manager configured by cfg.
func serveConfig(t testing.TB, st store.Store, cfg holdfast.Config) holdfast.Service {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.Logger = quiet
	mgr, err := holdfast.New(st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Manager: mgr, Anonymous: true, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		hs.Close()
		mgr.Close()
		st.Close()
	})
	c, err := client.New(client.Config{BaseURL: hs.URL})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func runAndCheck(t *testing.T, svc holdfast.Service, w histcheck.Workload) error {
	t.Helper()
	rec := histcheck.NewRecorder(longTTL)
	w.Run(context.Background(), svc, rec)
	if err := w.ReadAll(context.Background(), svc, rec, w.Clients); err != nil {
		t.Fatal(err)
	}
	h := rec.History()
	counts := map[histcheck.Outcome]int{}
	losses := 0
	for _, op := range h {
		counts[op.Output.Outcome]++
		losses += len(op.Output.Losses)
	}
	t.Logf("%d operations: %v; heartbeats reported %d lost locks", len(h), counts, losses)
	if counts[histcheck.Locked] == 0 || counts[histcheck.OK] == 0 || losses == 0 {
		t.Fatalf("the workload made no contention or no losses (%v, %d): it proves nothing", counts, losses)
	}
	return histcheck.Check(h, histcheck.CheckConfig{VisualizeDir: histcheck.VisualizeDir()})
}

// TestRealStoresPass runs the workload over the real server on each store
// that exists and checks the history.
func TestRealStoresPass(t *testing.T) {
	t.Parallel()
	stores := map[string]func(t *testing.T) store.Store{
		"memstore": func(*testing.T) store.Store { return memstore.New(memstore.Config{}) },
		"logstore": func(t *testing.T) store.Store {
			st, err := logstore.Open(filepath.Join(t.TempDir(), "data"), logstore.Config{})
			if err != nil {
				t.Fatal(err)
			}
			return st
		},
		// pebblestore still serves directories it wrote before holdfast
		// serve moved to logstore.
		"pebblestore": func(t *testing.T) store.Store {
			st, err := pebblestore.Open(filepath.Join(t.TempDir(), "data"), pebblestore.Config{})
			if err != nil {
				t.Fatal(err)
			}
			return st
		},
		"pgstore": func(t *testing.T) store.Store {
			dsn := pgtest.SharedDSN(t)
			schema := newSchema(t, dsn)
			pool, err := pgxpool.New(context.Background(), dsn)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			st, err := pgstore.New(context.Background(), pool, pgstore.Config{Schema: schema})
			if err != nil {
				t.Fatal(err)
			}
			return st
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			w := histcheck.Workload{Families: 4, Clients: 8, Ops: 60, Seed: 1}
			if err := runAndCheck(t, serve(t, open(t)), w); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// leakyStore is a broken store: now and then its Related misses a lock,
// so the Manager does not see a holder and grants twice.
type leakyStore struct {
	store.Store
	calls atomic.Uint64
}

func (s *leakyStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	return s.Store.Update(ctx, func(tx store.Tx) error { return fn(&leakyTx{Tx: tx, s: s}) })
}

type leakyTx struct {
	store.Tx
	s *leakyStore
}

func (tx *leakyTx) Related(key string, fn func(store.Lock) bool) error {
	return tx.Tx.Related(key, func(l store.Lock) bool {
		if tx.s.calls.Add(1)%5 == 0 {
			return true // missed
		}
		return fn(l)
	})
}

// TestCheckerCatchesDoubleGrants proves the checker can fail: the same
// workload over a store that occasionally double-grants must not pass.
func TestCheckerCatchesDoubleGrants(t *testing.T) {
	t.Parallel()
	st := &leakyStore{Store: memstore.New(memstore.Config{})}
	w := histcheck.Workload{Families: 4, Clients: 8, Ops: 60, Seed: 1}
	err := runAndCheck(t, serve(t, st), w)
	if err == nil {
		t.Fatal("the history over a store that double-grants passed the check")
	}
	t.Logf("caught, as it must be: %v", err)
}

// op builds a recorded operation; ret < 0 means unknown outcome.
func op(client int, call, ret int64, in histcheck.Input, out histcheck.Output) histcheck.Op {
	if ret < 0 {
		ret = math.MaxInt64
	}
	return histcheck.Op{Client: client, Call: call, Return: ret, Input: in, Output: out}
}

func acq(session, key string) histcheck.Input {
	return histcheck.Input{Kind: histcheck.Acquire, Family: "f", Session: session, Keys: []string{key}}
}

func granted(session, key string, token uint64) histcheck.Output {
	return histcheck.Output{Outcome: histcheck.OK, Grants: []histcheck.Grant{{Key: key, Session: session, Token: token}}}
}

func holders(key string) histcheck.Input {
	return histcheck.Input{Kind: histcheck.Holders, Family: "f", Keys: []string{key}}
}

func listed(gs ...histcheck.Grant) histcheck.Output {
	return histcheck.Output{Outcome: histcheck.OK, Grants: gs}
}

func tick(ms int64) histcheck.Input {
	return histcheck.Input{Kind: histcheck.Tick, Family: "f", Now: ms}
}

// expiring is a lock taken at 1000 ms for two seconds, the clock moved to
// at, and another session's grant of the same key.
func expiring(at int64) []histcheck.Op {
	ok := histcheck.Output{Outcome: histcheck.OK}
	in := acq("a", "k")
	in.TTL = 2 * time.Second
	first := granted("a", "k", 1)
	first.Grants[0].Expires = 3000
	in2 := acq("b", "k")
	in2.TTL = 2 * time.Second
	second := granted("b", "k", 2)
	second.Grants[0].Expires = at + 2000
	return []histcheck.Op{
		op(9, 0, 1, tick(1000), ok),
		op(0, 2, 3, in, first),
		op(9, 4, 5, tick(at), ok),
		op(1, 6, 7, in2, second),
	}
}

func heartbeat(session string) histcheck.Input {
	return histcheck.Input{Kind: histcheck.Heartbeat, Family: "f", Session: session}
}

// forced is a grant, its force release and two heartbeats of its holder.
func forced(first, second histcheck.Output) []histcheck.Op {
	return []histcheck.Op{
		op(0, 0, 1, acq("a", "k"), granted("a", "k", 1)),
		op(1, 2, 3, histcheck.Input{Kind: histcheck.ForceRelease, Family: "f", Keys: []string{"k"}},
			histcheck.Output{Outcome: histcheck.OK, Grants: []histcheck.Grant{{Key: "k", Session: "a", Token: 1}}}),
		op(0, 4, 5, heartbeat("a"), first),
		op(0, 6, 7, heartbeat("a"), second),
	}
}

// restarted is a grant, its force release, the end of its session, a
// heartbeat of the ended session if told, an acquire that starts the
// session again and its next heartbeat.
func restarted(told bool, last histcheck.Output) []histcheck.Op {
	h := []histcheck.Op{
		op(0, 0, 1, acq("a", "k"), granted("a", "k", 1)),
		op(1, 2, 3, histcheck.Input{Kind: histcheck.ForceRelease, Family: "f", Keys: []string{"k"}},
			histcheck.Output{Outcome: histcheck.OK, Grants: []histcheck.Grant{{Key: "k", Session: "a", Token: 1}}}),
		op(0, 4, 5, histcheck.Input{Kind: histcheck.EndSession, Family: "f", Session: "a"}, histcheck.Output{Outcome: histcheck.OK}),
	}
	if told {
		h = append(h, op(0, 6, 7, heartbeat("a"), histcheck.Output{Outcome: histcheck.Lost}))
	}
	return append(h, op(0, 8, 9, acq("a", "j"), granted("a", "j", 2)), op(0, 10, 11, heartbeat("a"), last))
}

// ended is a grant, the end of its session and a heartbeat of it.
func ended(last histcheck.Output) []histcheck.Op {
	return []histcheck.Op{
		op(0, 0, 1, acq("a", "k"), granted("a", "k", 1)),
		op(0, 2, 3, histcheck.Input{Kind: histcheck.EndSession, Family: "f", Session: "a"},
			histcheck.Output{Outcome: histcheck.OK, Grants: []histcheck.Grant{{Key: "k", Session: "a", Token: 1}}}),
		op(0, 4, 5, heartbeat("a"), last),
	}
}

// idling is a grant at 1000 ms to a session with a two-second idle
// timeout, maybe a heartbeat of it at 2500, the clock at 3000, and another
// session's grant of the same key.
func idling(active bool) []histcheck.Op {
	ok := histcheck.Output{Outcome: histcheck.OK}
	in := acq("a", "k")
	in.TTL, in.IdleTimeout = time.Hour, 2*time.Second
	first := granted("a", "k", 1)
	first.Grants[0].Expires = 1000 + time.Hour.Milliseconds()
	in2 := acq("b", "k")
	in2.TTL = time.Hour
	second := granted("b", "k", 2)
	second.Grants[0].Expires = 3000 + time.Hour.Milliseconds()
	h := []histcheck.Op{op(9, 0, 1, tick(1000), ok), op(0, 2, 3, in, first)}
	if active {
		h = append(h, op(9, 4, 5, tick(2500), ok), op(0, 6, 7, heartbeat("a"), histcheck.Output{Outcome: histcheck.OK, Held: 1}))
	}
	return append(h, op(9, 8, 9, tick(3000), ok), op(1, 10, 11, in2, second))
}

// TestModel checks the model on small hand-written histories, legal and
// not.
func TestModel(t *testing.T) {
	t.Parallel()
	unknown := histcheck.Output{Outcome: histcheck.Unknown}
	cases := []struct {
		name  string
		legal bool
		h     []histcheck.Op
	}{
		{"two exclusive grants on one key", false, []histcheck.Op{
			op(0, 0, 10, acq("a", "k"), granted("a", "k", 1)),
			op(1, 20, 30, acq("b", "k"), granted("b", "k", 2)),
		}},
		{"exclusive grant under a held ancestor", false, []histcheck.Op{
			op(0, 0, 10, acq("a", "k"), granted("a", "k", 1)),
			op(1, 20, 30, acq("b", "k/c"), granted("b", "k/c", 2)),
		}},
		{"grant after release", true, []histcheck.Op{
			op(0, 0, 10, acq("a", "k"), granted("a", "k", 1)),
			op(0, 11, 12, histcheck.Input{Kind: histcheck.Release, Family: "f", Session: "a", Keys: []string{"k"}},
				histcheck.Output{Outcome: histcheck.OK, Grants: []histcheck.Grant{{Key: "k", Session: "a", Token: 1}}}),
			op(1, 20, 30, acq("b", "k"), granted("b", "k", 2)),
		}},
		{"token going backwards on a related key", false, []histcheck.Op{
			op(0, 0, 10, acq("a", "k/c"), granted("a", "k/c", 5)),
			op(1, 20, 30, acq("b", "k/d"), granted("b", "k/d", 6)),
			op(2, 40, 50, acq("c", "k"), histcheck.Output{Outcome: histcheck.Locked, Grants: []histcheck.Grant{
				{Key: "k/c", Session: "a", Token: 5}, {Key: "k/d", Session: "b", Token: 6}}}),
			op(0, 60, 70, histcheck.Input{Kind: histcheck.Release, Family: "f", Session: "a", Keys: []string{"k/c"}},
				histcheck.Output{Outcome: histcheck.OK, Grants: []histcheck.Grant{{Key: "k/c", Session: "a", Token: 5}}}),
			op(2, 80, 90, acq("c", "k/c/x"), granted("c", "k/c/x", 4)),
		}},
		{"overlapping grants of unrelated keys seen out of token order", true, []histcheck.Op{
			op(0, 0, 50, acq("a", "k/c"), granted("a", "k/c", 5)),
			op(1, 10, 20, acq("b", "k/d"), granted("b", "k/d", 6)),
			op(2, 30, 40, holders("k"), listed(histcheck.Grant{Key: "k/d", Session: "b", Token: 6})),
		}},
		{"re-entrant acquire keeps the token", true, []histcheck.Op{
			op(0, 0, 10, acq("a", "k"), granted("a", "k", 5)),
			op(0, 20, 30, acq("a", "k"), granted("a", "k", 5)),
		}},
		{"re-entrant acquire with another token", false, []histcheck.Op{
			op(0, 0, 10, acq("a", "k"), granted("a", "k", 5)),
			op(0, 20, 30, acq("a", "k"), granted("a", "k", 6)),
		}},
		{"acknowledged grant missing from a later read", false, []histcheck.Op{
			op(0, 0, 10, acq("a", "k"), granted("a", "k", 1)),
			op(1, 20, 30, holders("k"), listed()),
		}},
		{"unknown acquire that happened", true, []histcheck.Op{
			op(0, 0, -1, acq("a", "k"), unknown),
			op(1, 20, 30, holders("k"), listed(histcheck.Grant{Key: "k", Session: "a", Token: 3})),
			op(1, 40, 50, acq("b", "j"), granted("b", "j", 4)),
		}},
		{"unknown acquire that did not happen", true, []histcheck.Op{
			op(0, 0, -1, acq("a", "k"), unknown),
			op(1, 20, 30, holders("k"), listed()),
		}},
		{"unknown acquire revealed with a token already used", false, []histcheck.Op{
			op(0, 0, 10, acq("b", "j"), granted("b", "j", 3)),
			op(0, 11, -1, acq("a", "k"), unknown),
			op(1, 20, 30, holders("k"), listed(histcheck.Grant{Key: "k", Session: "a", Token: 3})),
		}},
		{"an unknown acquire cannot land after the cut", false, []histcheck.Op{
			op(0, 0, 15, acq("a", "k"), unknown),
			op(1, 20, 30, holders("k"), listed()),
			op(1, 40, 50, holders("k"), listed(histcheck.Grant{Key: "k", Session: "a", Token: 3})),
		}},
		{"refusal naming the holder", true, []histcheck.Op{
			op(0, 0, 10, acq("a", "k"), granted("a", "k", 1)),
			op(1, 20, 30, acq("b", "k/c"), histcheck.Output{Outcome: histcheck.Locked, Grants: []histcheck.Grant{{Key: "k", Session: "a", Token: 1}}}),
		}},
		{"refusal with nobody holding", false, []histcheck.Op{
			op(1, 20, 30, acq("b", "k/c"), histcheck.Output{Outcome: histcheck.Locked}),
		}},
		{"shared holders together", true, []histcheck.Op{
			op(0, 0, 10, histcheck.Input{Kind: histcheck.Acquire, Family: "f", Session: "a", Keys: []string{"k"}, Shared: true},
				histcheck.Output{Outcome: histcheck.OK, Grants: []histcheck.Grant{{Key: "k", Session: "a", Shared: true, Token: 1}}}),
			op(1, 20, 30, histcheck.Input{Kind: histcheck.Acquire, Family: "f", Session: "b", Keys: []string{"k"}, Shared: true},
				histcheck.Output{Outcome: histcheck.OK, Grants: []histcheck.Grant{{Key: "k", Session: "b", Shared: true, Token: 2}}}),
		}},
		{"takeover by the same user", true, []histcheck.Op{
			op(0, 0, 10, histcheck.Input{Kind: histcheck.Acquire, Family: "f", Session: "a", User: "ann", Keys: []string{"k"}},
				histcheck.Output{Outcome: histcheck.OK, Grants: []histcheck.Grant{{Key: "k", Session: "a", User: "ann", Token: 1}}}),
			op(1, 20, 30, histcheck.Input{Kind: histcheck.Acquire, Family: "f", Session: "b", User: "ann", Keys: []string{"k"}, Takeover: true},
				histcheck.Output{Outcome: histcheck.OK, Grants: []histcheck.Grant{{Key: "k", Session: "b", User: "ann", Token: 2}}}),
			op(0, 40, 50, histcheck.Input{Kind: histcheck.Verify, Family: "f", Session: "a", Keys: []string{"k"}},
				histcheck.Output{Outcome: histcheck.Lost}),
		}},
		{"takeover by another user", false, []histcheck.Op{
			op(0, 0, 10, histcheck.Input{Kind: histcheck.Acquire, Family: "f", Session: "a", User: "ann", Keys: []string{"k"}},
				histcheck.Output{Outcome: histcheck.OK, Grants: []histcheck.Grant{{Key: "k", Session: "a", User: "ann", Token: 1}}}),
			op(1, 20, 30, histcheck.Input{Kind: histcheck.Acquire, Family: "f", Session: "b", User: "bob", Keys: []string{"k"}, Takeover: true},
				histcheck.Output{Outcome: histcheck.OK, Grants: []histcheck.Grant{{Key: "k", Session: "b", User: "bob", Token: 2}}}),
		}},
		{"force release frees the key", true, []histcheck.Op{
			op(0, 0, 10, acq("a", "k"), granted("a", "k", 1)),
			op(2, 11, 12, histcheck.Input{Kind: histcheck.ForceRelease, Family: "f", Keys: []string{"k"}},
				histcheck.Output{Outcome: histcheck.OK, Grants: []histcheck.Grant{{Key: "k", Session: "a", Token: 1}}}),
			op(1, 20, 30, acq("b", "k"), granted("b", "k", 2)),
		}},
		{"stale token release", true, []histcheck.Op{
			op(0, 0, 10, acq("a", "k"), granted("a", "k", 7)),
			op(0, 11, 12, histcheck.Input{Kind: histcheck.Release, Family: "f", Session: "a", Keys: []string{"k"}, Token: 6},
				histcheck.Output{Outcome: histcheck.Stale, Grants: []histcheck.Grant{{Key: "k", Session: "a", Token: 7}}}),
			op(1, 20, 30, holders("k"), listed(histcheck.Grant{Key: "k", Session: "a", Token: 7})),
		}},
		{"a lock is free once the clock passes its expiry", true, expiring(3000)},
		{"a lock is not free before its expiry", false, expiring(1999)},
		{"the clock going backwards", false, []histcheck.Op{
			op(0, 0, 1, tick(5000), histcheck.Output{Outcome: histcheck.OK}),
			op(0, 2, 3, tick(4000), histcheck.Output{Outcome: histcheck.OK}),
		}},
		{"a heartbeat reports a force release once", true, forced(
			histcheck.Output{Outcome: histcheck.OK, Losses: []histcheck.Loss{{Key: "k", Token: 1, Reason: "force_released"}}},
			histcheck.Output{Outcome: histcheck.OK})},
		{"a heartbeat hides a force release", false, forced(histcheck.Output{Outcome: histcheck.OK}, histcheck.Output{Outcome: histcheck.OK})},
		{"a heartbeat reports a force release twice", false, forced(
			histcheck.Output{Outcome: histcheck.OK, Losses: []histcheck.Loss{{Key: "k", Token: 1, Reason: "force_released"}}},
			histcheck.Output{Outcome: histcheck.OK, Losses: []histcheck.Loss{{Key: "k", Token: 1, Reason: "force_released"}}})},
		{"a heartbeat after the session ended", true, ended(histcheck.Output{Outcome: histcheck.Lost})},
		{"a heartbeat keeps an ended session alive", false, ended(histcheck.Output{Outcome: histcheck.OK})},
		{"a loss a refused heartbeat did not tell reported after a restart", true, restarted(true,
			histcheck.Output{Outcome: histcheck.OK, Held: 1, Losses: []histcheck.Loss{{Key: "k", Token: 1, Reason: "force_released"}}})},
		{"a loss a refused heartbeat did not tell hidden after a restart", false, restarted(true, histcheck.Output{Outcome: histcheck.OK, Held: 1})},
		{"a loss untold before a restart reported", true, restarted(false,
			histcheck.Output{Outcome: histcheck.OK, Held: 1, Losses: []histcheck.Loss{{Key: "k", Token: 1, Reason: "force_released"}}})},
		{"a loss untold before a restart hidden", false, restarted(false, histcheck.Output{Outcome: histcheck.OK, Held: 1})},
		{"an idle session's locks are free", true, idling(false)},
		{"activity keeps an idle session alive", false, idling(true)},
		{"an answer no server gives", false, []histcheck.Op{
			op(0, 0, 10, acq("a", "k"), histcheck.Output{Outcome: histcheck.Failed, Err: "500"}),
		}},
	}
	for _, c := range cases {
		err := histcheck.Check(c.h, histcheck.CheckConfig{})
		if (err == nil) != c.legal {
			t.Errorf("%s: legal=%v, check said %v", c.name, c.legal, err)
		}
		if err != nil && !c.legal && !strings.Contains(err.Error(), "f") {
			t.Errorf("%s: the error does not name the family: %v", c.name, err)
		}
	}
}

// storeClock is a store's clock the test moves.
type storeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *storeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *storeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// runWithClock runs the workload with lifetimes of seconds while another
// client moves the store's clock forward by up to four seconds at a time,
// so locks expire under the clients' feet, and checks the history with
// expiry judged by that clock.
func runWithClock(t *testing.T, svc holdfast.Service, clock *storeClock) error {
	t.Helper()
	w := histcheck.Workload{Prefix: "exp", Families: 4, Clients: 8, Ops: 60, Seed: 3, TTL: 2 * time.Second}
	rec := histcheck.NewRecorder(longTTL)
	rec.Tick(w.Clients, w.FamilyNames(), clock.Now(), clock.Set)
	ctx, stop := context.WithCancel(context.Background())
	ticked := make(chan int)
	go func() {
		n := 0
		for ctx.Err() == nil {
			rec.Tick(w.Clients, w.FamilyNames(), clock.Now().Add(time.Duration(rand.IntN(4000))*time.Millisecond), clock.Set)
			n++
			time.Sleep(2 * time.Millisecond) // pace, so clients act between ticks
		}
		ticked <- n
	}()
	w.Run(ctx, svc, rec)
	stop()
	ticks := <-ticked
	if err := w.ReadAll(context.Background(), svc, rec, w.Clients); err != nil {
		t.Fatal(err)
	}
	h := rec.History()
	t.Logf("%d operations, %d clock moves", len(h)-ticks*w.Families, ticks)
	return histcheck.Check(h, histcheck.CheckConfig{VisualizeDir: histcheck.VisualizeDir()})
}

func newClock() *storeClock {
	return &storeClock{now: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)}
}

// TestExpiryByTheStoreClock checks histories in which locks expire: an
// expired lock is free at once, no longer verifiable, renewable or
// listed, and a re-acquire after expiry is a new grant.
func TestExpiryByTheStoreClock(t *testing.T) {
	t.Parallel()
	clock := newClock()
	if err := runWithClock(t, serve(t, memstore.New(memstore.Config{Now: clock.Now})), clock); err != nil {
		t.Fatal(err)
	}
}

// laggingStore is a broken store: now and then a transaction reads a clock
// ten seconds behind, so it sees expired locks as live and dates new ones
// wrongly.
type laggingStore struct {
	store.Store
	calls atomic.Uint64
}

func (s *laggingStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	lag := s.calls.Add(1)%7 == 0
	return s.Store.Update(ctx, func(tx store.Tx) error {
		if lag {
			return fn(laggingTx{tx})
		}
		return fn(tx)
	})
}

type laggingTx struct{ store.Tx }

func (tx laggingTx) Now() time.Time { return tx.Tx.Now().Add(-10 * time.Second) }

// TestCheckerCatchesALaggingClock proves the checker judges expiry: the
// same history over a store whose clock sometimes lags must fail.
func TestCheckerCatchesALaggingClock(t *testing.T) {
	t.Parallel()
	clock := newClock()
	err := runWithClock(t, serve(t, &laggingStore{Store: memstore.New(memstore.Config{Now: clock.Now})}), clock)
	if err == nil {
		t.Fatal("the history over a store with a lagging clock passed the check")
	}
	t.Logf("caught, as it must be: %v", err)
}
