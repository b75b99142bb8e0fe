package main

import (
	"runtime"
	"runtime/metrics"
	"testing"
	"time"
)

func TestGCPercent(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		live, roots uint64
		want        int
	}{
		{0, 0, 100},               // nothing measured yet
		{4 * mib, 0, 1500},        // goal 4 + 4×15 = 64 MiB
		{4 * mib, 4 * mib, 750},   // goal 4 + 8×7.5 = 64 MiB
		{30 * mib, 2 * mib, 106},  // goal 30 + 32×1.06 ≈ 64 MiB
		{31 * mib, 2 * mib, 100},  // GOGC 100's goal, 64 MiB, is the floor
		{500 * mib, 1 * mib, 100}, // a large store: as without the tuner
	} {
		if got := gcPercent(c.live, c.roots, 64*mib); got != c.want {
			t.Errorf("gcPercent(%d MiB live, %d MiB roots) = %d, want %d", c.live/mib, c.roots/mib, got, c.want)
		}
	}
}

// The tuner raises GOGC while the live heap is small, after a
// collection, and gives it back once the live heap is large.
func TestGCTunerFollowsTheLiveHeap(t *testing.T) {
	tuneGCOnce.Do(func() {}) // no other tuner in this process
	tuner := newGCTuner(64 << 20)
	tuner.start()
	gogc := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	waitFor := func(what string, ok func(int) bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; {
			runtime.GC()
			metrics.Read(gogc)
			p := int(gogc[0].Value.Uint64())
			if ok(p) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("GOGC is %d, want %s", p, what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitFor("above 100 with a small live heap", func(p int) bool { return p > 100 })
	big := make([]byte, 100<<20)
	big[len(big)-1] = 1
	waitFor("100 with 100 MiB live", func(p int) bool { return p == 100 })
	runtime.KeepAlive(big)
}
