package pebblestore

import (
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
