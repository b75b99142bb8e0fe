// Package keep decides how long a reused buffer that one use grew past its
// usual bound is kept: while such uses keep coming, growing it again from
// nothing each time would be most of what they allocate; after one alone,
// it should not pin its memory for good.
package keep

// For is how many uses a grown buffer is kept for after the last big one
// (docs/BENCHMARKS.md, "What moved the numbers").
const For = 64

// Window remembers how recently a use was big. Its zero value has seen
// none for no time, which keeps nothing that is not already small.
type Window struct{ since int }

// Note records one use, big or not, and reports whether buffers grown past
// their bound are still to be kept.
func (w *Window) Note(big bool) (keepBig bool) {
	if big {
		w.since = 0
	} else if w.since < For {
		w.since++
	}
	return w.since < For
}
