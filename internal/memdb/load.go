package memdb

import (
	"strings"
	"sync"

	"github.com/holdfast/holdfast/store"
)

// Loader restores locks in bulk as a durable store reads them back on
// open: while the store decodes the next records, each of the four lock
// indexes is built by a goroutine of its own. Only the Loader may touch
// the lock and lost indexes until Close returns; other records are
// restored with Engine.Restore meanwhile.
type Loader struct {
	e     *Engine
	batch []*lockRec
	feeds [4]chan []*lockRec
	done  sync.WaitGroup
	// kept holds one copy of each session, user and name seen, for the
	// locks that share them; dropped once loaded.
	kept map[string]string
}

// loadBatch is how many locks are handed to the index builders at once.
const loadBatch = 4096

// Load starts a Loader; its Close must be called before the engine is used.
func (e *Engine) Load() *Loader {
	ld := &Loader{e: e, batch: make([]*lockRec, 0, loadBatch), kept: make(map[string]string)}
	builders := [len(ld.feeds)]func(*lockRec){
		func(r *lockRec) { e.locks.ReplaceOrInsert(keyItem{key: r.key, rec: r}) },
		func(r *lockRec) { e.locksBySess.ReplaceOrInsert(r) },
		func(r *lockRec) { e.locksByExpry.ReplaceOrInsert(expiryOf(r)) },
		func(r *lockRec) {
			if r.user != "" {
				e.locksByUser.ReplaceOrInsert(r)
			}
		},
	}
	for i, build := range builders {
		feed := make(chan []*lockRec, 8)
		ld.feeds[i] = feed
		ld.done.Go(func() {
			for batch := range feed {
				for _, r := range batch {
					build(r)
				}
			}
		})
	}
	return ld
}

// Lock restores one lock, at most once per (key, session). Its strings
// need to stay valid only during the call: the Loader copies what it keeps.
func (ld *Loader) Lock(l *store.Lock) {
	kept := *l
	kept.Key, kept.Note = strings.Clone(l.Key), strings.Clone(l.Note)
	kept.Session, kept.User, kept.Name = ld.keep(l.Session), ld.keep(l.User), ld.keep(l.Name)
	ld.batch = append(ld.batch, newLockRec(&kept))
	if len(ld.batch) == loadBatch {
		ld.flush()
	}
}

// Lost restores one lost record, like Lock.
func (ld *Loader) Lost(l *store.Lost) {
	kept := *l
	kept.Lock.Key, kept.Lock.Note, kept.ForceReason = strings.Clone(l.Lock.Key), strings.Clone(l.Lock.Note), strings.Clone(l.ForceReason)
	kept.Lock.Session, kept.Lock.User, kept.Lock.Name = ld.keep(l.Lock.Session), ld.keep(l.Lock.User), ld.keep(l.Lock.Name)
	kept.Reason, kept.Actor = ld.keep(l.Reason), ld.keep(l.Actor)
	ld.e.putLost(ld.e.lostRecOf(&kept))
}

// keep returns a copy of s shared by every record loaded with it.
func (ld *Loader) keep(s string) string {
	if k, ok := ld.kept[s]; ok {
		return k
	}
	k := strings.Clone(s)
	ld.kept[k] = k
	return k
}

func (ld *Loader) flush() {
	for _, feed := range ld.feeds {
		feed <- ld.batch
	}
	ld.batch = make([]*lockRec, 0, loadBatch)
}

// Close waits until every index holds every lock restored.
func (ld *Loader) Close() {
	if len(ld.batch) > 0 {
		ld.flush()
	}
	for _, feed := range ld.feeds {
		close(feed)
	}
	ld.done.Wait()
	ld.kept = nil
}
