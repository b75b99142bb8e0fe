package gcpause

import (
	"runtime/debug"
	"testing"
)

// Loads that overlap leave the collector as it was, whatever order they
// end in.
func TestOverlappingLoadsRestoreTheCollector(t *testing.T) {
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)
	resumeA := Start()
	resumeB := Start()
	resumeA()
	if got := debug.SetGCPercent(-1); got != -1 {
		t.Fatalf("the collector came back while a load was under way (GOGC %d)", got)
	}
	resumeB()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("GOGC %d after every load ended, want 100", got)
	}
}
