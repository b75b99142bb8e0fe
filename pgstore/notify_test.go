package pgstore_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/internal/pgtest"
	"github.com/holdfast/holdfast/pgstore"
	"github.com/holdfast/holdfast/store"
)

// batchSQL records the statements of each round trip a pool sends.
type batchSQL struct {
	mu      sync.Mutex
	batches [][]string
}

func (r *batchSQL) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	r.mu.Lock()
	r.batches = append(r.batches, nil)
	r.mu.Unlock()
	return ctx
}
func (r *batchSQL) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	r.mu.Lock()
	r.batches[len(r.batches)-1] = append(r.batches[len(r.batches)-1], d.SQL)
	r.mu.Unlock()
}
func (r *batchSQL) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}
func (r *batchSQL) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}
func (r *batchSQL) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// A store with Notify announces its commits to Listen on another store of
// the same schema, and does so after its COMMIT, in the same round trip:
// a NOTIFY inside the transaction would hold PostgreSQL's database-wide
// notification lock until the commit is on disk, so that the commits of
// concurrent transactions would each wait for the previous one's flush.
func TestNotifyAfterCommit(t *testing.T) {
	t.Parallel()
	schema := newSchema(t, testPool(t))
	cfg, err := pgxpool.ParseConfig(pgtest.SharedDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	traced := &batchSQL{}
	cfg.ConnConfig.Tracer = traced
	cfg.MaxConns = 2
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	sender, err := pgstore.New(t.Context(), pool, pgstore.Config{Schema: schema, Logger: quiet, Notify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sender.Close()
	heard := listen(t, open(t, testPool(t), schema, nil))

	m, err := holdfast.New(sender, holdfast.Config{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	// Listen connects in the background: acquire until it hears one.
	var got []store.AuditEntry
	deadline := time.After(10 * time.Second)
	for i := 0; got == nil; i++ {
		key := "policy/" + string(rune('a'+i%26))
		if _, err := m.Acquire(t.Context(), holdfast.AcquireRequest{Keys: []string{key},
			Owner: holdfast.Owner{Session: "s-notify"}}); err != nil {
			t.Fatal(err)
		}
		select {
		case got = <-heard:
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatal("the listener heard no commit of the notifying store")
		}
	}
	if got[0].Event != "acquired" || got[0].Lock.Session != "s-notify" {
		t.Errorf("heard %+v, want the acquire of s-notify", got[0])
	}

	traced.mu.Lock()
	defer traced.mu.Unlock()
	notified := 0
	for _, b := range traced.batches {
		commit := slices.Index(b, "COMMIT")
		for i, sql := range b {
			if !strings.Contains(sql, "pg_notify") {
				continue
			}
			notified++
			if commit < 0 || i < commit {
				t.Errorf("pg_notify sent before the COMMIT of its round trip: %q", b)
			}
		}
	}
	if notified == 0 {
		t.Error("no round trip sent pg_notify")
	}
}

// A listener whose connection stopped answering (here the proxy's kernel
// still acknowledges everything, as a host does whose PostgreSQL hangs,
// while new connections reach the database) pings the database once it
// has heard nothing for a while, gets no answer within the store's
// timeout, and listens again on a new connection: waiting, which only
// reads, would never learn that nothing answers.
// Without a bound on transactions (a negative Timeout), the ping is
// bounded all the same.
func TestListenerLeavesAHungConnection(t *testing.T) {
	for _, c := range []struct {
		timeout time.Duration
		says    string
	}{{500 * time.Millisecond, "500ms"}, {-1, "2s"}} {
		t.Run("Timeout="+c.timeout.String(), func(t *testing.T) { listenerLeavesAHungConnection(t, c.timeout, c.says) })
	}
}

func listenerLeavesAHungConnection(t *testing.T, timeout time.Duration, says string) {
	t.Parallel()
	proxy, pool, schema := behindProxy(t)
	warnings := make(chan string, 16)
	listener, err := pgstore.New(t.Context(), pool, pgstore.Config{Schema: schema,
		Logger: slog.New(warningsTo(warnings)), Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { listener.Close() }) // after listen's cleanup, registered below
	pgstore.SetListenProbe(listener, 200*time.Millisecond)
	sender, err := pgstore.New(t.Context(), testPool(t), pgstore.Config{Schema: schema, Logger: quiet, Notify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sender.Close()
	m, err := holdfast.New(sender, holdfast.Config{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()

	heard := listen(t, listener)
	// hear acquires for session until the listener hears one of them.
	hear := func(session string) {
		t.Helper()
		deadline := time.After(time.Minute)
		for i := 0; ; i++ {
			if _, err := m.Acquire(t.Context(), holdfast.AcquireRequest{Keys: []string{fmt.Sprintf("%s/%d", session, i)},
				Owner: holdfast.Owner{Session: session}}); err != nil {
				t.Fatal(err)
			}
			select {
			case es := <-heard:
				if slices.ContainsFunc(es, func(e store.AuditEntry) bool { return e.Lock.Session == session }) {
					return
				}
			case <-time.After(100 * time.Millisecond):
			case <-deadline:
				t.Fatalf("the listener heard no commit of %s in a minute", session)
			}
		}
	}
	hear("s-before")
	proxy.Strand()
	hear("s-after")
	select {
	case w := <-warnings:
		if !strings.Contains(w, "did not answer a ping within "+says) {
			t.Errorf("the listener warned %q, want that the database did not answer its ping", w)
		}
	default:
		t.Error("the listener connected again without a warning")
	}
}

// listen runs s.Listen until t ends, and returns what it hears.
func listen(t *testing.T, s *pgstore.Store) <-chan []store.AuditEntry {
	heard := make(chan []store.AuditEntry, 64)
	ctx, cancel := context.WithCancel(t.Context())
	listening := make(chan error, 1)
	go func() { listening <- s.Listen(ctx, func(es []store.AuditEntry) { heard <- es }) }()
	t.Cleanup(func() {
		cancel()
		<-listening
	})
	return heard
}

// warningsTo is a slog handler that sends each warning's message and
// attributes to c.
func warningsTo(c chan<- string) slog.Handler { return warnings{c} }

type warnings struct{ c chan<- string }

func (w warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w warnings) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	select {
	case w.c <- b.String():
	default:
	}
	return nil
}
func (w warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w warnings) WithGroup(string) slog.Handler      { return w }
