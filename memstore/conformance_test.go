package memstore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
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

// BenchmarkAggregate is the aggregate workload of holdfast bench in
// process, one caller: acquire 100 keys all or nothing, then release them.
// What it costs per key is the Manager's and memdb's, without the disk.
func BenchmarkAggregate(b *testing.B) {
	m, err := holdfast.New(memstore.New(memstore.Config{}), holdfast.Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Close() })
	keys := make([]string, 100)
	for i := range keys {
		keys[i] = fmt.Sprintf("aggregate/0/member/%d", i)
	}
	o := holdfast.Owner{Session: "bench", User: "u-bench"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Acquire(b.Context(), holdfast.AcquireRequest{Keys: keys, Owner: o}); err != nil {
			b.Fatal(err)
		}
		if _, err := m.Release(b.Context(), holdfast.ReleaseRequest{Session: o.Session, Keys: keys}); err != nil {
			b.Fatal(err)
		}
	}
}
