package storetest_test

import (
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/holdfast/holdfast/memstore"
	"github.com/holdfast/holdfast/store"
	"github.com/holdfast/holdfast/store/storetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// memHarness runs the suite on the in-memory store: it keeps nothing
// across Close, so the durability cases skip.
var memHarness = storetest.Harness{
	Open: func(t testing.TB, now func() time.Time) store.Store {
		s := memstore.New(memstore.Config{Now: now})
		t.Cleanup(func() { s.Close() })
		return s
	},
}

func TestMemstore(t *testing.T) {
	t.Parallel()
	storetest.Run(t, memHarness)
}

func BenchmarkMemstore(b *testing.B) {
	storetest.Bench(b, memHarness)
}

func TestClock(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 11, 30, 10, 47, 0, 0, time.FixedZone("CET", 3600))
	c := storetest.NewClock(start)
	if got := c.Now(); !got.Equal(start) || got.Location() != time.UTC {
		t.Fatalf("Now() = %v, want %v in UTC", got, start)
	}
	if got := c.Advance(90 * time.Second); !got.Equal(start.Add(90*time.Second)) || !c.Now().Equal(got) {
		t.Fatalf("Advance(90s) = %v, Now() = %v, want %v", got, c.Now(), start.Add(90*time.Second))
	}
}
