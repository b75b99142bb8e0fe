package pgstore_test

import (
	"testing"
	"time"

	"github.com/holdfast/holdfast/pgstore"
	"github.com/holdfast/holdfast/store"
)

// A touch that moves a session's idle deadline later leaves idle_after,
// the column the sweep's index holds, where it was, so that the update
// changes no indexed column. The sweep moves an idle_after it finds early
// up to the deadline; a deadline moved earlier, or gone, takes idle_after
// with it at once.
func TestIdleAfterLagsBehindALaterDeadline(t *testing.T) {
	t.Parallel()
	pool := testPool(t)
	schema := newSchema(t, pool)
	t0 := time.Date(2026, 12, 2, 18, 0, 0, 0, time.UTC)
	s := open(t, pool, schema, nil)
	ctx := t.Context()

	sess := store.Session{ID: "s-83", LastSeen: t0, IdleTimeout: time.Minute}
	touch := func(lastSeen time.Time, timeout time.Duration) {
		t.Helper()
		sess.LastSeen, sess.IdleTimeout = lastSeen, timeout
		if err := s.Update(ctx, func(tx store.Tx) error { return tx.(store.Toucher).TouchSession(sess) }); err != nil {
			t.Fatal(err)
		}
	}
	want := func(step string, after, deadline *time.Time) {
		t.Helper()
		var gotAfter, gotDeadline *time.Time
		if err := pool.QueryRow(ctx, `SELECT idle_after, idle_deadline FROM `+schema+`.sessions WHERE id = $1`, sess.ID).Scan(&gotAfter, &gotDeadline); err != nil {
			t.Fatal(err)
		}
		same := func(a, b *time.Time) bool { return (a == nil) == (b == nil) && (a == nil || a.Equal(*b)) }
		if !same(gotAfter, after) || !same(gotDeadline, deadline) {
			t.Fatalf("%s: idle_after %v, idle_deadline %v; want %v, %v", step, gotAfter, gotDeadline, after, deadline)
		}
	}
	sweep := func(now time.Time) (ids []string) {
		t.Helper()
		if err := s.Update(ctx, func(tx store.Tx) error {
			idle, err := tx.IdleSessions(now, 10)
			for _, s := range idle {
				ids = append(ids, s.ID)
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return ids
	}
	at := func(d time.Duration) *time.Time { x := t0.Add(d); return &x }

	touch(t0, time.Minute)
	want("a new session", at(time.Minute), at(time.Minute))
	touch(t0.Add(30*time.Second), time.Minute)
	want("a deadline moved later", at(time.Minute), at(90*time.Second))

	if got := sweep(t0.Add(time.Minute)); len(got) != 0 {
		t.Errorf("idle at the old deadline: %v, want none", got)
	}
	want("after the sweep passed it", at(90*time.Second), at(90*time.Second))
	if got := sweep(t0.Add(90 * time.Second)); len(got) != 1 || got[0] != sess.ID {
		t.Errorf("idle at the deadline: %v, want [%s]", got, sess.ID)
	}

	touch(t0.Add(40*time.Second), 10*time.Second)
	want("a deadline moved earlier", at(50*time.Second), at(50*time.Second))
	touch(t0.Add(45*time.Second), 0)
	want("no idle timeout", nil, nil)
	touch(t0.Add(46*time.Second), time.Minute)
	want("an idle timeout again", at(106*time.Second), at(106*time.Second))
}

// Upgrading to schema version 3 gives the live sessions with an idle
// timeout their idle_after, so that the sweep still finds them idle.
func TestMigration3KeepsIdleSessionsFound(t *testing.T) {
	t.Parallel()
	pool := testPool(t)
	schema := newSchemaAt(t, pool, 2)
	ctx := t.Context()
	t0 := time.Date(2026, 12, 2, 18, 0, 0, 0, time.UTC)
	if _, err := pool.Exec(ctx, `INSERT INTO `+schema+`.sessions (id, last_seen, idle_timeout_ns, idle_deadline, ended_at) VALUES
		('s-idle', $1::timestamptz, 60e9, $1::timestamptz + interval '1 minute', NULL),
		('s-forever', $1::timestamptz, 0, NULL, NULL),
		('s-ended', $1::timestamptz, 60e9, NULL, $1::timestamptz)`, t0); err != nil {
		t.Fatal(err)
	}
	if err := pgstore.Migrate(ctx, pool, schema); err != nil {
		t.Fatal(err)
	}
	s := open(t, pool, schema, nil)
	var ids []string
	if err := s.Update(ctx, func(tx store.Tx) error {
		idle, err := tx.IdleSessions(t0.Add(time.Hour), 10)
		for _, s := range idle {
			ids = append(ids, s.ID)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(ids) != 1 || ids[0] != "s-idle" {
		t.Fatalf("idle sessions after the upgrade: %v, want [s-idle]", ids)
	}
}
