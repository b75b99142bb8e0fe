package pgstore

import (
	"cmp"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/holdfast/holdfast/store"
)

// writes are a transaction's queued writes, kept by table so that they
// go out as a few multi-row statements rather than one per call: a
// transaction of many operations costs the database little more than one
// of a single operation.
//
// The tables have no triggers or foreign keys between them, so writes to
// different tables commute. A lock or session write sets the whole row or
// deletes it, so only the last write of each row matters. The lost
// writes of one session and key depend on each other (PutLost deletes
// older reported records) and keep their order.
type writes struct {
	locks    map[lockRef]*store.Lock   // nil: delete the row
	sessions map[string]*store.Session // nil: delete the row
	lost     []lostWrite
	// lostRounds counts the queued lost writes of each session and key.
	lostRounds map[lockRef]int
	audit      []auditRow
	other      []queued // aggregate changes, rare: one statement each
}

type lostWrite struct {
	lost  store.Lost
	del   bool // DeleteLost of lost.Lock.Session, .Key and .Token
	round int  // how many earlier writes of the same session and key
}

type auditRow struct {
	id    int64
	entry store.AuditEntry
}

func (w *writes) empty() bool {
	return len(w.locks) == 0 && len(w.sessions) == 0 && len(w.lost) == 0 && len(w.audit) == 0 && len(w.other) == 0
}

func (w *writes) putLock(l *store.Lock, key, session string) {
	if w.locks == nil {
		w.locks = make(map[lockRef]*store.Lock)
	}
	w.locks[lockRef{key, session}] = l
}

func (w *writes) putSession(id string, s *store.Session) {
	if w.sessions == nil {
		w.sessions = make(map[string]*store.Session)
	}
	w.sessions[id] = s
}

func (w *writes) putLost(l store.Lost, del bool) {
	if w.lostRounds == nil {
		w.lostRounds = make(map[lockRef]int)
	}
	ref := lockRef{l.Lock.Key, l.Lock.Session}
	w.lost = append(w.lost, lostWrite{l, del, w.lostRounds[ref]})
	w.lostRounds[ref]++
}

// flush queues the statements of every queued write on b and forgets
// them: one statement for all tables (see writeStatements), then lost
// writes beyond the first round, then the rare aggregate changes. Rows go
// in primary key order, so that two transactions writing the same rows
// lock them in the same order.
func (w *writes) flush(b *pgx.Batch, q *queries) {
	if w.empty() {
		return
	}
	var (
		mask uint8
		args []any
	)
	add := func(p writePart, a ...any) {
		mask |= 1 << p
		args = append(args, a...)
	}
	if len(w.locks) > 0 {
		var del, put lockColumns
		for _, ref := range slices.SortedFunc(maps.Keys(w.locks), compareRefs) {
			if l := w.locks[ref]; l == nil {
				del.key, del.session = append(del.key, ref.key), append(del.session, ref.session)
			} else {
				put.add(*l)
			}
		}
		if len(del.key) > 0 {
			add(partDeleteLocks, del.key, del.session)
		}
		if len(put.key) > 0 {
			add(partPutLocks, put.args()...)
		}
		clear(w.locks)
	}
	if len(w.sessions) > 0 {
		var del []string
		var put sessionColumns
		for _, id := range slices.Sorted(maps.Keys(w.sessions)) {
			if s := w.sessions[id]; s == nil {
				del = append(del, id)
			} else {
				put.add(*s)
			}
		}
		if len(del) > 0 {
			add(partDeleteSessions, del)
		}
		if len(put.id) > 0 {
			add(partPutSessions, put.args()...)
		}
		clear(w.sessions)
	}
	var laterRounds []lostWrite
	if len(w.lost) > 0 {
		// Round r holds the r-th write of each session and key: writes
		// of one round touch distinct records and commute, rounds go in
		// order. The first goes with the other tables.
		slices.SortStableFunc(w.lost, func(a, b lostWrite) int {
			return cmp.Or(cmp.Compare(a.round, b.round), cmp.Compare(a.lost.Lock.Session, b.lost.Lock.Session),
				cmp.Compare(a.lost.Lock.Key, b.lost.Lock.Key))
		})
		n := 1
		for n < len(w.lost) && w.lost[n].round == 0 {
			n++
		}
		put, del := lostRound(w.lost[:n])
		if len(del.key) > 0 {
			add(partDeleteLosts, del.session, del.key, del.token)
		}
		if len(put.key) > 0 {
			add(partPutLosts, put.args()...)
		}
		laterRounds = w.lost[n:]
	}
	if len(w.audit) > 0 {
		var a auditColumns
		for _, r := range w.audit {
			a.add(r.id, r.entry)
		}
		add(partAudit, a.args()...)
		w.audit = w.audit[:0]
	}
	if mask != 0 {
		b.Queue(q.writes.sql(mask), args...)
	}
	for rest := laterRounds; len(rest) > 0; {
		n := 1
		for n < len(rest) && rest[n].round == rest[0].round {
			n++
		}
		mask, args = 0, nil
		put, del := lostRound(rest[:n])
		if len(del.key) > 0 {
			add(partDeleteLosts, del.session, del.key, del.token)
		}
		if len(put.key) > 0 {
			add(partPutLosts, put.args()...)
		}
		b.Queue(q.writes.sql(mask), args...)
		rest = rest[n:]
	}
	w.lost = w.lost[:0]
	clear(w.lostRounds)
	for _, o := range w.other {
		b.Queue(o.sql, o.args...)
	}
	w.other = w.other[:0]
}

// lostRound splits one round of lost writes into records to put and to
// delete.
func lostRound(round []lostWrite) (put lostColumns, del lockColumns) {
	for _, lw := range round {
		if lw.del {
			del.key, del.session = append(del.key, lw.lost.Lock.Key), append(del.session, lw.lost.Lock.Session)
			del.token = append(del.token, int64(lw.lost.Lock.Token))
		} else {
			put.add(lw.lost)
		}
	}
	return put, del
}

func compareRefs(a, b lockRef) int {
	return cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(a.session, b.session))
}

// lockColumns are lock rows as one array per column, the arguments of a
// statement that unnests them.
type lockColumns struct {
	key, session, user, name []string
	shared                   []bool
	token                    []int64
	acquired, expires        []time.Time
	note                     []string
}

func (c *lockColumns) add(l store.Lock) {
	c.key, c.session = append(c.key, l.Key), append(c.session, l.Session)
	c.user, c.name = append(c.user, l.User), append(c.name, l.Name)
	c.shared, c.token = append(c.shared, l.Shared), append(c.token, int64(l.Token))
	c.acquired, c.expires = append(c.acquired, l.AcquiredAt), append(c.expires, l.ExpiresAt)
	c.note = append(c.note, l.Note)
}

func (c *lockColumns) args() []any {
	return []any{c.key, c.session, c.user, c.name, c.shared, c.token, c.acquired, c.expires, c.note}
}

type sessionColumns struct {
	id, user, name []string
	lastSeen       []time.Time
	idleTimeout    []int64
	ended          []*time.Time
	endReason      []string
	deadline       []*time.Time
}

func (c *sessionColumns) add(s store.Session) {
	var ended, deadline *time.Time
	if s.Ended() {
		ended = &s.EndedAt
	} else if d := s.IdleDeadline(); !d.IsZero() {
		// Rounded up to PostgreSQL's microseconds, so that the database
		// never calls a session idle before its deadline.
		d = d.Add(time.Microsecond - 1).Truncate(time.Microsecond)
		deadline = &d
	}
	c.id, c.user, c.name = append(c.id, s.ID), append(c.user, s.User), append(c.name, s.Name)
	c.lastSeen, c.idleTimeout = append(c.lastSeen, s.LastSeen), append(c.idleTimeout, int64(s.IdleTimeout))
	c.ended, c.endReason, c.deadline = append(c.ended, ended), append(c.endReason, s.EndReason), append(c.deadline, deadline)
}

func (c *sessionColumns) args() []any {
	return []any{c.id, c.user, c.name, c.lastSeen, c.idleTimeout, c.ended, c.endReason, c.deadline}
}

type lostColumns struct {
	lockColumns
	reason, actor, forceReason []string
	at                         []time.Time
	reported                   []bool
}

func (c *lostColumns) add(l store.Lost) {
	c.lockColumns.add(l.Lock)
	c.reason, c.actor, c.forceReason = append(c.reason, l.Reason), append(c.actor, l.Actor), append(c.forceReason, l.ForceReason)
	c.at, c.reported = append(c.at, l.At), append(c.reported, l.Reported)
}

func (c *lostColumns) args() []any {
	return append(c.lockColumns.args(), c.reason, c.actor, c.forceReason, c.at, c.reported)
}

type auditColumns struct {
	id    []int64
	at    []time.Time
	event []string
	lockColumns
	actor, reason []string
}

func (c *auditColumns) add(id int64, e store.AuditEntry) {
	c.id, c.at, c.event = append(c.id, id), append(c.at, e.At), append(c.event, e.Event)
	c.lockColumns.add(e.Lock)
	c.actor, c.reason = append(c.actor, e.Actor), append(c.reason, e.Reason)
}

func (c *auditColumns) args() []any {
	return append(append([]any{c.id, c.at, c.event}, c.lockColumns.args()...), c.actor, c.reason)
}
