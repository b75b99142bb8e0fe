package memdb

import (
	"slices"
	"time"

	"github.com/holdfast/holdfast/internal/keep"
	"github.com/holdfast/holdfast/store"
)

// tx is the write transaction. It records, before its first change of each
// record, what the record was, so rollback can put it back and changes can
// report each touched record once.
type tx struct {
	reader
	undo       []undo
	startToken uint64
	startAudit uint64
	touches    int // TouchSession calls, for changes to tell lazy records
	// appended holds the entries AppendAudit numbered when the engine
	// does not keep the audit log.
	appended []store.AuditEntry
	pivot    lockRec  // reader.pivot points here
	early    []string // IdleSessions' buffer

	// The change set and what it is built with, reused by every commit:
	// the change set is valid only until onCommit returns.
	out      []Change
	locks    []store.Lock
	losts    []store.Lost
	sessions []store.Session
	firsts   []undo
	seen     map[recordID]int
	strict   map[string]bool
	// big remembers the last transaction that wrote more than undoCap
	// entries (see end); bigSeen is set once seen has held more than
	// undoCap records, since a cleared map keeps its size.
	big     keep.Window
	bigSeen bool
}

var (
	_ store.Tx      = (*tx)(nil)
	_ store.Toucher = (*tx)(nil)
)

// undo remembers one record as it was before a write, and what the write
// left. The identity fields name the record even when it did not exist
// (prev is nil then) or was deleted (next is nil then).
type undo struct {
	kind       Kind
	a, b       string // lock: key, session; session: id; aggregate: member; lost: session, key
	n          uint64 // lost: token; audit: id
	prev, next any    // *lockRec, *sessRec, string (root), *lostRec, *store.AuditEntry
	// lazy marks a session write by TouchSession.
	lazy bool
}

// recordID names the record an undo entry is about: a key of records'
// map that hashes only the identity, not the records.
type recordID struct {
	kind Kind
	a, b string
	n    uint64
}

// undoCap bounds the undo log a transaction keeps between transactions, so
// one huge sweep does not pin its memory forever. It leaves room for a
// batch of a thousand heartbeats (the server's most operations per batch),
// whose buffers grow past 1024 entries: a lower bound made every such
// batch allocate them all again.
const undoCap = 4096

func (t *tx) begin(now time.Time) {
	t.reader.now = now
	t.touches = 0
	t.startToken, t.startAudit = t.e.lastToken, t.e.lastAuditID
}

func (t *tx) end() {
	// Groups of acquires of a hundred keys each write tens of thousands
	// of entries, one group after another.
	keepBig := t.big.Note(len(t.undo)+len(t.appended) > undoCap)
	t.undo = reuse(t.undo, keepBig)
	t.appended = reuse(t.appended, keepBig)
	t.out = reuse(t.out, keepBig)
	t.locks = reuse(t.locks, keepBig)
	t.losts = reuse(t.losts, keepBig)
	t.sessions = reuse(t.sessions, keepBig)
	t.firsts = reuse(t.firsts, keepBig)
	if len(t.seen) > undoCap {
		t.bigSeen = true
	}
	if t.bigSeen && !keepBig {
		t.seen, t.bigSeen = nil, false
	}
	clear(t.seen)
	clear(t.strict)
	t.pivot = lockRec{}
}

// reuse empties s for the next transaction, dropping what it points to, or
// drops s when a big transaction grew it past undoCap and keepBig is
// false. Only s[:len(s)] is cleared: every transaction appends from length
// zero and clears what it appended, so the elements past the length are
// zero already.
func reuse[T any](s []T, keepBig bool) []T {
	if cap(s) > undoCap && !keepBig {
		return nil
	}
	clear(s)
	return s[:0]
}

// rollback restores every record in reverse order of change, then the
// counters.
func (t *tx) rollback() {
	e := t.e
	for i := len(t.undo) - 1; i >= 0; i-- {
		u := t.undo[i]
		switch u.kind {
		case KindLock:
			if u.prev == nil {
				e.deleteLock(u.a, u.b)
			} else {
				e.putLock(u.prev.(*lockRec))
			}
		case KindSession:
			if u.prev == nil {
				e.deleteSession(u.a)
			} else {
				e.putSession(u.prev.(*sessRec))
			}
		case KindAggregate:
			if u.prev == nil {
				e.deleteAggregate(u.a)
			} else {
				e.putAggregate(u.a, u.prev.(string))
			}
		case KindLost:
			if u.prev == nil {
				e.deleteLost(lostItem{session: u.a, key: u.b, token: u.n})
			} else {
				e.putLost(u.prev.(*lostRec))
			}
		case KindAudit:
			if u.prev == nil {
				e.deleteAudit(u.n)
			} else {
				e.putAudit(u.prev.(*store.AuditEntry))
			}
		}
	}
	e.lastToken, e.lastAuditID = t.startToken, t.startAudit
	t.end()
}

// changes returns the final state of every record the transaction
// touched, once each, in the order first touched, then the counters that
// moved. Records that were created and then deleted again are left out.
// The result and the locks and audit entries it points to are reused by
// the next transaction.
func (t *tx) changes() []Change {
	n := len(t.undo) + len(t.appended)
	if t.e.lastToken != t.startToken {
		n++
	}
	if t.e.lastAuditID != t.startAudit {
		n++
	}
	if n == 0 {
		return nil
	}
	out := slices.Grow(t.out, n)
	// Grown once, so the pointers changes take into them stay valid.
	t.locks = slices.Grow(t.locks, t.changesOf(KindLock))
	t.losts = slices.Grow(t.losts, t.changesOf(KindLost))
	t.sessions = slices.Grow(t.sessions, t.changesOf(KindSession))
	strict := t.strictSessions()
	for _, u := range t.records() {
		if c, ok := t.finalState(u); ok {
			c.Lazy = t.touches > 0 && u.kind == KindSession && !strict[u.a]
			out = append(out, c)
		}
	}
	for i := range t.appended {
		out = append(out, Change{Kind: KindAudit, Audit: &t.appended[i]})
	}
	if t.e.lastToken != t.startToken {
		out = append(out, Change{Kind: KindCounter, Counter: CounterToken, Value: t.e.lastToken})
	}
	if t.e.lastAuditID != t.startAudit {
		out = append(out, Change{Kind: KindCounter, Counter: CounterAudit, Value: t.e.lastAuditID})
	}
	t.out = out
	return out
}

// changesOf bounds how many changes of kind the transaction reports.
func (t *tx) changesOf(kind Kind) int {
	n := 0
	for _, u := range t.undo {
		if u.kind == kind {
			n++
		}
	}
	return n
}

// records returns one undo entry per record the transaction wrote, in the
// order first written: the first entry of the record, which holds what it
// was before, with the last one's next, which is what it is now.
func (t *tx) records() []undo {
	firsts := t.firsts[:0]
	useMap := len(t.undo) > 8 // past that, a linear search costs more
	if useMap && t.seen == nil {
		t.seen = make(map[recordID]int, len(t.undo))
	}
	for _, u := range t.undo {
		id := recordID{kind: u.kind, a: u.a, b: u.b, n: u.n}
		j, dup := -1, false
		if useMap {
			if j, dup = t.seen[id]; !dup {
				t.seen[id] = len(firsts)
			}
		} else {
			j = slices.IndexFunc(firsts, func(f undo) bool { return f.kind == u.kind && f.a == u.a && f.b == u.b && f.n == u.n })
			dup = j >= 0
		}
		if dup {
			firsts[j].next = u.next
			continue
		}
		firsts = append(firsts, u)
	}
	t.firsts = firsts
	return firsts
}

// strictSessions returns the sessions that the transaction wrote other
// than by TouchSession, when it touched any (nil otherwise).
func (t *tx) strictSessions() map[string]bool {
	if t.touches == 0 {
		return nil
	}
	for _, u := range t.undo {
		if u.kind == KindSession && !u.lazy {
			if t.strict == nil {
				t.strict = make(map[string]bool)
			}
			t.strict[u.a] = true
		}
	}
	return t.strict
}

// finalState is the change for the record u names, from what it was
// before the transaction and what it is now; ok is false when it neither
// exists now nor existed before. A lock, session or lost record is built
// in t.locks, t.sessions or t.losts, which have room for it.
func (t *tx) finalState(u undo) (Change, bool) {
	c := Change{Kind: u.kind, Delete: u.next == nil}
	now := u.next
	if c.Delete {
		now = u.prev
	}
	switch r := now.(type) {
	case nil:
		return c, false
	case *lockRec:
		t.locks = append(t.locks, r.lock())
		c.Lock = &t.locks[len(t.locks)-1]
	case *sessRec:
		t.sessions = append(t.sessions, r.session())
		c.Session = &t.sessions[len(t.sessions)-1]
	case string: // an aggregate's root
		c.Aggregate = &store.Aggregate{Member: u.a, Root: r}
	case *lostRec:
		t.losts = append(t.losts, r.lost())
		c.Lost = &t.losts[len(t.losts)-1]
	case *store.AuditEntry:
		c.Audit = r
	}
	return c, true
}

func (t *tx) NextToken() (uint64, error) {
	t.e.lastToken++
	return t.e.lastToken, nil
}

func (t *tx) RaiseTokens(floor uint64) (bool, error) {
	if t.e.lastToken >= floor {
		return false, nil
	}
	t.e.lastToken = floor
	return true, nil
}

func (t *tx) PutLock(l store.Lock) error {
	r := t.e.recOf(&l)
	prev := t.e.putLock(r)
	t.undo = append(t.undo, undo{kind: KindLock, a: l.Key, b: l.Session, prev: anyOrNil(prev), next: r})
	return nil
}

func (t *tx) DeleteLock(key, session string) error {
	if prev := t.e.deleteLock(key, session); prev != nil {
		t.undo = append(t.undo, undo{kind: KindLock, a: key, b: session, prev: prev})
	}
	return nil
}

func (t *tx) PutSession(s store.Session) error {
	r := newSessRec(&s)
	prev := t.e.putSession(r)
	t.undo = append(t.undo, undo{kind: KindSession, a: s.ID, prev: anyOrNil(prev), next: r})
	return nil
}

// TouchSession stores s like PutSession; the change is marked Lazy when
// nothing else in the transaction wrote the session.
func (t *tx) TouchSession(s store.Session) error {
	r := newSessRec(&s)
	prev := t.e.putSession(r)
	t.undo = append(t.undo, undo{kind: KindSession, a: s.ID, prev: anyOrNil(prev), next: r, lazy: true})
	t.touches++
	return nil
}

// IdleSessions is reader.IdleSessions that also moves the idle entries it
// finds early to their sessions' deadlines, so that the sweep, which runs
// it in a write transaction, walks each such entry once. Where an entry
// lies is no record's state: a rollback need not undo the move.
func (t *tx) IdleSessions(now time.Time, limit int) ([]store.Session, error) {
	out := t.e.idle(now, limit, &t.early)
	for _, id := range t.early {
		t.e.reindexIdle(id)
	}
	t.early = reuse(t.early, false)
	return out, nil
}

func (t *tx) DeleteSession(id string) error {
	if prev := t.e.deleteSession(id); prev != nil {
		t.undo = append(t.undo, undo{kind: KindSession, a: id, prev: prev})
	}
	return nil
}

func (t *tx) PutAggregate(a store.Aggregate) error {
	u := undo{kind: KindAggregate, a: a.Member, next: a.Root}
	if root, had := t.e.putAggregate(a.Member, a.Root); had {
		u.prev = root
	}
	t.undo = append(t.undo, u)
	return nil
}

func (t *tx) DeleteAggregate(member string) error {
	if root, had := t.e.deleteAggregate(member); had {
		t.undo = append(t.undo, undo{kind: KindAggregate, a: member, prev: root})
	}
	return nil
}

func (t *tx) PutLost(l store.Lost) error {
	var room [4]uint64 // a key rarely has more reported records: no allocation
	older := room[:0]
	t.e.lost.AscendRange(lostItem{session: l.Lock.Session, key: l.Lock.Key}, lostItem{session: l.Lock.Session, key: l.Lock.Key, token: l.Lock.Token}, func(it lostItem) bool {
		if it.rec.reported {
			older = append(older, it.token)
		}
		return true
	})
	for _, token := range older {
		if err := t.DeleteLost(l.Lock.Session, l.Lock.Key, token); err != nil {
			return err
		}
	}
	r := t.e.lostRecOf(&l)
	prev := t.e.putLost(r)
	t.undo = append(t.undo, undo{kind: KindLost, a: l.Lock.Session, b: l.Lock.Key, n: l.Lock.Token, prev: anyOrNil(prev), next: r})
	return nil
}

func (t *tx) DeleteLost(session, key string, token uint64) error {
	if prev := t.e.deleteLost(lostItem{session: session, key: key, token: token}); prev != nil {
		t.undo = append(t.undo, undo{kind: KindLost, a: session, b: key, n: token, prev: prev})
	}
	return nil
}

func (t *tx) AppendAudit(e store.AuditEntry) (uint64, error) {
	t.e.lastAuditID++
	e.ID = t.e.lastAuditID
	if !t.e.auditInMemory {
		t.appended = append(t.appended, e)
		return e.ID, nil
	}
	stored := e // only kept entries go to the heap
	t.e.putAudit(&stored)
	t.undo = append(t.undo, undo{kind: KindAudit, n: e.ID, next: &stored})
	return e.ID, nil
}

// PruneAudit deletes the oldest entries by At, so it never walks entries
// it keeps.
func (t *tx) PruneAudit(before time.Time, limit int) (int, error) {
	var doomed []uint64
	t.e.auditByAt.Ascend(func(it auditAtItem) bool {
		if !it.at.Before(before) || (limit > 0 && len(doomed) >= limit) {
			return false
		}
		doomed = append(doomed, it.id)
		return true
	})
	for _, id := range doomed {
		prev := t.e.deleteAudit(id)
		t.undo = append(t.undo, undo{kind: KindAudit, n: id, prev: prev})
	}
	return len(doomed), nil
}

// anyOrNil keeps a nil pointer from becoming a non-nil interface.
func anyOrNil[T any](p *T) any {
	if p == nil {
		return nil
	}
	return p
}
