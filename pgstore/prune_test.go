package pgstore_test

import (
	"testing"
	"time"

	"github.com/holdfast/holdfast/store"
)

// The audit log is pruned in id order, up to the first entry that is not
// old enough (migration 0003), and never more than the limit.
func TestPruneAuditInIDOrder(t *testing.T) {
	t.Parallel()
	pool := testPool(t)
	s := open(t, pool, newSchema(t, pool), nil)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ats := []time.Duration{0, time.Hour, 5 * time.Hour, 2 * time.Hour, 3 * time.Hour}
	err := s.Update(t.Context(), func(tx store.Tx) error {
		for _, d := range ats {
			if _, err := tx.AppendAudit(store.AuditEntry{At: t0.Add(d), Event: "acquired", Lock: store.Lock{Key: "k", Session: "s"}}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	prune := func(before time.Duration, limit int) int {
		t.Helper()
		var n int
		if err := s.Update(t.Context(), func(tx store.Tx) (err error) {
			n, err = tx.PruneAudit(t0.Add(before), limit)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return n
	}
	left := func() []time.Duration {
		t.Helper()
		var out []time.Duration
		if err := s.View(t.Context(), func(tx store.ReadTx) error {
			es, err := tx.Audit(store.AuditQuery{})
			for _, e := range es {
				out = append(out, e.At.Sub(t0))
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if n := prune(4*time.Hour, 1); n != 1 {
		t.Fatalf("pruned %d with limit 1, want 1", n)
	}
	// The third entry is not old enough: pruning stops there, although
	// the two after it are.
	if n := prune(4*time.Hour, 10); n != 1 {
		t.Fatalf("pruned %d, want 1 (up to the first entry not older than before)", n)
	}
	if got := left(); len(got) != 3 || got[0] != 5*time.Hour {
		t.Fatalf("left %v, want the last three entries", got)
	}
	if n := prune(6*time.Hour, 0); n != 3 {
		t.Fatalf("pruned %d without a limit, want the 3 left", n)
	}
}
