package main

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// heapFloor is the heap the server lets grow before it collects while its
// live data is small. With the default GOGC of 100, a server that keeps a
// few megabytes live collects after every few megabytes allocated, many
// times a second under load: over PostgreSQL, where every request
// allocates pgx's buffers and rows, collection took about a third of the
// server's CPU (docs/BENCHMARKS.md). Once the live heap passes half the
// floor (a large embedded store), GOGC is 100 again, so the heap never
// grows past twice the live data because of this.
const heapFloor = 64 << 20

var tuneGCOnce sync.Once

// tuneGC starts, once per process, a tuner that sets GOGC after every
// collection so that the next one comes when the heap reaches the greater
// of heapFloor and twice the live heap. Where GOGC is set in the
// environment it does nothing: the operator has chosen.
func tuneGC() {
	if os.Getenv("GOGC") != "" {
		return
	}
	tuneGCOnce.Do(func() { newGCTuner(heapFloor).start() })
}

type gcTuner struct {
	floor   uint64
	percent int // what SetGCPercent was last given
	live    []metrics.Sample
}

func newGCTuner(floor uint64) *gcTuner {
	return &gcTuner{floor: floor, percent: 100, live: []metrics.Sample{
		{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/stack:bytes"}, {Name: "/gc/scan/globals:bytes"},
	}}
}

// start tunes now, then after every collection: a finalizer runs once the
// collector has found its object unreachable, after the next collection,
// and arms the next one. Finalizers run one at a time, so tune needs no
// lock.
func (t *gcTuner) start() {
	t.tune()
	t.arm()
}

func (t *gcTuner) arm() {
	runtime.SetFinalizer(new([16]byte), func(*[16]byte) {
		t.tune()
		t.arm()
	})
}

// tune sets GOGC for the live heap the last collection left.
func (t *gcTuner) tune() {
	metrics.Read(t.live)
	live, roots := t.live[0].Value.Uint64(), t.live[1].Value.Uint64()+t.live[2].Value.Uint64()
	if p := gcPercent(live, roots, t.floor); p != t.percent {
		debug.SetGCPercent(p)
		t.percent = p
	}
}

// gcPercent is the GOGC whose next heap goal is the floor, or 100 where
// GOGC 100's goal is above it. The goal is the live heap plus GOGC
// percent of the live heap and the stacks and globals (roots) the
// collector scans.
func gcPercent(live, roots, floor uint64) int {
	if live == 0 || floor <= 2*live+roots {
		return 100
	}
	return int((floor - live) * 100 / (live + roots))
}
