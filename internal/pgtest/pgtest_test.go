package pgtest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/holdfast/holdfast/internal/pgtest"
)

// A committed row survives a fast stop and a crash; while the server is
// down nothing connects; it comes back on the same address.
func TestStopAndCrashKeepCommits(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t)
	ctx := context.Background()
	exec := func(sql string, args ...any) error {
		conn, err := pgx.Connect(ctx, srv.DSN())
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, sql, args...)
		return err
	}
	count := func() int {
		t.Helper()
		conn, err := pgx.Connect(ctx, srv.DSN())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM kept`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	var settings struct{ fsync, syncCommit string }
	conn, err := pgx.Connect(ctx, srv.DSN())
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, `SELECT current_setting('fsync'), current_setting('synchronous_commit')`).Scan(&settings.fsync, &settings.syncCommit); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	if settings.fsync != "on" || settings.syncCommit != "on" {
		t.Errorf("fsync %s, synchronous_commit %s; a crash test needs both on", settings.fsync, settings.syncCommit)
	}

	if err := exec(`CREATE TABLE kept (n int)`); err != nil {
		t.Fatal(err)
	}
	for i, mode := range []pgtest.Mode{pgtest.Fast, pgtest.Immediate} {
		if err := exec(`INSERT INTO kept VALUES ($1)`, i); err != nil {
			t.Fatal(err)
		}
		srv.Stop(mode)
		short, cancel := context.WithTimeout(ctx, 2*time.Second)
		if c, err := pgx.Connect(short, srv.DSN()); err == nil {
			c.Close(ctx)
			t.Fatalf("connected to the server after a %s stop", mode)
		}
		cancel()
		srv.Start()
		if n := count(); n != i+1 {
			t.Fatalf("after a %s stop and a start: %d rows, want %d", mode, n, i+1)
		}
	}
	if log := srv.Log(); !strings.Contains(log, "automatic recovery in progress") {
		t.Errorf("the start after the immediate stop did not recover from the WAL:\n%s", log)
	}
}
