package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/internal/config"
	"github.com/holdfast/holdfast/pebblestore"
)

// TestServeNewDirectoryUsesLogstore checks what a new store directory
// holds after holdfast serve: logstore's segments, no Pebble database.
func TestServeNewDirectoryUsesLogstore(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := startServe(t, dir, "--sweep-interval", "1h") // no sweep's commits in the metrics
	if _, err := newClient(t, p.url).Acquire(context.Background(), holdfast.AcquireRequest{
		Keys: []string{"policy/1"}, Owner: holdfast.Owner{Session: "s-1"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "pebble")); !os.IsNotExist(err) {
		t.Errorf("a new directory holds a Pebble database (%v)", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if len(names) < 2 { // the lock file and at least one segment
		t.Errorf("store directory holds %v", names)
	}
	if got := storeRecords(t, p.url); got["locks"] != 1 || got["sessions"] != 1 || got["lost"] != 0 {
		t.Errorf("holdfast_store_records after one acquire: %v", got)
	}
	// The acquire was one commit, made durable by an fdatasync of the log.
	m := scrapeMetrics(t, p.url)
	if syncs, seconds := m["holdfast_log_syncs_total"], m["holdfast_log_sync_seconds_total"]; syncs < 1 || seconds <= 0 {
		t.Errorf("after one acquire holdfast_log_syncs_total %g, holdfast_log_sync_seconds_total %g; want a sync that took time", syncs, seconds)
	}
	if ops, commits := m["holdfast_commit_operations_sum"], m["holdfast_commit_operations_count"]; ops != 1 || commits != 1 {
		t.Errorf("after one acquire %g operations in %g commits, want 1 in 1", ops, commits)
	}
}

// scrapeMetrics reads /metrics into the value of each series, named with
// its labels as the text format writes them.
func scrapeMetrics(t *testing.T, url string) map[string]float64 {
	t.Helper()
	res, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	series := map[string]float64{}
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok || strings.HasPrefix(name, "#") {
			continue
		}
		var n float64
		if _, err := fmt.Sscanf(value, "%g", &n); err != nil {
			t.Fatalf("/metrics line %q: %v", sc.Text(), err)
		}
		series[name] = n
	}
	return series
}

// storeRecords reads the holdfast_store_records gauges from /metrics.
func storeRecords(t *testing.T, url string) map[string]int {
	t.Helper()
	m := scrapeMetrics(t, url)
	got := map[string]int{}
	for _, kind := range []string{"locks", "sessions", "lost"} {
		if n, ok := m[fmt.Sprintf("holdfast_store_records{kind=%q}", kind)]; ok {
			got[kind] = int(n)
		}
	}
	if len(got) != 3 {
		t.Fatalf("/metrics holds holdfast_store_records %v, want locks, sessions and lost", got)
	}
	return got
}

// TestServeKeepsAnEarlierPebbleDirectory: a directory written by the
// embedded store of earlier versions (Pebble) is served as it is, with
// every lock it holds, rather than taken for an empty new store.
func TestServeKeepsAnEarlierPebbleDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st, err := pebblestore.Open(dir, pebblestore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := holdfast.New(st, holdfast.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	held, err := m.Acquire(ctx, holdfast.AcquireRequest{Keys: []string{"policy/7"},
		Owner: holdfast.Owner{Session: "s-old", Name: "Ada"}, TTL: holdfast.Duration(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	p := startServe(t, dir, "--log-level", "info")
	c := newClient(t, p.url)
	_, err = c.Acquire(ctx, holdfast.AcquireRequest{Keys: []string{"policy/7"}, Owner: holdfast.Owner{Session: "s-new"}})
	var locked *holdfast.LockedError
	if !errors.As(err, &locked) || locked.Conflicts[0].Holders[0].Owner.Session != "s-old" || locked.Conflicts[0].Holders[0].Token != held.Locks[0].Token {
		t.Fatalf("acquire of a key held in the earlier directory: %v", err)
	}
	if out := p.output(); !strings.Contains(out, "pebblestore") {
		t.Errorf("serve did not say which engine it kept:\n%s", out)
	}
	if got := storeRecords(t, p.url); got["locks"] != 1 {
		t.Errorf("holdfast_store_records over the earlier directory: %v", got)
	}
}

// TestStoreTimeoutBoundsTheEmbeddedStores checks that store_timeout
// reaches both embedded stores, whose disk it bounds (docs/STORAGE.md, "A
// stalled disk").
func TestStoreTimeoutBoundsTheEmbeddedStores(t *testing.T) {
	t.Parallel()
	earlier := t.TempDir()
	st, err := pebblestore.Open(earlier, pebblestore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	for name, dir := range map[string]string{"logstore": t.TempDir(), "pebblestore": earlier} {
		cfg := config.Default()
		cfg.Store, cfg.StoreTimeout = dir, config.Duration(1234*time.Millisecond)
		st, closeStore, err := openStore(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		b, ok := st.(interface{ Timeout() time.Duration })
		if !ok || b.Timeout() != 1234*time.Millisecond {
			t.Errorf("%s (%T) is not bounded by store_timeout 1.234s", name, st)
		}
		if err := closeStore(); err != nil {
			t.Fatal(err)
		}
	}
}
