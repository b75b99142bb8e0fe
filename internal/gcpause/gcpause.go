// Package gcpause turns the garbage collector off while stores load their
// records: a load allocates what it keeps for good, so collecting during
// it only costs time.
package gcpause

import (
	"runtime/debug"
	"sync"
)

// loads counts the loads under way: the collector is off while any is,
// and back to its setting when the last ends, however loads of several
// stores overlap, whichever kind of store they are.
var loads struct {
	sync.Mutex
	n, percent int
}

// Start turns the collector off until resume runs.
func Start() (resume func()) {
	loads.Lock()
	if loads.n == 0 {
		loads.percent = debug.SetGCPercent(-1)
	}
	loads.n++
	loads.Unlock()
	return func() {
		loads.Lock()
		if loads.n--; loads.n == 0 {
			debug.SetGCPercent(loads.percent)
		}
		loads.Unlock()
	}
}
