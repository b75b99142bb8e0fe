package server

import "testing"

func TestSentIDsTellEachIDOnce(t *testing.T) {
	var s sentIDs
	add := func(id uint64, want bool) {
		t.Helper()
		if got := s.add(id); got != want {
			t.Fatalf("add(%d) = %v, want %v (floor %d, top %d)", id, got, want, s.floor, s.top)
		}
	}
	// A stream that did not resume begins at its first entry.
	add(100, true)
	add(99, false)
	add(100, false)
	// Out of order within the window: each once.
	add(110, true)
	add(105, true)
	add(105, false)
	add(101, true)
	// The window moves: what falls below it counts as sent, and the
	// slots it reuses start clear.
	add(100+sentWindow, true)
	add(101, false)
	add(104, true)
	add(100+sentWindow-1, true)
	add(105+sentWindow, true) // reuses the slots of 101 to 105
	add(104, false)
	add(106, true)
	add(110, false)
	add(110+sentWindow, true) // reuses 110's slot
	add(110, false)
	add(110+sentWindow, false)
	add(109+sentWindow, true)
	// A jump past the whole window clears it.
	add(10*sentWindow, true)
	add(10*sentWindow-1, true)
	add(9*sentWindow, false)

	// Resuming counts everything up to Last-Event-ID as sent.
	s.resume(500)
	add(500, false)
	add(499, false)
	add(501, true)
	s.resume(0)
	add(1, true)
}
