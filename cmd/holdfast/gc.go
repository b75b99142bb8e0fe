package main

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// heapFloor is the heap the server lets grow before it collects while its
// live data is small. With the default GOGC of 100, a server that keeps a
// few megabytes live collects after every few megabytes allocated, many
// times a second under load: over PostgreSQL, where every request
// allocates pgx's buffers and rows, allocation and collection took about
// a third of the server's CPU (docs/BENCHMARKS-HISTORY.md). Once the live heap
// passes about half the floor (a large embedded store), GOGC is 100 again.
const heapFloor = 64 << 20

// runtimeHeapMinimum is the Go runtime's least heap goal at GOGC 100; it
// scales with GOGC, so a large GOGC raises it too.
const runtimeHeapMinimum = 4 << 20

var tuneGCOnce sync.Once

// tuneGC starts, once per process, a tuner that sets GOGC after every
// collection so that the next one comes when the heap reaches the greater
// of heapFloor and GOGC 100's goal. Where GOGC is set in the environment
// it does nothing: the operator has chosen.
func tuneGC() {
	if os.Getenv("GOGC") != "" {
		return
	}
	tuneGCOnce.Do(func() { newGCTuner(heapFloor).start() })
}

type gcTuner struct {
	floor   uint64
	stopped atomic.Bool
	samples []metrics.Sample
}

func newGCTuner(floor uint64) *gcTuner {
	return &gcTuner{floor: floor, samples: []metrics.Sample{
		{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/stack:bytes"}, {Name: "/gc/scan/globals:bytes"},
		{Name: "/gc/gogc:percent"},
	}}
}

// start tunes now, then after every collection: a finalizer runs once the
// collector has found its object unreachable, after the next collection
// (rarely the one after: an object allocated while the collector marks
// survives that cycle), and arms the next one. Finalizers run one at a
// time, on one goroutine.
func (t *gcTuner) start() {
	t.tune()
	t.arm()
}

// stop ends the tuner at the next collection (tests).
func (t *gcTuner) stop() { t.stopped.Store(true) }

// sentinel holds a pointer so that it is never packed with other small
// objects by the allocator, which would delay its finalizer indefinitely.
type sentinel struct{ _ *int }

func (t *gcTuner) arm() {
	runtime.SetFinalizer(&sentinel{}, func(*sentinel) {
		if !t.stopped.Load() {
			t.tune()
			t.arm()
		}
	})
}

// tune sets GOGC for the live heap the last collection left. It leaves
// alone a collector that someone turned off (GOGC < 0), as the embedded
// stores do while they load, and reads GOGC each time rather than trust
// what it last set, since others set it too.
func (t *gcTuner) tune() {
	metrics.Read(t.samples)
	live := t.samples[0].Value.Uint64()
	roots := t.samples[1].Value.Uint64() + t.samples[2].Value.Uint64()
	current := int64(t.samples[3].Value.Uint64())
	if current < 0 {
		return
	}
	if p := gcPercent(live, roots, t.floor); int64(p) != current {
		debug.SetGCPercent(p)
	}
}

// gcPercent is the GOGC whose next heap goal is the floor, or 100 where
// GOGC 100's goal is above it. The goal is the live heap plus GOGC
// percent of the live heap and the stacks and globals (roots) the
// collector scans, but never below runtimeHeapMinimum × GOGC/100, which
// bounds the GOGC that can reach the floor.
func gcPercent(live, roots, floor uint64) int {
	if live == 0 || floor <= 2*live+roots {
		return 100
	}
	return int(min((floor-live)*100/(live+roots), floor*100/runtimeHeapMinimum))
}
