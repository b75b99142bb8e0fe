package storetest_test

import (
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/holdfast/holdfast/store/storetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
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
