package soak_test

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"time"

	"github.com/holdfast/holdfast/logstore"
)

// sample is the process's state between two rounds, when no request is
// under way, after collections: what stays is what the server keeps.
type sample struct {
	round      int
	at         time.Duration
	heap       uint64 // the Go heap in use
	goroutines int
	// store counts the records logstore holds; they live in the Go heap,
	// and logstore keeps nothing outside it that grows with them.
	store logstore.Memory
}

func (s sample) String() string {
	return fmt.Sprintf("round %4d %8s  heap %5.1f MiB  records: %3d locks, %5d sessions, %4d lost  goroutines %d",
		s.round, s.at, mib(s.heap), s.store.Locks, s.store.Sessions, s.store.Lost, s.goroutines)
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

// measure samples the process; with a profile directory it also writes a
// heap profile named after the round, for go tool pprof -diff_base.
func measure(round int, start time.Time, st *logstore.Store, profiles string) (sample, error) {
	// Two collections: the first only moves what sync.Pools hold (the
	// server's response buffers) to their victim caches, the second frees
	// it.
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	s := sample{round: round, at: time.Since(start).Round(time.Millisecond), heap: ms.HeapAlloc,
		goroutines: runtime.NumGoroutine(), store: st.Memory()}
	if profiles == "" {
		return s, nil
	}
	f, err := os.Create(filepath.Join(profiles, fmt.Sprintf("heap-round%05d.pprof", round)))
	if err != nil {
		return s, err
	}
	if err := pprof.WriteHeapProfile(f); err != nil {
		f.Close()
		return s, err
	}
	return s, f.Close()
}

// Slack for the flatness check. The heap: a tenth of the earlier peak and
// 2 MiB, for what a collection leaves at random. Records: a hundredth and
// 100, above what a round of pages coming and going moves them by.
const (
	heapSlackFixed   = 2 << 20
	recordSlackFixed = 100
	goroutineSlack   = 4
)

// notFlat compares the peaks of the last third of the run with those of
// the middle third (the first third is warm-up: sessions start, the first
// retention period passes). A leak — anything that grows with the
// operations done — makes the last third's peak higher by a third of what
// it leaked; a bounded cache that has filled up does not. It returns what
// grew.
func notFlat(samples []sample) []string {
	last := samples[len(samples)-1].round
	var middle, end []sample
	for _, s := range samples {
		switch {
		case 3*s.round >= 2*last:
			end = append(end, s)
		case 3*s.round >= last:
			middle = append(middle, s)
		}
	}
	if len(middle) == 0 || len(end) == 0 {
		return []string{fmt.Sprintf("%d samples over %d rounds: too few to judge", len(samples), last)}
	}
	var grew []string
	check := func(what string, of func(sample) uint64, slack func(peak uint64) uint64) {
		before := slices.MaxFunc(middle, func(a, b sample) int { return cmp.Compare(of(a), of(b)) })
		after := slices.MaxFunc(end, func(a, b sample) int { return cmp.Compare(of(a), of(b)) })
		if of(after) > of(before)+slack(of(before)) {
			grew = append(grew, fmt.Sprintf("%s grew from %d (peak of rounds %d–%d) to %d (round %d)",
				what, of(before), middle[0].round, middle[len(middle)-1].round, of(after), after.round))
		}
	}
	records := func(peak uint64) uint64 { return peak/100 + recordSlackFixed }
	check("heap bytes", func(s sample) uint64 { return s.heap }, func(peak uint64) uint64 {
		return peak/10 + heapSlackFixed
	})
	check("locks", func(s sample) uint64 { return uint64(s.store.Locks) }, records)
	check("sessions", func(s sample) uint64 { return uint64(s.store.Sessions) }, records)
	check("lost records", func(s sample) uint64 { return uint64(s.store.Lost) }, records)
	check("goroutines", func(s sample) uint64 { return uint64(s.goroutines) }, func(uint64) uint64 { return goroutineSlack })
	return grew
}
