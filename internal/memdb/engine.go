// Package memdb is the in-memory engine behind holdfast's memory and
// embedded stores: every record lives in ordered in-memory indexes, and
// every write transaction keeps an undo log so a failed one leaves nothing.
//
// The engine is not durable by itself. A durable store wraps it: Update
// hands the store the change set of each commit, in commit order, while
// the engine's write lock is still held, and Restore loads records back
// on open.
package memdb

import (
	"sync"
	"time"

	"github.com/google/btree"

	"github.com/holdfast/holdfast/store"
)

// btreeDegree keeps nodes a few cache lines wide.
const btreeDegree = 32

// Engine holds every record of one store in memory.
type Engine struct {
	now func() time.Time

	// mu serializes write transactions and excludes readers from them.
	mu sync.RWMutex

	locks        *btree.BTreeG[keyItem]  // (key, session)
	locksBySess  *btree.BTreeG[*lockRec] // (session, key)
	locksByExpry *btree.BTreeG[expiryItem]
	// locksByUser holds the locks with a user, by (user, key, session):
	// a listing of one user's locks reads them alone, where a walk of
	// every lock would hold up every commit while it read them.
	locksByUser *btree.BTreeG[*lockRec]

	sessions     map[string]*sessRec
	liveSessions *btree.BTreeG[*sessRec]
	// idleSessions holds each live session with an idle timeout once, at
	// idleAt[id]: its idle deadline or an earlier one. A heartbeat moves
	// the deadline later and leaves the entry where it is, which spares
	// the most frequent write of all two updates of the index; the sweep
	// moves the entries it finds early (see tx.IdleSessions).
	idleSessions *btree.BTreeG[timedSessionItem]
	idleAt       map[string]timedSessionItem
	endedSession *btree.BTreeG[timedSessionItem]
	// liveByUser holds the live sessions with a user, by (user, id): a
	// listing of one user's sessions reads them alone. A heartbeat, which
	// keeps its session's user, leaves it as it is.
	liveByUser *btree.BTreeG[userItem]

	aggRoot     map[string]string
	aggByMember *btree.BTreeG[aggItem] // (member, root)
	aggByRoot   *btree.BTreeG[aggItem] // (root, member)
	lost        *btree.BTreeG[lostItem]
	lostByAt    *btree.BTreeG[lostAtItem]
	audit       *btree.BTreeG[auditItem]
	auditByAt   *btree.BTreeG[auditAtItem]
	lastToken   uint64
	lastAuditID uint64
	// auditInMemory is false when the durable store keeps the audit log
	// itself: AppendAudit then only numbers entries and reports them.
	auditInMemory bool
	tx            tx // reused by every Update; only used under mu
}

// Options configures an Engine.
type Options struct {
	// AuditInMemory keeps audit entries in the engine, where Audit and
	// PruneAudit find them. Without it AppendAudit still assigns IDs and
	// reports each entry in the change set, but nothing keeps it: the
	// durable store must store, list and prune the log itself, which
	// keeps a long retention out of memory.
	AuditInMemory bool
}

// New returns an empty engine. now is its clock; nil means time.Now.
func New(now func() time.Time, opts Options) *Engine {
	if now == nil {
		now = time.Now
	}
	e := &Engine{
		now:           now,
		auditInMemory: opts.AuditInMemory,
		locks:         btree.NewG(btreeDegree, lessKey),
		locksBySess:   btree.NewG(btreeDegree, lessBySession),
		locksByExpry:  btree.NewG(btreeDegree, lessExpiry),
		locksByUser:   btree.NewG(btreeDegree, lessByUser),
		sessions:      make(map[string]*sessRec),
		liveSessions:  btree.NewG(btreeDegree, lessSession),
		liveByUser:    btree.NewG(btreeDegree, lessUser),
		idleSessions:  btree.NewG(btreeDegree, lessTimedSession),
		idleAt:        make(map[string]timedSessionItem),
		endedSession:  btree.NewG(btreeDegree, lessTimedSession),
		aggRoot:       make(map[string]string),
		aggByMember:   btree.NewG(btreeDegree, lessAgg),
		aggByRoot:     btree.NewG(btreeDegree, lessAgg),
		lost:          btree.NewG(btreeDegree, lessLost),
		lostByAt:      btree.NewG(btreeDegree, lessLostAt),
		audit:         btree.NewG(btreeDegree, lessAudit),
		auditByAt:     btree.NewG(btreeDegree, lessAuditAt),
	}
	e.tx.e = e
	e.tx.reader.pivot = &e.tx.pivot
	return e
}

// Kind is the kind of record a Change is about.
type Kind uint8

const (
	KindLock Kind = iota + 1
	KindSession
	KindAggregate
	KindLost
	KindAudit
	KindCounter
)

// Counter names one of the engine's counters.
type Counter uint8

const (
	// CounterToken is the last fencing token issued.
	CounterToken Counter = iota + 1
	// CounterAudit is the last audit entry ID assigned.
	CounterAudit
)

// NumCounters bounds the Counter values, for arrays indexed by them.
const NumCounters = int(CounterAudit) + 1

// Change is the final state of one record after a commit: the record, or
// its deletion. Exactly the field of Kind is set; for a deletion it is the
// record as it was, which carries its identity. The records are shared
// with the engine and must not be modified (a lock is a copy, as the
// engine keeps locks in a form of its own).
type Change struct {
	Kind      Kind
	Delete    bool
	Lock      *store.Lock
	Session   *store.Session
	Aggregate *store.Aggregate
	Lost      *store.Lost
	Audit     *store.AuditEntry
	Counter   Counter
	Value     uint64 // the counter's value
	// Lazy marks a session record written only by TouchSession: a durable
	// store may persist it without making the commit wait for it.
	Lazy bool
}

// Update runs fn in a write transaction. If fn returns an error (or
// panics), every change it made is undone and the error is returned.
// onCommit, when not nil, is called before the write lock is released,
// with the change set of a successful commit, or with nil when fn failed
// or wrote nothing: the state fn read must be made durable before its
// answer is given either way. The change set is valid only until onCommit
// returns: the next transaction reuses its memory.
func (e *Engine) Update(fn func(store.Tx) error, onCommit func([]Change)) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	t := &e.tx
	t.begin(e.now())
	returned := false
	defer func() {
		if !returned { // fn panicked
			t.rollback()
		}
	}()
	err := fn(t)
	returned = true
	if err != nil {
		t.rollback()
		if onCommit != nil {
			onCommit(nil)
		}
		return err
	}
	if onCommit != nil {
		onCommit(t.changes())
	}
	t.end()
	return nil
}

// View runs fn in a read transaction. onRead, when not nil, is called
// before the read lock is released, so the caller can note which commit
// the state it read belongs to.
func (e *Engine) View(fn func(store.ReadTx) error, onRead func()) error {
	e.mu.RLock()
	defer e.mu.RUnlock()
	err := fn(reader{e: e, now: e.now()})
	if onRead != nil {
		onRead()
	}
	return err
}

// Restore loads one record (or counter) as a durable store reads it back
// on open. It must not run concurrently with transactions.
func (e *Engine) Restore(c Change) {
	switch c.Kind {
	case KindLock:
		if c.Delete {
			e.deleteLock(c.Lock.Key, c.Lock.Session)
		} else {
			e.putLock(e.recOf(c.Lock))
		}
	case KindSession:
		if c.Delete {
			e.deleteSession(c.Session.ID)
		} else {
			e.putSession(newSessRec(c.Session))
		}
	case KindAggregate:
		if c.Delete {
			e.deleteAggregate(c.Aggregate.Member)
		} else {
			e.putAggregate(c.Aggregate.Member, c.Aggregate.Root)
		}
	case KindLost:
		if c.Delete {
			e.deleteLost(lostItem{session: c.Lost.Lock.Session, key: c.Lost.Lock.Key, token: c.Lost.Lock.Token})
		} else {
			e.putLost(e.lostRecOf(c.Lost))
		}
	case KindAudit:
		if !e.auditInMemory {
			e.lastAuditID = max(e.lastAuditID, c.Audit.ID)
		} else if c.Delete {
			e.deleteAudit(c.Audit.ID)
		} else {
			e.putAudit(c.Audit)
			e.lastAuditID = max(e.lastAuditID, c.Audit.ID)
		}
	case KindCounter:
		switch c.Counter {
		case CounterToken:
			e.lastToken = max(e.lastToken, c.Value)
		case CounterAudit:
			e.lastAuditID = max(e.lastAuditID, c.Value)
		}
	}
}

// Counters returns the last token issued and the last audit ID assigned.
func (e *Engine) Counters() (token, auditID uint64) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.lastToken, e.lastAuditID
}

// Size reports how many locks, sessions and audit entries are held in
// memory.
func (e *Engine) Size() (locks, sessions, audit int) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.locks.Len(), len(e.sessions), e.audit.Len()
}

// The primitives below maintain every index of one record kind. They
// return the record they replaced or removed (nil if none).

// getLock walks the holders of key for session's: as many as share the
// key, one for an exclusive lock.
func (e *Engine) getLock(key, session string) *lockRec {
	var found *lockRec
	e.locks.AscendGreaterOrEqual(keyItem{key: key}, func(it keyItem) bool {
		if it.key == key && it.rec.session == session {
			found = it.rec
		}
		return it.key == key && found == nil
	})
	return found
}

func (e *Engine) putLock(r *lockRec) *lockRec {
	old, had := e.locks.ReplaceOrInsert(keyItem{key: r.key, rec: r})
	e.locksBySess.ReplaceOrInsert(r)
	if had {
		e.locksByExpry.Delete(expiryOf(old.rec))
		if old.rec.user != r.user && old.rec.user != "" {
			e.locksByUser.Delete(old.rec)
		}
	}
	e.locksByExpry.ReplaceOrInsert(expiryOf(r))
	if r.user != "" {
		e.locksByUser.ReplaceOrInsert(r)
	}
	if had {
		return old.rec
	}
	return nil
}

func (e *Engine) deleteLock(key, session string) *lockRec {
	r := e.getLock(key, session)
	if r == nil {
		return nil
	}
	e.locks.Delete(keyItem{key: key, rec: r})
	e.locksBySess.Delete(r)
	e.locksByExpry.Delete(expiryOf(r))
	if r.user != "" {
		e.locksByUser.Delete(r)
	}
	return r
}

func (e *Engine) putSession(s *sessRec) *sessRec {
	if old := e.sessions[s.id]; old != nil && !old.ended() && !s.ended() {
		// A live session stays live, as on every heartbeat: its entry by
		// id is replaced in place rather than deleted and inserted.
		e.sessions[s.id] = s
		e.liveSessions.ReplaceOrInsert(s)
		e.indexIdle(s)
		if old.user != s.user {
			e.unindexUser(old)
			e.indexUser(s)
		}
		return old
	}
	old := e.unindexSession(s.id)
	e.sessions[s.id] = s
	if s.ended() {
		e.endedSession.ReplaceOrInsert(endedItem(s))
		return old
	}
	e.liveSessions.ReplaceOrInsert(s)
	e.indexIdle(s)
	e.indexUser(s)
	return old
}

// indexUser and unindexUser keep live session s in liveByUser.
func (e *Engine) indexUser(s *sessRec) {
	if s.user != "" {
		e.liveByUser.ReplaceOrInsert(userItem{user: s.user, id: s.id})
	}
}

func (e *Engine) unindexUser(s *sessRec) {
	if s.user != "" {
		e.liveByUser.Delete(userItem{user: s.user, id: s.id})
	}
}

// indexIdle keeps the idle entry of live session s at or before its
// deadline: where it is if it is not later, else at the deadline. A
// session without an idle timeout has none.
func (e *Engine) indexIdle(s *sessRec) {
	at, had := e.idleAt[s.id]
	if s.idleTimeout <= 0 {
		if had {
			e.unindexIdle(at)
		}
		return
	}
	due := idleItem(s)
	if had {
		if !due.earlier(at) {
			return
		}
		e.idleSessions.Delete(at)
	}
	e.idleSessions.ReplaceOrInsert(due)
	e.idleAt[s.id] = due
}

// reindexIdle moves the idle entry of live session id to its deadline.
func (e *Engine) reindexIdle(id string) {
	e.idleSessions.Delete(e.idleAt[id])
	due := idleItem(e.sessions[id])
	e.idleSessions.ReplaceOrInsert(due)
	e.idleAt[id] = due
}

func (e *Engine) unindexIdle(at timedSessionItem) {
	e.idleSessions.Delete(at)
	delete(e.idleAt, at.rec.id)
}

func (e *Engine) deleteSession(id string) *sessRec {
	old := e.unindexSession(id)
	delete(e.sessions, id)
	return old
}

// unindexSession removes session id from the ordered indexes.
func (e *Engine) unindexSession(id string) *sessRec {
	old := e.sessions[id]
	if old == nil {
		return nil
	}
	if old.ended() {
		e.endedSession.Delete(endedItem(old))
		return old
	}
	e.liveSessions.Delete(old)
	e.unindexUser(old)
	if at, ok := e.idleAt[id]; ok {
		e.unindexIdle(at)
	}
	return old
}

func (e *Engine) putAggregate(member, root string) (oldRoot string, had bool) {
	oldRoot, had = e.deleteAggregate(member)
	e.aggRoot[member] = root
	e.aggByMember.ReplaceOrInsert(aggItem{a: member, b: root})
	e.aggByRoot.ReplaceOrInsert(aggItem{a: root, b: member})
	return oldRoot, had
}

func (e *Engine) deleteAggregate(member string) (oldRoot string, had bool) {
	oldRoot, had = e.aggRoot[member]
	if !had {
		return "", false
	}
	delete(e.aggRoot, member)
	e.aggByMember.Delete(aggItem{a: member, b: oldRoot})
	e.aggByRoot.Delete(aggItem{a: oldRoot, b: member})
	return oldRoot, true
}

func (e *Engine) putLost(r *lostRec) *lostRec {
	old, had := e.lost.ReplaceOrInsert(lostItemOf(r))
	if had {
		e.lostByAt.Delete(lostAtOf(old.rec))
	}
	e.lostByAt.ReplaceOrInsert(lostAtOf(r))
	return old.rec
}

func (e *Engine) deleteLost(id lostItem) *lostRec {
	old, had := e.lost.Delete(id)
	if !had {
		return nil
	}
	e.lostByAt.Delete(lostAtOf(old.rec))
	return old.rec
}

func (e *Engine) putAudit(a *store.AuditEntry) *store.AuditEntry {
	old, had := e.audit.ReplaceOrInsert(auditItem{id: a.ID, entry: a})
	if had {
		e.auditByAt.Delete(auditAtItem{at: old.entry.At, id: a.ID})
	}
	e.auditByAt.ReplaceOrInsert(auditAtItem{at: a.At, id: a.ID, entry: a})
	if had {
		return old.entry
	}
	return nil
}

func (e *Engine) deleteAudit(id uint64) *store.AuditEntry {
	old, had := e.audit.Delete(auditItem{id: id})
	if !had {
		return nil
	}
	e.auditByAt.Delete(auditAtItem{at: old.entry.At, id: id})
	return old.entry
}
