package logstore

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/holdfast/holdfast/internal/embeddedtest"
	"github.com/holdfast/holdfast/store"
)

// These tests are in the package, to count the audit entries memdb holds.

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// openStore opens the store in dir for the shared tests that look inside it.
func openStore(dir string, now func() time.Time) (store.Store, error) {
	return Open(dir, Config{Now: now, Logger: quietLog})
}

func auditInMemory(s store.Store) int {
	_, _, n := s.(*Store).mem.Size()
	return n
}

func TestAuditLivesOnDiskOnly(t *testing.T) {
	embeddedtest.AuditLivesOnDiskOnly(t, openStore, auditInMemory)
}

func TestPruneAuditOnDisk(t *testing.T) { embeddedtest.PruneAuditOnDisk(t, openStore) }

// The sweep prunes every second: once a prune has found the oldest entry
// it keeps, or there is no entry left, the next ones answer without
// reading the log (here, without the files) until that entry is old
// enough. A listing after the last entry reads nothing either.
func TestPruneAuditSkipsTheLogUntilTheOldestEntryIsDue(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := embeddedtest.Open(openStore).OpenAudit(t, dir)
	embeddedtest.AppendAuditEntries(t, s)
	if n := embeddedtest.PruneAudit(t, s, embeddedtest.AuditT0.Add(90*time.Second), 0); n != 2 {
		t.Fatalf("pruned %d, want 2", n)
	}
	hide := func(suffix, from string) {
		names, _ := filepath.Glob(filepath.Join(dir, "*.log"+from))
		for _, name := range names {
			if err := os.Rename(name, strings.TrimSuffix(name, from)+suffix); err != nil {
				t.Fatal(err)
			}
		}
	}
	hide(".hidden", "")
	for range 3 {
		if n := embeddedtest.PruneAudit(t, s, embeddedtest.AuditT0.Add(2*time.Minute), 0); n != 0 {
			t.Fatalf("pruned %d with nothing due", n)
		}
	}
	// A client following the log asks for what comes after the last entry.
	if got := embeddedtest.ListAudit(t, s, store.AuditQuery{After: 8}); len(got) != 0 {
		t.Fatalf("after the last entry: %v", embeddedtest.IDs(got))
	}
	hide("", ".hidden")
	if n := embeddedtest.PruneAudit(t, s, embeddedtest.AuditT0.Add(time.Hour), 0); n != 6 {
		t.Fatalf("pruned %d, want the 6 left", n)
	}
	hide(".hidden", "")
	if n := embeddedtest.PruneAudit(t, s, embeddedtest.AuditT0.Add(2*time.Hour), 0); n != 0 {
		t.Fatalf("pruned %d from an empty log", n)
	}
	hide("", ".hidden")
}
