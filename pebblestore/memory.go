package pebblestore

// Memory is what the store holds in memory. Pebble allocates its block
// cache and memtables outside the Go heap (with cgo), so runtime.MemStats
// does not see them; a caller watching the process's memory adds them.
type Memory struct {
	// BlockCache is the bytes in Pebble's block cache, 8 MiB at most by
	// default.
	BlockCache int64
	// MemTables is the bytes of Pebble's memtables, those waiting to be
	// freed included: 4 MiB each by default.
	MemTables uint64
	// Locks, Sessions (live and ended) and Lost count the records the
	// store keeps in the Go heap; the audit log stays on disk.
	Locks, Sessions, Lost int
}

// Memory reports what the store holds in memory now; after Close, only
// the record counts.
func (s *Store) Memory() Memory {
	c := s.mem.Counts()
	m := Memory{Locks: c.Locks, Sessions: c.Sessions, Lost: c.Lost}
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	if s.dbClosed {
		return m
	}
	pm := s.db.Metrics()
	m.BlockCache = pm.BlockCache.Size
	m.MemTables = pm.MemTable.Size + pm.MemTable.ZombieSize
	return m
}
