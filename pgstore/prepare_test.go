package pgstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/memstore"
	"github.com/holdfast/holdfast/store"
	"github.com/holdfast/holdfast/store/storetest"
)

// The conformance suite again, with every transaction prepared: a trial
// run of the transaction, rolled back, finds what it touches, and the
// real run calls Prepare with that (and a few names it does not touch)
// before the Manager's first call. Every answer must be the same as
// without Prepare.
func TestConformancePrepared(t *testing.T) {
	t.Parallel()
	testPool(t)
	h := harness()
	storetest.Run(t, storetest.Harness{
		Open: func(t testing.TB, now func() time.Time) store.Store {
			return trialPrepared{h.Open(t, now)}
		},
		Reopen: func(t testing.TB, old store.Store, now func() time.Time) store.Store {
			return trialPrepared{h.Reopen(t, old.(trialPrepared).Store, now)}
		},
	})
}

// trialPrepared prepares each Update with what a rolled-back trial run
// of it touched.
type trialPrepared struct{ store.Store }

var errTrial = errors.New("trial run")

func (p trialPrepared) Update(ctx context.Context, fn func(store.Tx) error) error {
	var rec *recorder
	err := p.Store.Update(ctx, func(tx store.Tx) error {
		rec = &recorder{Tx: tx, seen: map[string]bool{}}
		fn(rec)
		return errTrial
	})
	if !errors.Is(err, errTrial) {
		return err
	}
	// Names the operations do not touch are only read ahead in vain.
	keys := append(rec.keys, "prepare-noise/1", "order")
	sessions := append(rec.sessions, "s-prepare-noise")
	reporting := append(rec.reporting, "s-prepare-noise")
	return p.Store.Update(ctx, func(tx store.Tx) error {
		if err := tx.(store.Preparer).Prepare(keys, sessions, reporting); err != nil {
			return err
		}
		return fn(tx)
	})
}

// recorder notes the keys and sessions a transaction touches, and the
// sessions whose lost records it reads.
type recorder struct {
	store.Tx
	seen                      map[string]bool
	keys, sessions, reporting []string
}

func (r *recorder) key(k string) {
	if !r.seen["k"+k] {
		r.seen["k"+k] = true
		r.keys = append(r.keys, k)
	}
}

func (r *recorder) session(s string) {
	if !r.seen["s"+s] {
		r.seen["s"+s] = true
		r.sessions = append(r.sessions, s)
	}
}

func (r *recorder) Lock(key, session string) (store.Lock, bool, error) {
	r.key(key)
	r.session(session)
	return r.Tx.Lock(key, session)
}

func (r *recorder) Lost(session string) ([]store.Lost, error) {
	if !r.seen["l"+session] {
		r.seen["l"+session] = true
		r.reporting = append(r.reporting, session)
	}
	return r.Tx.Lost(session)
}

func (r *recorder) Related(key string, fn func(store.Lock) bool) error {
	r.key(key)
	return r.Tx.Related(key, fn)
}

func (r *recorder) Session(id string) (store.Session, bool, error) {
	r.session(id)
	return r.Tx.Session(id)
}

func (r *recorder) SessionLocks(session string) ([]store.Lock, error) {
	r.session(session)
	return r.Tx.SessionLocks(session)
}

func (r *recorder) PutLock(l store.Lock) error {
	r.key(l.Key)
	r.session(l.Session)
	return r.Tx.PutLock(l)
}

func (r *recorder) DeleteLock(key, session string) error {
	r.key(key)
	r.session(session)
	return r.Tx.DeleteLock(key, session)
}

func (r *recorder) PutSession(s store.Session) error {
	r.session(s.ID)
	return r.Tx.PutSession(s)
}

func (r *recorder) TouchSession(s store.Session) error {
	r.session(s.ID)
	return r.Tx.(store.Toucher).TouchSession(s)
}

// hinted prepares each Update with the hint its context carries, as the
// Manager does for a group of operations; with plain set, its Tx is no
// Preparer at all.
type hinted struct {
	store.Store
	plain bool
}

type hintKey struct{}

type hint struct{ keys, sessions, reporting []string }

// withHint hints keys and sessions, and the lost records of reporting.
func withHint(ctx context.Context, keys, sessions []string, reporting ...string) context.Context {
	return context.WithValue(ctx, hintKey{}, hint{keys, sessions, reporting})
}

func (h hinted) Update(ctx context.Context, fn func(store.Tx) error) error {
	return h.Store.Update(ctx, func(tx store.Tx) error {
		if h.plain {
			return fn(plainTx{tx})
		}
		if hi, ok := ctx.Value(hintKey{}).(hint); ok {
			if err := tx.(store.Preparer).Prepare(hi.keys, hi.sessions, hi.reporting); err != nil {
				return err
			}
		}
		return fn(tx)
	})
}

// plainTx hides the Tx's Prepare, keeping its TouchSession.
type plainTx struct{ store.Tx }

func (p plainTx) TouchSession(s store.Session) error { return p.Tx.(store.Toucher).TouchSession(s) }

// scriptConfig is the policy of the scripted comparison: the conformance
// suite's record types.
func scriptConfig() holdfast.Config {
	return holdfast.Config{
		SweepInterval: -1,
		Types: map[string]holdfast.TypePolicy{
			"doc":    {Policy: holdfast.ExclusiveRead},
			"page":   {Policy: holdfast.ReadWrite},
			"ticket": {DefaultTTL: 10 * time.Minute, MaxTTL: time.Hour},
			"desk":   {IdleTimeout: 10 * time.Minute},
		},
	}
}

// scriptOp is one operation of a scripted batch, with the keys and
// session a caller names for it.
type scriptOp struct {
	keys    []string
	session string
	run     func(ctx context.Context, m *holdfast.Manager) (any, error)
}

func acquireOp(req holdfast.AcquireRequest) scriptOp {
	return scriptOp{req.Keys, req.Owner.Session, func(ctx context.Context, m *holdfast.Manager) (any, error) { return m.Acquire(ctx, req) }}
}

func releaseOp(session string, keys ...string) scriptOp {
	return scriptOp{keys, session, func(ctx context.Context, m *holdfast.Manager) (any, error) {
		return m.Release(ctx, holdfast.ReleaseRequest{Session: session, Keys: keys})
	}}
}

func verifyOp(session, key string) scriptOp {
	return scriptOp{[]string{key}, session, func(ctx context.Context, m *holdfast.Manager) (any, error) {
		return m.Verify(ctx, holdfast.VerifyRequest{Session: session, Key: key})
	}}
}

func renewOp(session string, keys ...string) scriptOp {
	return scriptOp{keys, session, func(ctx context.Context, m *holdfast.Manager) (any, error) {
		return m.Renew(ctx, holdfast.RenewRequest{Session: session, Keys: keys})
	}}
}

func heartbeatOp(session string) scriptOp {
	return scriptOp{nil, session, func(ctx context.Context, m *holdfast.Manager) (any, error) {
		return m.Heartbeat(ctx, holdfast.HeartbeatRequest{Session: session})
	}}
}

func endOp(session string) scriptOp {
	return scriptOp{nil, session, func(ctx context.Context, m *holdfast.Manager) (any, error) {
		return m.EndSession(ctx, holdfast.EndSessionRequest{Session: session})
	}}
}

func owner(name string) holdfast.Owner {
	return holdfast.Owner{Session: "s-" + name, User: "u-" + name, Name: name}
}

// A script of batches, every operation kind among them, runs through
// Manager.Batch on PostgreSQL with Prepare hints and without, and on the
// in-memory store; every answer, the locks left and the audit log must be
// the same on all three (tokens compared by their order).
func TestBatchesWithPrepareAnswerAsWithout(t *testing.T) {
	t.Parallel()
	pool := testPool(t)
	alice, bob, carol := owner("alice"), owner("bob"), owner("carol")
	aliceTab := holdfast.Owner{Session: "s-alice-tab2", User: "u-alice", Name: "alice"}
	script := []struct {
		advance time.Duration // before the batch
		ops     []scriptOp
	}{
		{0, []scriptOp{
			acquireOp(holdfast.AcquireRequest{Keys: []string{"order/1"}, Owner: alice}),
			acquireOp(holdfast.AcquireRequest{Keys: []string{"order/2", "order/2/line/1"}, Owner: alice}),
			acquireOp(holdfast.AcquireRequest{Keys: []string{"order/1/line/9"}, Owner: bob}),
			acquireOp(holdfast.AcquireRequest{Keys: []string{"order/3"}, Owner: bob, Mode: holdfast.Shared}),
			acquireOp(holdfast.AcquireRequest{Keys: []string{"order/3"}, Owner: carol, Mode: holdfast.Shared}),
			acquireOp(holdfast.AcquireRequest{Keys: []string{"ticket/1"}, Owner: owner("grace")}),
			acquireOp(holdfast.AcquireRequest{Keys: []string{"desk/1"}, Owner: owner("ivan")}),
			acquireOp(holdfast.AcquireRequest{Keys: []string{"doc/9/page/1"}, Owner: owner("erin"), Intent: holdfast.IntentRead}),
			heartbeatOp("s-dave"),
		}},
		{time.Minute, []scriptOp{
			releaseOp(alice.Session, "order/1"),
			acquireOp(holdfast.AcquireRequest{Keys: []string{"order/1/line/9"}, Owner: bob}),
			verifyOp(alice.Session, "order/2"),
			verifyOp(alice.Session, "order/1"),
			renewOp(bob.Session),
			acquireOp(holdfast.AcquireRequest{Keys: []string{"order/3"}, Owner: carol}),
			releaseOp(bob.Session, "order/3", "order/404"),
			acquireOp(holdfast.AcquireRequest{Keys: []string{"order/3"}, Owner: carol}),
			acquireOp(holdfast.AcquireRequest{Keys: []string{"order"}, Owner: owner("frank")}),
		}},
		{time.Minute, []scriptOp{
			acquireOp(holdfast.AcquireRequest{Keys: []string{"order/2"}, Owner: aliceTab, Takeover: true}),
			heartbeatOp(alice.Session),
			acquireOp(holdfast.AcquireRequest{Keys: []string{"member/7/part/1"}, Owner: owner("erin")}),
			acquireOp(holdfast.AcquireRequest{Keys: []string{"case/7"}, Owner: owner("frank")}),
			renewOp(carol.Session, "order/3"),
			endOp(bob.Session),
			heartbeatOp(bob.Session),
		}},
		{11 * time.Minute, []scriptOp{
			acquireOp(holdfast.AcquireRequest{Keys: []string{"ticket/1"}, Owner: owner("hank")}),
			verifyOp("s-grace", "ticket/1"),
			heartbeatOp("s-grace"),
			heartbeatOp("s-grace"), // reports nothing again
			acquireOp(holdfast.AcquireRequest{Keys: []string{"desk/1"}, Owner: owner("judy")}),
			heartbeatOp("s-ivan"),
			releaseOp(aliceTab.Session, "order/2", "order/2/line/1"),
			releaseOp(alice.Session, "order/2/line/1"),
		}},
	}

	run := func(s store.Store, clock *storetest.Clock) []string {
		m, err := holdfast.New(s, scriptConfig())
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		ctx := t.Context()
		if _, err := m.SetAggregate(ctx, holdfast.Aggregate{Member: "member/7", Root: "case/7"}); err != nil {
			t.Fatal(err)
		}
		var out []string
		for i, b := range script {
			clock.Advance(b.advance)
			var keys, sessions []string
			for _, op := range b.ops {
				keys, sessions = append(keys, op.keys...), append(sessions, op.session)
			}
			var answers []string
			err := m.Batch(withHint(ctx, keys, sessions), func(ctx context.Context) {
				answers = answers[:0]
				for j, op := range b.ops {
					res, err := op.run(ctx, m)
					answers = append(answers, fmt.Sprintf("batch %d op %d: %s", i, j, describe(res, err)))
				}
			})
			if err != nil {
				t.Fatalf("batch %d: %v", i, err)
			}
			out = append(out, answers...)
		}
		locks, err := m.Locks(ctx, holdfast.LockQuery{Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, "locks: "+describe(locks.Locks, nil))
		audit, err := m.Audit(ctx, holdfast.AuditQuery{Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range audit.Entries {
			out = append(out, fmt.Sprintf("audit: %s %s %s %s", e.Event, e.Lock.Key, e.Lock.Owner.Session, describe(e.Lock, nil)))
		}
		return normalTokens(out)
	}
	pgRun := func(plain bool) []string {
		clock := storetest.NewClock(time.Date(2026, 11, 30, 10, 47, 0, 0, time.UTC))
		return run(hinted{open(t, pool, newSchema(t, pool), clock.Now), plain}, clock)
	}
	clock := storetest.NewClock(time.Date(2026, 11, 30, 10, 47, 0, 0, time.UTC))
	want := run(memstore.New(memstore.Config{Now: clock.Now}), clock)
	for _, c := range []struct {
		name string
		got  []string
	}{{"with Prepare", pgRun(false)}, {"without Prepare", pgRun(true)}} {
		for i := range max(len(want), len(c.got)) {
			var w, g string
			if i < len(want) {
				w = want[i]
			}
			if i < len(c.got) {
				g = c.got[i]
			}
			if w != g {
				t.Errorf("pgstore %s:\n got %s\nwant %s (in memory)", c.name, g, w)
			}
		}
	}
}

// describe renders an answer for comparison: the result, or the error's
// type and fields without its message (which quotes tokens).
func describe(res any, err error) string {
	if err != nil {
		var (
			locked *holdfast.LockedError
			lost   *holdfast.LockLostError
			stale  *holdfast.StaleTokenError
		)
		switch {
		case errors.As(err, &locked):
			c := *locked
			c.Message = ""
			res = c
		case errors.As(err, &lost):
			c := *lost
			c.Message = ""
			res = c
		case errors.As(err, &stale):
			c := *stale
			c.Message = ""
			res = c
		default:
			return "error " + err.Error()
		}
		b, _ := json.Marshal(res)
		return fmt.Sprintf("%T %s", res, b)
	}
	b, jerr := json.Marshal(res)
	if jerr != nil {
		return "unprintable " + jerr.Error()
	}
	return string(b)
}

var tokenField = regexp.MustCompile(`"(?i:token)":(\d+)`)

// normalTokens replaces every token by its rank among the tokens seen:
// stores number their grants differently, in the same order.
func normalTokens(lines []string) []string {
	var tokens []uint64
	for _, l := range lines {
		for _, m := range tokenField.FindAllStringSubmatch(l, -1) {
			n, _ := strconv.ParseUint(m[1], 10, 64)
			tokens = append(tokens, n)
		}
	}
	slices.Sort(tokens)
	tokens = slices.Compact(tokens)
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = tokenField.ReplaceAllStringFunc(l, func(s string) string {
			n, _ := strconv.ParseUint(tokenField.FindStringSubmatch(s)[1], 10, 64)
			r, _ := slices.BinarySearch(tokens, n)
			return `"token":"#` + strconv.Itoa(r+1) + `"`
		})
	}
	return out
}

// A token drawn ahead by Prepare is only good for the keys locked before
// it was drawn: a grant on a key the hint did not name, locked later, gets
// a token above that of a grant committed on that key meanwhile.
func TestPreparedTokensAreDrawnAfterTheirKeysLocks(t *testing.T) {
	t.Parallel()
	pool := testPool(t)
	s := open(t, pool, newSchema(t, pool), nil)
	grant := func(tx store.Tx, key, session string) (uint64, error) {
		if err := tx.Related(key, func(store.Lock) bool { return true }); err != nil {
			return 0, err
		}
		token, err := tx.NextToken()
		if err != nil {
			return 0, err
		}
		now := tx.Now()
		return token, tx.PutLock(store.Lock{Key: key, Session: session, Token: token, AcquiredAt: now, ExpiresAt: now.Add(time.Hour)})
	}
	var meanwhile, late uint64
	var once sync.Once
	err := s.Update(t.Context(), func(tx store.Tx) error {
		// Two tokens drawn ahead, one of them left when order/2 is locked.
		if err := tx.(store.Preparer).Prepare([]string{"order/1", "order/3"}, []string{"s-1"}, nil); err != nil {
			return err
		}
		var err error
		once.Do(func() {
			// Another transaction grants order/2 after this one drew its
			// tokens and commits.
			err = s.Update(t.Context(), func(tx store.Tx) (err error) {
				meanwhile, err = grant(tx, "order/2", "s-2")
				return err
			})
		})
		if err != nil {
			return err
		}
		if _, err := grant(tx, "order/1", "s-1"); err != nil {
			return err
		}
		late, err = grant(tx, "order/2", "s-1")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if late <= meanwhile {
		t.Fatalf("grant on order/2 after the commit of token %d got token %d: tokens drawn before a key's lock were used for it", meanwhile, late)
	}
}

// Prepare resolves the hinted keys through aggregates and reads ahead for
// the keys they map to.
func TestPrepareFollowsAggregates(t *testing.T) {
	t.Parallel()
	pool := testPool(t)
	schema := newSchema(t, pool)
	counter, counted := countedPool(t)
	m, err := holdfast.New(hinted{Store: open(t, counted, schema, nil)}, holdfast.Config{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx := t.Context()
	if _, err := m.SetAggregate(ctx, holdfast.Aggregate{Member: "member/7", Root: "case/7"}); err != nil {
		t.Fatal(err)
	}
	var keys, sessions []string
	for i := range 16 {
		keys = append(keys, fmt.Sprintf("member/7/part/%d", i))
		sessions = append(sessions, fmt.Sprintf("s-%d", i))
	}
	before := counter.n.Load()
	var granted []string
	var failed error
	err = m.Batch(withHint(ctx, keys, sessions), func(ctx context.Context) {
		granted, failed = granted[:0], nil
		for i, k := range keys {
			res, err := m.Acquire(ctx, holdfast.AcquireRequest{Keys: []string{k}, Owner: holdfast.Owner{Session: sessions[i]}})
			if err != nil {
				failed = err
				continue
			}
			granted = append(granted, res.Locks[0].Key)
		}
	})
	if err = errors.Join(err, failed); err != nil {
		t.Fatal(err)
	}
	n := counter.n.Load() - before
	t.Logf("16 acquires of aggregate members: %d round trips", n)
	if want := "case/7/part/15"; len(granted) != 16 || granted[15] != want {
		t.Fatalf("granted %v, want the keys mapped onto case/7", granted)
	}
	// begin with the mappings, the locks and reads, commit
	if n > 3 {
		t.Errorf("16 acquires of aggregate members took %d round trips, want at most 3", n)
	}
}
