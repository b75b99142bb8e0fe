package memstore_test

import (
	"testing"
	"time"

	"github.com/holdfast/holdfast/memstore"
	"github.com/holdfast/holdfast/store"
	"github.com/holdfast/holdfast/store/storetest"
)

// The store keeps nothing across Close, so the suite skips its durability
// cases (Harness.Reopen is nil).
var harness = storetest.Harness{
	Open: func(t testing.TB, now func() time.Time) store.Store {
		s := memstore.New(memstore.Config{Now: now})
		t.Cleanup(func() { s.Close() })
		return s
	},
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, harness)
}

func BenchmarkStore(b *testing.B) {
	storetest.Bench(b, harness)
}
