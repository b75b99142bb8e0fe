package memdb

// Counts is how many records of each kind an engine holds: what its memory
// grows with.
type Counts struct {
	Locks int
	// Sessions counts live and ended sessions.
	Sessions int
	Lost     int
}

// Counts reports how many records the engine holds now.
func (e *Engine) Counts() Counts {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return Counts{Locks: e.locks.Len(), Sessions: len(e.sessions), Lost: e.lost.Len()}
}
