package client_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/client"
	"github.com/holdfast/holdfast/memstore"
	"github.com/holdfast/holdfast/server"
)

// These tests run the client against the real server over a real Manager
// on memstore, whose clock the test moves.

type env struct {
	admin, app, reader, anonymous *client.Client
	mgr                           *holdfast.Manager
	store                         *memstore.Store
	clock                         *clock
	url                           string
}

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func newEnv(t *testing.T) *env {
	t.Helper()
	clk := &clock{now: time.Date(2026, 11, 30, 10, 47, 0, 0, time.UTC)}
	st := memstore.New(memstore.Config{Now: clk.Now})
	discard := slog.New(slog.NewTextHandler(io.Discard, nil))
	mgr, err := holdfast.New(st, holdfast.Config{SweepInterval: -1, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Manager: mgr, Logger: discard, EventPing: time.Hour, Tokens: []server.Token{
		{Role: server.Reader, Secret: "reader-token"},
		{Role: server.Client, Secret: "client-token"},
		{Role: server.Admin, Secret: "admin-token"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		srv.CloseStreams()
		hs.Close()
		mgr.Close()
		st.Close()
	})
	return &env{
		admin: newClient(t, hs.URL, "admin-token"), app: newClient(t, hs.URL, "client-token"),
		reader: newClient(t, hs.URL, "reader-token"), anonymous: newClient(t, hs.URL, ""),
		mgr: mgr, store: st, clock: clk, url: hs.URL,
	}
}

var (
	bob   = holdfast.Owner{Session: "s-81", User: "u-7", Name: "Bob Smith"}
	alice = holdfast.Owner{Session: "s-90", User: "u-9", Name: "Alice Jones"}
)

func acquire(t *testing.T, c *client.Client, owner holdfast.Owner, keys ...string) []holdfast.Lock {
	t.Helper()
	res, err := c.Acquire(context.Background(), holdfast.AcquireRequest{Keys: keys, Owner: owner})
	if err != nil {
		t.Fatalf("acquire %v for %s: %v", keys, owner.Session, err)
	}
	return res.Locks
}

func TestServerAcquireReleaseVerify(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	res, err := e.app.Acquire(ctx, holdfast.AcquireRequest{
		Keys: []string{"policy/12345", "policy/777"}, Owner: bob,
		TTL: holdfast.Duration(90 * time.Minute), Note: "underwriting review"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Locks) != 2 || res.Locks[0].Key != "policy/12345" || res.Locks[0].Owner != bob ||
		res.Locks[0].Note != "underwriting review" || res.Locks[0].Mode != holdfast.Exclusive ||
		!res.Locks[0].ExpiresAt.Equal(e.clock.Now().Add(90*time.Minute)) {
		t.Fatalf("acquire = %+v", res.Locks)
	}
	first := res.Locks[0]
	if again := acquire(t, e.app, bob, "policy/12345"); again[0].Token != first.Token {
		t.Errorf("re-entrant acquire changed the token: %d → %d", first.Token, again[0].Token)
	}

	// Another session is refused with every holder named; nothing is taken.
	_, err = e.app.Acquire(ctx, holdfast.AcquireRequest{Keys: []string{"policy/1", "policy/12345/coverage/2"}, Owner: alice})
	var locked *holdfast.LockedError
	if !errors.Is(err, holdfast.ErrLocked) || !errors.As(err, &locked) {
		t.Fatalf("conflicting acquire: %v, want *holdfast.LockedError", err)
	}
	if len(locked.Conflicts) != 1 || locked.Conflicts[0].RequestedKey != "policy/12345/coverage/2" ||
		len(locked.Conflicts[0].Holders) != 1 || locked.Conflicts[0].Holders[0].Owner != bob ||
		locked.Conflicts[0].Holders[0].Token != first.Token || !strings.Contains(locked.Message, "Bob Smith") {
		t.Errorf("locked = %+v", locked)
	}
	if page, _ := e.app.Locks(ctx, holdfast.LockQuery{Key: "policy/1"}); len(page.Locks) != 0 {
		t.Errorf("a refused acquire left %+v", page.Locks)
	}

	v, err := e.app.Verify(ctx, holdfast.VerifyRequest{Key: "policy/12345", Session: bob.Session, Token: first.Token})
	if err != nil || v.Lock.Token != first.Token {
		t.Fatalf("verify = %+v, %v", v, err)
	}
	_, err = e.app.Verify(ctx, holdfast.VerifyRequest{Key: "policy/12345", Session: bob.Session, Token: first.Token + 1})
	var stale *holdfast.StaleTokenError
	if !errors.As(err, &stale) || stale.Lock.Token != first.Token || !errors.Is(err, holdfast.ErrStaleToken) {
		t.Errorf("verify with another token = %v, want *holdfast.StaleTokenError with the current grant", err)
	}

	_, err = e.app.Release(ctx, holdfast.ReleaseRequest{Session: bob.Session, Keys: []string{"policy/12345"}, Token: first.Token + 100})
	if !errors.As(err, &stale) {
		t.Errorf("release with a wrong token = %v, want *holdfast.StaleTokenError", err)
	}
	rel, err := e.app.Release(ctx, holdfast.ReleaseRequest{Session: bob.Session, Keys: []string{"policy/12345", "policy/none"}})
	if err != nil || len(rel.Released) != 1 || rel.Released[0].Key != "policy/12345" ||
		len(rel.NotHeld) != 1 || rel.NotHeld[0] != "policy/none" {
		t.Fatalf("release = %+v, %v", rel, err)
	}
	if got := acquire(t, e.app, alice, "policy/12345"); got[0].Token <= first.Token {
		t.Errorf("new grant's token %d is not above %d", got[0].Token, first.Token)
	}
}

func TestServerRenewAndExpiry(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	acquire(t, e.app, bob, "order/42")
	e.clock.Advance(time.Hour)
	r, err := e.app.Renew(ctx, holdfast.RenewRequest{Session: bob.Session, TTL: holdfast.Duration(30 * time.Minute)})
	if err != nil || len(r.Locks) != 1 || !r.Locks[0].ExpiresAt.Equal(e.clock.Now().Add(30*time.Minute)) {
		t.Fatalf("renew = %+v, %v", r, err)
	}
	e.clock.Advance(31 * time.Minute)
	_, err = e.app.Renew(ctx, holdfast.RenewRequest{Session: bob.Session, Keys: []string{"order/42"}})
	var lost *holdfast.LockLostError
	if !errors.Is(err, holdfast.ErrLockLost) || !errors.As(err, &lost) || lost.Reason != holdfast.LostExpired {
		t.Fatalf("renew after expiry = %#v, want lock_lost expired", err)
	}
	if lost.Lock == nil || lost.Lock.Key != "order/42" {
		t.Errorf("lost lock = %+v", lost.Lock)
	}
	_, err = e.app.Verify(ctx, holdfast.VerifyRequest{Key: "order/7", Session: bob.Session})
	if !errors.As(err, &lost) || lost.Reason != holdfast.LostNeverHeld {
		t.Errorf("verify of a lock never held = %v, want lock_lost never_held", err)
	}
}

// Renew of all the locks of an ended session is 409 lock_lost with the
// reason and the locks it lost, alone and in a batch; of a session never
// seen, 200 with none.
func TestServerRenewAllOfEndedSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	held := acquire(t, e.app, bob, "order/42")[0]
	if _, err := e.app.EndSession(ctx, holdfast.EndSessionRequest{Session: bob.Session}); err != nil {
		t.Fatal(err)
	}
	ended := func(what string, err error) {
		t.Helper()
		var lost *holdfast.LockLostError
		if !errors.Is(err, holdfast.ErrLockLost) || !errors.As(err, &lost) || lost.Reason != holdfast.LostSessionEnded ||
			len(lost.Released) != 1 || lost.Released[0].Token != held.Token {
			t.Errorf("%s = %#v, want lock_lost session_ended releasing order/42", what, err)
		}
	}
	_, err := e.app.Renew(ctx, holdfast.RenewRequest{Session: bob.Session})
	ended("renew of all", err)
	res, err := e.app.Batch(ctx, []client.Op{
		client.RenewOp(holdfast.RenewRequest{Session: bob.Session}),
		client.RenewOp(holdfast.RenewRequest{Session: "s-nobody"}),
	})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Status != 409 {
		t.Errorf("batched renew of all: status %d", res[0].Status)
	}
	ended("batched renew of all", res[0].Err)
	if res[1].Err != nil || res[1].Renew == nil || res[1].Renew.Locks == nil || len(res[1].Renew.Locks) != 0 {
		t.Errorf("batched renew of all for a session never seen = %+v, want no locks", res[1])
	}
	r, err := e.app.Renew(ctx, holdfast.RenewRequest{Session: "s-nobody"})
	if err != nil || len(r.Locks) != 0 {
		t.Errorf("renew of all for a session never seen = %+v, %v, want no locks", r, err)
	}
}

func TestServerForceReleaseAndHeartbeat(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	hb, err := e.app.Heartbeat(ctx, holdfast.HeartbeatRequest{Session: bob.Session, IdleTimeout: holdfast.Duration(5 * time.Minute)})
	if err != nil || hb.Session.ID != bob.Session || hb.Session.IdleTimeout != holdfast.Duration(5*time.Minute) {
		t.Fatalf("first heartbeat = %+v, %v", hb, err)
	}
	held := acquire(t, e.app, bob, "policy/12345")[0]

	if _, err := e.app.ForceRelease(ctx, holdfast.ForceReleaseRequest{Keys: []string{"policy/12345"}, Reason: "Bob is on leave"}); !errors.Is(err, holdfast.ErrForbidden) {
		t.Errorf("force-release with a client token = %v, want ErrForbidden", err)
	}
	fr, err := e.admin.ForceRelease(ctx, holdfast.ForceReleaseRequest{Keys: []string{"policy/12345"}, Reason: "Bob is on leave", Actor: "alice"})
	if err != nil || len(fr.Released) != 1 || fr.Released[0].Token != held.Token {
		t.Fatalf("force-release = %+v, %v", fr, err)
	}

	_, err = e.app.Verify(ctx, holdfast.VerifyRequest{Key: "policy/12345", Session: bob.Session, Token: held.Token})
	var lost *holdfast.LockLostError
	if !errors.As(err, &lost) || lost.Reason != holdfast.LostForceReleased || lost.Actor != "alice" ||
		lost.ForceReason != "Bob is on leave" || lost.Lock == nil || lost.Lock.Token != held.Token {
		t.Errorf("verify after force-release = %#v", err)
	}
	hb, err = e.app.Heartbeat(ctx, holdfast.HeartbeatRequest{Session: bob.Session})
	if err != nil || len(hb.Lost) != 1 || hb.Lost[0].Reason != holdfast.LostForceReleased ||
		hb.Lost[0].Actor != "alice" || hb.Lost[0].Lock.Token != held.Token {
		t.Fatalf("heartbeat after force-release = %+v, %v", hb, err)
	}

	audit, err := e.admin.Audit(ctx, holdfast.AuditQuery{Key: "policy/12345"})
	if err != nil {
		t.Fatal(err)
	}
	var events []string
	for _, en := range audit.Entries {
		events = append(events, string(en.Event))
		if en.Event == holdfast.EventForceReleased && (en.Actor != "alice" || en.Reason != "Bob is on leave") {
			t.Errorf("force_released entry = %+v", en)
		}
	}
	if strings.Join(events, ",") != "acquired,force_released" {
		t.Errorf("audit events = %v", events)
	}
	only, err := e.admin.Audit(ctx, holdfast.AuditQuery{Event: holdfast.EventForceReleased, Since: e.clock.Now().Add(-time.Minute), Limit: 10})
	if err != nil || len(only.Entries) != 1 || only.Entries[0].Event != holdfast.EventForceReleased {
		t.Errorf("audit of force_released since a minute ago = %+v, %v", only, err)
	}
	if _, err := e.app.Audit(ctx, holdfast.AuditQuery{}); !errors.Is(err, holdfast.ErrForbidden) {
		t.Errorf("audit with a client token = %v, want ErrForbidden", err)
	}
}

func TestServerSessions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	acquire(t, e.app, bob, "a/1", "a/2")
	acquire(t, e.app, alice, "b/1")
	page, err := e.reader.Sessions(ctx, holdfast.SessionQuery{User: bob.User})
	if err != nil || len(page.Sessions) != 1 || page.Sessions[0].ID != bob.Session || page.Sessions[0].Locks != 2 ||
		page.Sessions[0].Name != "Bob Smith" {
		t.Fatalf("sessions of u-7 = %+v, %v", page, err)
	}
	end, err := e.app.EndSession(ctx, holdfast.EndSessionRequest{Session: bob.Session})
	if err != nil || len(end.Released) != 2 {
		t.Fatalf("end session = %+v, %v", end, err)
	}
	_, err = e.app.Heartbeat(ctx, holdfast.HeartbeatRequest{Session: bob.Session})
	var lost *holdfast.LockLostError
	if !errors.As(err, &lost) || lost.Reason != holdfast.LostSessionEnded || len(lost.Released) != 2 {
		t.Errorf("heartbeat of an ended session = %#v, want lock_lost session_ended with 2 released", err)
	}
	if again, err := e.app.EndSession(ctx, holdfast.EndSessionRequest{Session: "never-seen"}); err != nil || len(again.Released) != 0 {
		t.Errorf("ending an unknown session = %+v, %v", again, err)
	}
}

func TestServerLockListing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	acquire(t, e.app, bob, "order/42/line/1", "order/42/line/2", "order/43")
	acquire(t, e.app, alice, "order/42/line/3")

	var keys []string
	q := holdfast.LockQuery{Prefix: "order/42", Limit: 2}
	for pages := 0; ; pages++ {
		page, err := e.reader.Locks(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range page.Locks {
			keys = append(keys, l.Key)
		}
		if page.Next == nil {
			if pages != 1 {
				t.Errorf("3 locks in pages of 2 took %d pages", pages+1)
			}
			break
		}
		q.After = *page.Next
	}
	if strings.Join(keys, ",") != "order/42/line/1,order/42/line/2,order/42/line/3" {
		t.Errorf("locks under order/42 = %v", keys)
	}
	for _, tc := range []struct {
		q    holdfast.LockQuery
		want string
	}{
		{holdfast.LockQuery{Key: "order/42"}, "order/42/line/1,order/42/line/2,order/42/line/3"},
		{holdfast.LockQuery{Session: alice.Session}, "order/42/line/3"},
		{holdfast.LockQuery{User: bob.User}, "order/42/line/1,order/42/line/2,order/43"},
	} {
		page, err := e.reader.Locks(ctx, tc.q)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, l := range page.Locks {
			got = append(got, l.Key)
		}
		if strings.Join(got, ",") != tc.want {
			t.Errorf("Locks(%+v) = %v, want %s", tc.q, got, tc.want)
		}
	}
}

func TestServerAggregates(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	if a, err := e.app.SetAggregate(ctx, holdfast.Aggregate{Member: "asset/9", Root: "lease/3"}); err != nil || a.Root != "lease/3" {
		t.Fatalf("set aggregate = %+v, %v", a, err)
	}
	list, err := e.reader.Aggregates(ctx, "lease/3")
	if err != nil || len(list.Aggregates) != 1 || list.Aggregates[0].Member != "asset/9" {
		t.Fatalf("aggregates = %+v, %v", list, err)
	}
	got := acquire(t, e.app, bob, "asset/9")
	if got[0].Key != "lease/3" || got[0].RequestedKey != "asset/9" {
		t.Errorf("lock on a member = %+v, want lease/3 for asset/9", got[0])
	}
	_, err = e.app.SetAggregate(ctx, holdfast.Aggregate{Member: "lease/3", Root: "asset/9"})
	var inv *holdfast.InvalidError
	if !errors.As(err, &inv) {
		t.Errorf("an aggregate cycle = %v, want *holdfast.InvalidError", err)
	}
	if err := e.app.RemoveAggregate(ctx, holdfast.RemoveAggregateRequest{Member: "asset/9"}); err != nil {
		t.Fatal(err)
	}
	if list, _ := e.reader.Aggregates(ctx, ""); len(list.Aggregates) != 0 {
		t.Errorf("after remove, aggregates = %+v", list.Aggregates)
	}
}

func TestServerInvalidAndAuth(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	_, err := e.app.Acquire(ctx, holdfast.AcquireRequest{Keys: []string{"policy/1", "/bad"}, Owner: bob})
	var inv *holdfast.InvalidError
	if !errors.Is(err, holdfast.ErrInvalid) || !errors.As(err, &inv) || inv.Field != "keys[1]" {
		t.Errorf("bad key = %#v, want *holdfast.InvalidError on keys[1]", err)
	}
	if _, err := e.anonymous.Locks(ctx, holdfast.LockQuery{}); !errors.Is(err, holdfast.ErrUnauthenticated) {
		t.Errorf("no token = %v, want ErrUnauthenticated", err)
	}
	if _, err := newClient(t, e.url, "wrong").Locks(ctx, holdfast.LockQuery{}); !errors.Is(err, holdfast.ErrUnauthenticated) {
		t.Errorf("unknown token = %v, want ErrUnauthenticated", err)
	}
	if _, err := e.reader.Acquire(ctx, holdfast.AcquireRequest{Keys: []string{"a"}, Owner: bob}); !errors.Is(err, holdfast.ErrForbidden) {
		t.Errorf("acquire as reader = %v, want ErrForbidden", err)
	}
}

func TestServerUnavailable(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	if err := e.anonymous.Ping(ctx); err != nil {
		t.Fatalf("ping = %v", err)
	}
	e.store.Close()
	_, err := e.app.Acquire(ctx, holdfast.AcquireRequest{Keys: []string{"a"}, Owner: bob})
	var un *holdfast.UnavailableError
	if !errors.Is(err, holdfast.ErrUnavailable) || !errors.As(err, &un) || un.RetryAfter <= 0 {
		t.Errorf("acquire on a closed store = %#v, want *holdfast.UnavailableError with RetryAfter", err)
	}
	if err := e.anonymous.Ping(ctx); !errors.Is(err, holdfast.ErrUnavailable) {
		t.Errorf("ping on a closed store = %v, want ErrUnavailable", err)
	}
}

func TestServerBatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	acquire(t, e.app, alice, "doc/2")
	res, err := e.app.Batch(ctx, []client.Op{
		client.AcquireOp(holdfast.AcquireRequest{Keys: []string{"doc/1"}, Owner: bob}),
		client.AcquireOp(holdfast.AcquireRequest{Keys: []string{"doc/2"}, Owner: bob}),
		client.VerifyOp(holdfast.VerifyRequest{Key: "doc/1", Session: bob.Session}),
		client.RenewOp(holdfast.RenewRequest{Session: bob.Session, Keys: []string{"doc/2"}}),
		client.HeartbeatOp(holdfast.HeartbeatRequest{Session: alice.Session}),
		client.ReleaseOp(holdfast.ReleaseRequest{Session: bob.Session, Keys: []string{"doc/1"}}),
		client.AcquireOp(holdfast.AcquireRequest{Keys: []string{"//"}, Owner: bob}),
		client.EndSessionOp(holdfast.EndSessionRequest{Session: alice.Session}),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 8 {
		t.Fatalf("%d results for 8 ops", len(res))
	}
	if res[0].Err != nil || res[0].Acquire == nil || res[0].Acquire.Locks[0].Key != "doc/1" {
		t.Errorf("op 0 (acquire) = %+v", res[0])
	}
	var locked *holdfast.LockedError
	if res[1].Status != 423 || !errors.As(res[1].Err, &locked) || locked.Conflicts[0].Holders[0].Owner != alice {
		t.Errorf("op 1 (conflicting acquire) = %+v", res[1])
	}
	if res[2].Err != nil || res[2].Verify == nil || res[2].Verify.Lock.Token != res[0].Acquire.Locks[0].Token {
		t.Errorf("op 2 (verify) = %+v", res[2])
	}
	var lost *holdfast.LockLostError
	if res[3].Status != 409 || !errors.As(res[3].Err, &lost) {
		t.Errorf("op 3 (renew of a key not held) = %+v", res[3])
	}
	if res[4].Err != nil || res[4].Heartbeat == nil || res[4].Heartbeat.Session.Locks != 1 {
		t.Errorf("op 4 (heartbeat) = %+v", res[4])
	}
	if res[5].Err != nil || res[5].Release == nil || len(res[5].Release.Released) != 1 {
		t.Errorf("op 5 (release) = %+v", res[5])
	}
	var inv *holdfast.InvalidError
	if res[6].Status != 400 || !errors.As(res[6].Err, &inv) {
		t.Errorf("op 6 (bad key) = %+v", res[6])
	}
	if res[7].Err != nil || res[7].EndSession == nil || len(res[7].EndSession.Released) != 1 {
		t.Errorf("op 7 (end session) = %+v", res[7])
	}
	if page, _ := e.reader.Locks(ctx, holdfast.LockQuery{Prefix: "doc"}); len(page.Locks) != 0 {
		t.Errorf("after the batch, locks = %+v", page.Locks)
	}
}

func TestServerEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := e.anonymous.Events(ctx, "", ""); !errors.Is(err, holdfast.ErrUnauthenticated) {
		t.Fatalf("events without a token = %v, want ErrUnauthenticated", err)
	}
	s, err := e.reader.Events(ctx, "policy", "")
	if err != nil {
		t.Fatal(err)
	}
	acquire(t, e.app, bob, "order/1") // outside the prefix
	acquire(t, e.app, bob, "policy/1")
	if !s.Next() {
		t.Fatalf("no event: %v", s.Err())
	}
	first := s.Entry()
	if first.Event != holdfast.EventAcquired || first.Lock.Key != "policy/1" || first.Lock.Owner != bob {
		t.Errorf("first event = %+v", first)
	}
	resumeFrom := s.LastEventID()
	if resumeFrom == "" {
		t.Fatal("no event id to resume from")
	}
	s.Close()
	if s.Next() || s.Err() != nil {
		t.Errorf("after Close: Next true or Err %v", s.Err())
	}

	// What happens while nobody listens is replayed on resume.
	if _, err := e.admin.ForceRelease(context.Background(), holdfast.ForceReleaseRequest{Keys: []string{"policy/1"}, Reason: "maintenance", Actor: "ops"}); err != nil {
		t.Fatal(err)
	}
	s, err = e.reader.Events(ctx, "policy", resumeFrom)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !s.Next() {
		t.Fatalf("no event after resume: %v", s.Err())
	}
	next := s.Entry()
	if next.Event != holdfast.EventForceReleased || next.Actor != "ops" || next.Reason != "maintenance" || next.Lock.Key != "policy/1" {
		t.Errorf("event after resume = %+v", next)
	}
	if id, err := strconv.ParseUint(s.LastEventID(), 10, 64); err == nil && id != next.ID {
		t.Errorf("event id %s, entry id %d", s.LastEventID(), next.ID)
	}

	cancel()
	for s.Next() {
	}
	if !errors.Is(s.Err(), context.Canceled) {
		t.Errorf("Err after cancel = %v, want context.Canceled", s.Err())
	}
}
