package holdfast

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/holdfast/holdfast/memstore"
	"github.com/holdfast/holdfast/store"
)

// restartEnv is a store that outlives its Managers, on a clock the test
// moves: a Manager closed and a new one opened later is a lock service
// that was down meanwhile.
type restartEnv struct {
	sweepEnv
	st store.Store
}

func newRestartEnv(t *testing.T) *restartEnv {
	e := &restartEnv{sweepEnv: sweepEnv{t: t}}
	e.now.Store(time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC).UnixNano())
	e.st = memstore.New(memstore.Config{Now: func() time.Time { return time.Unix(0, e.now.Load()) }})
	e.start(0)
	return e
}

// start closes the Manager, if any, and opens a new one with the restart
// grace given (0: the default), which makes its first transaction at once.
func (e *restartEnv) start(grace time.Duration) {
	if e.m != nil {
		e.m.Close()
	}
	m, err := New(e.st, Config{SweepInterval: -1, RestartGrace: grace})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { m.Close() })
	e.m = m
	if err := m.Sweep(e.t.Context()); err != nil {
		e.t.Fatal(err)
	}
}

// ended reports whether the store has session id as ended.
func (e *restartEnv) ended(id string) bool {
	var s store.Session
	err := e.m.store.View(e.t.Context(), func(tx store.ReadTx) (err error) {
		s, _, err = tx.Session(id)
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return s.Ended()
}

func (e *restartEnv) acquire(session, key string, idle time.Duration) error {
	_, err := e.m.Acquire(e.t.Context(), AcquireRequest{Keys: []string{key},
		Owner: Owner{Session: session, User: session}, IdleTimeout: Duration(idle)})
	return err
}

// holder is the session holding key, "" if none.
func (e *restartEnv) holder(key string) string {
	page, err := e.m.Locks(e.t.Context(), LockQuery{Key: key})
	if err != nil {
		e.t.Fatal(err)
	}
	if len(page.Locks) == 0 {
		return ""
	}
	return page.Locks[0].Owner.Session
}

// A session whose idle timeout ran out while the lock service was down
// keeps its locks for the restart grace, or its idle timeout if shorter,
// so that its client can heartbeat once the service is back; one that
// does lives on, one that does not ends. Sessions seen after the start
// get no grace.
func TestRestartGraceKeepsSessionsThatLapsedWhileDown(t *testing.T) {
	t.Parallel()
	e := newRestartEnv(t)
	ctx := t.Context()
	for _, a := range []struct {
		session, key string
		idle         time.Duration
	}{
		{"s-ada", "policy/1", 5 * time.Minute},
		{"s-bob", "policy/2", 30 * time.Second},
		{"s-cy", "policy/3", 5 * time.Minute},
	} {
		if err := e.acquire(a.session, a.key, a.idle); err != nil {
			t.Fatal(err)
		}
	}
	e.advance(10 * time.Minute) // down: every idle timeout ran out
	e.start(0)                  // the default grace, a minute
	start := time.Unix(0, e.now.Load()).UTC()

	if e.ended("s-ada") || e.holder("policy/1") != "s-ada" {
		t.Fatal("the sweep at the restart ended s-ada, or policy/1 shows as free")
	}
	err := e.acquire("s-dan", "policy/1", 0)
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("acquiring s-ada's lock within the grace: %v, want it refused", err)
	}
	sessions, err := e.m.Sessions(ctx, SessionQuery{Session: "s-cy"})
	if err != nil {
		t.Fatal(err)
	}
	if len(sessions.Sessions) != 1 || sessions.Sessions[0].ExpiresAt == nil ||
		!time.Time(*sessions.Sessions[0].ExpiresAt).Equal(start.Add(time.Minute)) {
		t.Fatalf("s-cy listed as %+v, want it live until the grace ends at %s", sessions.Sessions, start.Add(time.Minute))
	}

	e.advance(20 * time.Second)
	hb, err := e.m.Heartbeat(ctx, HeartbeatRequest{Session: "s-ada"})
	if err != nil {
		t.Fatalf("s-ada's heartbeat 20s after the restart: %v", err)
	}
	if hb.Session.Locks != 1 || len(hb.Lost) != 0 {
		t.Fatalf("s-ada's heartbeat: %+v, want its lock held and nothing lost", hb)
	}

	e.advance(15 * time.Second) // 35s: past s-bob's 30s idle timeout
	if err := e.acquire("s-dan", "policy/2", 0); err != nil {
		t.Fatalf("s-bob's grace is its idle timeout, 30s; at 35s: %v", err)
	}
	if err := e.m.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if !e.ended("s-bob") || e.ended("s-ada") || e.ended("s-cy") {
		t.Fatal("the sweep within the grace must end s-bob, whose grace is over, and only it")
	}
	if err := e.acquire("s-eve", "order/1", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	e.advance(11 * time.Second) // 46s: s-eve, seen since the start, is idle
	if err := e.acquire("s-dan", "order/1", 0); err != nil {
		t.Fatalf("s-eve started after the restart and gets no grace: %v", err)
	}
	if e.holder("policy/3") != "s-cy" {
		t.Fatal("policy/3 is free before s-cy's grace ends")
	}

	e.advance(15 * time.Second) // 61s: the grace is over
	if e.holder("policy/3") != "" {
		t.Fatal("policy/3 still held after the grace")
	}
	if err := e.m.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = e.m.Heartbeat(ctx, HeartbeatRequest{Session: "s-cy"})
	if lost, ok := errors.AsType[*LockLostError](err); !ok || lost.Reason != LostSessionExpired {
		t.Fatalf("s-cy, which never came back: %v, want it expired", err)
	}
	if e.holder("policy/1") != "s-ada" {
		t.Fatal("s-ada, which heartbeated within the grace, lost policy/1")
	}
}

// Without the grace, a session whose idle timeout ran out while the
// service was down has ended by the time it is back.
func TestRestartGraceOff(t *testing.T) {
	t.Parallel()
	e := newRestartEnv(t)
	if err := e.acquire("s-ada", "policy/1", 5*time.Minute); err != nil {
		t.Fatal(err)
	}
	e.advance(10 * time.Minute)
	e.start(-1)
	_, err := e.m.Heartbeat(t.Context(), HeartbeatRequest{Session: "s-ada"})
	if lost, ok := errors.AsType[*LockLostError](err); !ok || lost.Reason != LostSessionExpired {
		t.Fatalf("heartbeat after the restart: %v, want the session expired", err)
	}
}

// The grace counts from the Manager's first transaction, not from New: a
// server that starts while its store cannot answer gives its sessions the
// grace once the store is back.
func TestRestartGraceCountsFromTheFirstTransaction(t *testing.T) {
	t.Parallel()
	e := newRestartEnv(t)
	if err := e.acquire("s-ada", "policy/1", 5*time.Minute); err != nil {
		t.Fatal(err)
	}
	e.m.Close()
	m, err := New(e.st, Config{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	e.m = m
	e.advance(10 * time.Minute) // New, then nothing for ten minutes
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := m.Heartbeat(ctx, HeartbeatRequest{Session: "s-ada"}); err != nil {
		t.Fatalf("the first request after the start: %v", err)
	}
}
