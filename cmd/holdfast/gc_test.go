package main

import (
	"runtime"
	"runtime/debug"
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
		{1 * mib, 0, 1600},        // the runtime's minimum goal, 4 MiB × 16, is the floor
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

// The tuner puts the heap goal at the floor while the live heap is small,
// gives GOGC 100 back once the live heap is large, and leaves a collector
// that someone turned off alone.
func TestGCTunerFollowsTheLiveHeap(t *testing.T) {
	const floor = 64 << 20
	before := debug.SetGCPercent(100)
	tuner := newGCTuner(floor)
	t.Cleanup(func() {
		tuner.stop()
		debug.SetGCPercent(before)
	})
	tuner.start()
	samples := []metrics.Sample{{Name: "/gc/gogc:percent"}, {Name: "/gc/heap/goal:bytes"}}
	waitFor := func(what string, ok func(gogc int, goal uint64) bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; {
			runtime.GC()
			metrics.Read(samples)
			gogc, goal := int(int64(samples[0].Value.Uint64())), samples[1].Value.Uint64()
			if ok(gogc, goal) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("GOGC %d, heap goal %d MiB; want %s", gogc, goal>>20, what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitFor("a goal of about 64 MiB with a small live heap", func(gogc int, goal uint64) bool {
		return gogc > 100 && goal > floor*9/10 && goal < floor*11/10
	})

	big := make([]byte, 100<<20)
	big[len(big)-1] = 1
	waitFor("GOGC 100 with 100 MiB live", func(gogc int, _ uint64) bool { return gogc == 100 })

	debug.SetGCPercent(-1)
	for range 5 {
		runtime.GC()
		time.Sleep(20 * time.Millisecond) // for the finalizer
	}
	if off := debug.SetGCPercent(100); off != -1 {
		t.Errorf("the tuner set GOGC %d while the collector was off", off)
	}
	runtime.KeepAlive(big)
}
