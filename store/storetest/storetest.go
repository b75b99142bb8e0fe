// Package storetest is the conformance suite of holdfast: every semantic of
// the lock manager, stated as tests that run a *holdfast.Manager over the
// store under test. Each store runs all of it from its own tests:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, storetest.Harness{
//			Open: func(t testing.TB, now func() time.Time) store.Store {
//				s := memstore.New(memstore.Config{Now: now})
//				t.Cleanup(func() { s.Close() })
//				return s
//			},
//		})
//	}
//
// Every case runs in parallel on its own fresh store and Manager, with the
// background sweep off and a Clock that the case moves by hand, so no case
// sleeps and none depends on timing.
package storetest

import (
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/store"
)

// Harness opens the store under test.
type Harness struct {
	// Open returns a new, empty store whose clock is now. It arranges for
	// the store to be closed when t ends (t.Cleanup).
	Open func(t testing.TB, now func() time.Time) store.Store
	// Reopen closes s and opens the same data again with the clock now, as
	// a restarted process would. Nil for stores that keep nothing across
	// Close; the durability cases are skipped then. The cleanup that Open
	// registered for s must tolerate s having been closed already.
	Reopen func(t testing.TB, s store.Store, now func() time.Time) store.Store
	// Syncs, if set, reports how many fsyncs s has made and how long they
	// took in all, so that Bench can say how many operations shared one
	// and how much of the run the store spent in them.
	Syncs func(s store.Store) (n uint64, took time.Duration)
}

// testCase is one semantic, checked on a fresh store and Manager.
type testCase struct {
	name string
	run  func(e *env)
}

// groups lists every case of the suite, by topic.
var groups = []struct {
	name  string
	cases []testCase
}{
	{"Modes", modeCases},
	{"Upgrade", upgradeCases},
	{"Keys", keyCases},
	{"Hierarchy", hierarchyCases},
	{"Aggregates", aggregateCases},
	{"Owners", ownerCases},
	{"MultiKey", multiKeyCases},
	{"Seed", seedCases},
	{"Sessions", sessionCases},
	{"Renew", renewCases},
	{"Verify", verifyCases},
	{"Release", releaseCases},
	{"ForceRelease", forceCases},
	{"Audit", auditCases},
	{"Listing", listingCases},
	{"Retention", retentionCases},
	{"Events", eventCases},
	{"Durability", durabilityCases},
	{"Activity", activityCases},
	{"Concurrency", concurrencyCases},
}

// Run runs the whole suite against the store that h opens.
func Run(t *testing.T, h Harness) {
	if h.Open == nil {
		t.Fatal("storetest: Harness.Open is required")
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			for _, c := range g.cases {
				t.Run(c.name, func(t *testing.T) {
					t.Parallel()
					c.run(newEnv(t, h))
				})
			}
		})
	}
}

// start is where every case's clock begins: a whole second, so that every
// time the suite computes survives any store's time precision, and 10:47
// UTC so that refusal messages read like the product's example.
var start = time.Date(2026, 11, 30, 10, 47, 0, 0, time.UTC)

// The record types the suite configures. Types not listed ("order",
// "asset", "lease", ...) get the built-in defaults: exclusive-write, 2 hours,
// at most 24 hours, no idle timeout.
const (
	builtinTTL    = 2 * time.Hour
	builtinMaxTTL = 24 * time.Hour
	ticketTTL     = 10 * time.Minute // type "ticket"
	ticketMaxTTL  = time.Hour
	deskIdle      = 10 * time.Minute // type "desk"
	lostRetention = 24 * time.Hour   // the minimum API.md promises
)

// suiteConfig is the Manager configuration every case runs with. It is
// built afresh each time because New fills defaults into it.
func suiteConfig() holdfast.Config {
	return holdfast.Config{
		SweepInterval: -1,
		Types: map[string]holdfast.TypePolicy{
			"policy": {Policy: holdfast.ExclusiveWrite},
			"doc":    {Policy: holdfast.ExclusiveRead},
			"page":   {Policy: holdfast.ReadWrite},
			"ticket": {DefaultTTL: ticketTTL, MaxTTL: ticketMaxTTL},
			"desk":   {IdleTimeout: deskIdle},
		},
	}
}

// env is one case's world: a clock, a store and a Manager over it.
type env struct {
	t     *testing.T
	h     Harness
	clock *Clock
	store store.Store
	m     *holdfast.Manager
}

func newEnv(t *testing.T, h Harness) *env {
	c := NewClock(start)
	s := h.Open(t, c.Now)
	return &env{t: t, h: h, clock: c, store: s, m: newManager(t, s)}
}

func newManager(t testing.TB, s store.Store) *holdfast.Manager {
	t.Helper()
	m, err := holdfast.New(s, suiteConfig())
	if err != nil {
		t.Fatalf("holdfast.New: %v", err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Errorf("Manager.Close: %v", err)
		}
	})
	return m
}

// sub returns the same world for a subtest of the case.
func (e *env) sub(t *testing.T) *env {
	c := *e
	c.t = t
	return &c
}

// fresh returns a new world for a subtest that needs its own store.
func (e *env) fresh(t *testing.T) *env {
	return newEnv(t, e.h)
}

// reopen closes the Manager and the store and opens both again over the
// same data, as a restart would.
func (e *env) reopen() {
	e.t.Helper()
	if err := e.m.Close(); err != nil {
		e.t.Fatalf("Manager.Close: %v", err)
	}
	e.store = e.h.Reopen(e.t, e.store, e.clock.Now)
	e.m = newManager(e.t, e.store)
}

func (e *env) now() time.Time { return e.clock.Now() }

func (e *env) advance(d time.Duration) time.Time { return e.clock.Advance(d) }
