package pebblestore

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/holdfast/holdfast/internal/codec"
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

func TestAuditListingHoldsUpNoCommit(t *testing.T) {
	embeddedtest.AuditListingHoldsUpNoCommit(t, openStore, func(s store.Store, hook func()) {
		s.(*Store).decodeAudit = func(p []byte) (*store.AuditEntry, error) {
			hook()
			return codec.DecodeAudit(p)
		}
	})
}

// A listing whose caller leaves stops walking the log: it holds the
// database open against Close while it walks.
func TestAuditListingStopsWhenItsCallerLeaves(t *testing.T) {
	t.Parallel()
	s := embeddedtest.Open(openStore).OpenAudit(t, t.TempDir()).(*Store)
	err := s.Update(context.Background(), func(tx store.Tx) error {
		for range 10_000 {
			if _, err := tx.AppendAudit(store.AuditEntry{At: embeddedtest.AuditT0, Event: "acquired", Lock: store.Lock{Key: "k"}}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, leave := context.WithCancel(context.Background())
	decoded := 0
	s.decodeAudit = func(p []byte) (*store.AuditEntry, error) {
		if decoded++; decoded == 1 {
			leave()
		}
		return codec.DecodeAudit(p)
	}
	if _, err := s.ListAudit(ctx, store.AuditQuery{Key: "nowhere"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("ListAudit whose caller left = %v, want context.Canceled", err)
	}
	if decoded >= 10_000 {
		t.Fatalf("decoded all %d entries after the caller left", decoded)
	}
}
