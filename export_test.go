package holdfast

// Queued is how many operations wait for the next shared transaction.
func Queued(m *Manager) int {
	m.groups.mu.Lock()
	defer m.groups.mu.Unlock()
	return len(m.groups.queue)
}

// MaxGroup is how many operations share one transaction at most.
const MaxGroup = maxGroup
