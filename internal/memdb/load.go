package memdb

import (
	"strings"
	"sync"
	"unique"

	"github.com/holdfast/holdfast/store"
)

// Loader restores locks in bulk as a durable store reads them back on
// open: while the store decodes the next records, each of the three lock
// indexes is built by a goroutine of its own. Only the Loader may touch
// the lock indexes until Close returns; other records are restored with
// Engine.Restore meanwhile.
type Loader struct {
	batch []*lockRec
	feeds [3]chan []*lockRec
	done  sync.WaitGroup
	// The last session and grant seen: neighbours on disk usually share
	// them, which saves interning them again.
	session unique.Handle[string]
	grant   unique.Handle[grant]
}

// loadBatch is how many locks are handed to the index builders at once.
const loadBatch = 4096

// Load starts a Loader; its Close must be called before the engine is used.
func (e *Engine) Load() *Loader {
	ld := &Loader{batch: make([]*lockRec, 0, loadBatch)}
	builders := [len(ld.feeds)]func(*lockRec){
		func(r *lockRec) { e.locks.ReplaceOrInsert(keyItem{key: r.key, rec: r}) },
		func(r *lockRec) { e.locksBySess.ReplaceOrInsert(r) },
		func(r *lockRec) { e.locksByExpry.ReplaceOrInsert(expiryOf(r)) },
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
	if ld.session == (unique.Handle[string]{}) || ld.session.Value() != l.Session {
		ld.session = unique.Make(l.Session)
	}
	if g := grantOf(l); ld.grant == (unique.Handle[grant]{}) || ld.grant.Value() != g {
		ld.grant = unique.Make(g)
	}
	kept := *l
	kept.Key, kept.Note = strings.Clone(l.Key), strings.Clone(l.Note)
	ld.batch = append(ld.batch, newLockRec(&kept, ld.session, ld.grant))
	if len(ld.batch) == loadBatch {
		ld.flush()
	}
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
}
