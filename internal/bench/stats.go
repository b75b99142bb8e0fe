package bench

import (
	"slices"
	"sync"
	"time"
)

// latencies collects the durations of one kind of request from many
// goroutines.
type latencies struct {
	mu  sync.Mutex
	all []time.Duration
}

// add merges one goroutine's durations, collected without a lock.
func (l *latencies) add(d []time.Duration) {
	l.mu.Lock()
	l.all = append(l.all, d...)
	l.mu.Unlock()
}

// percentile returns the p-th percentile (0 < p <= 100), or 0 when empty.
func (l *latencies) percentile(p float64) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.all) == 0 {
		return 0
	}
	if !slices.IsSorted(l.all) {
		slices.Sort(l.all)
	}
	i := int(float64(len(l.all))*p/100+0.5) - 1
	return l.all[min(max(i, 0), len(l.all)-1)]
}
