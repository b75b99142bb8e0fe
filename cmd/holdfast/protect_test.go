package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/internal/pgtest"
	"github.com/holdfast/holdfast/pgstore"
)

func TestProtectAndUnprotect(t *testing.T) {
	t.Parallel()
	dsn := pgtest.SharedDSN(t)
	ctx := t.Context()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	var b [6]byte
	rand.Read(b[:])
	schema := "hf_cli_" + hex.EncodeToString(b[:])
	if err := pgstore.Migrate(ctx, pool, schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Not t.Context(): it is done before cleanups run.
		if _, err := pool.Exec(context.Background(), `DROP SCHEMA `+schema+` CASCADE`); err != nil {
			t.Errorf("dropping %s: %v", schema, err)
		}
		pool.Close()
	})
	table := schema + ".policies"
	if _, err := pool.Exec(ctx, `CREATE TABLE `+table+` (id int PRIMARY KEY, premium int); INSERT INTO `+table+` VALUES (1, 100), (2, 200)`); err != nil {
		t.Fatal(err)
	}
	holdfastCLI := func(args ...string) (int, string) {
		var out, errOut bytes.Buffer
		code := run(ctx, args, &out, &errOut)
		return code, out.String() + errOut.String()
	}

	if code, out := holdfastCLI("protect", "--store", dsn, "--schema", schema, "--table", table); code != exitUsage {
		t.Fatalf("protect without --key = %d (%s), want %d", code, out, exitUsage)
	}
	if code, out := holdfastCLI("protect", "--store", dsn, "--schema", schema, "--table", table, "--key", "'policy/' || id"); code != 0 {
		t.Fatalf("holdfast protect = %d: %s", code, out)
	}
	st, err := pgstore.New(ctx, pool, pgstore.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	m, err := holdfast.New(st, holdfast.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := m.Acquire(ctx, holdfast.AcquireRequest{Keys: []string{"policy/1"}, Owner: holdfast.Owner{Session: "s-1", Name: "Bob Smith"}, TTL: holdfast.Duration(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	_, err = pool.Exec(ctx, `UPDATE `+table+` SET premium = 0`)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "55P03" || !strings.Contains(pgErr.Message, "Bob Smith") {
		t.Fatalf("UPDATE of a held row on a protected table = %v, want 55P03 naming Bob Smith", err)
	}

	if code, out := holdfastCLI("unprotect", "--store", dsn, "--table", table); code != 0 {
		t.Fatalf("holdfast unprotect = %d: %s", code, out)
	}
	if _, err := pool.Exec(ctx, `UPDATE `+table+` SET premium = 0`); err != nil {
		t.Fatalf("UPDATE after unprotect: %v", err)
	}
}
