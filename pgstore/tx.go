package pgstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast/holdfast/store"
)

// tx is one transaction on one pooled connection. Writes are queued and
// sent in the same round trip as the next read (or the COMMIT), after the
// advisory locks they need, so that an operation costs few round trips;
// what it reads under its locks it keeps, so that later operations of the
// same transaction read it without a round trip (see also Prepare).
type tx struct {
	s     *Store
	q     *queries // the store's for writes, or its reads' (forReads)
	ctx   context.Context
	conn  *pgxpool.Conn
	write bool
	now   time.Time
	begun bool
	ended bool

	locks  lockSet
	writes writes
	// seen holds the row version (xmin, "" if absent) of each session
	// record read without its lock. Reading another session's record must
	// not wait for that session's own transactions; if this transaction
	// later locks the session to write, checks (sent right after the lock)
	// make sure the record is still as read, or the transaction runs
	// again.
	seen   map[string]string
	checks []queued

	// touched is set by TouchSession, durable by every other write. A
	// transaction that only touched sessions commits without waiting for
	// its WAL to reach disk (see TouchSession).
	touched, durable bool
	// err is the first failure. The transaction is lost then, so every
	// later call returns it, and Update never commits after it even if fn
	// ignored it.
	err error

	// Lock rows read while this transaction holds an advisory lock on
	// their key or session, and so unchanged by others until it ends;
	// with its own writes applied.
	rows         lockRows
	fullKeys     map[string]bool // every row on this exact key is in rows
	fullTrees    map[string]bool // every row below this key is in rows
	fullSessions map[string]bool // every row of this session is in rows

	// holders are the records of the sessions holding the lock rows
	// Prepare read, or a read transaction's listing, read with those rows
	// but without the sessions' locks, with their row versions: what
	// Session answers for a session it does not lock (see tx.seen).
	holders map[string]versionedSession

	// sessions are session records read or written while this
	// transaction holds their session lock, with its own writes applied.
	// A nil value means "known to be absent".
	sessions map[string]*store.Session
	// lost are the lost records of sessions, read by Prepare under their
	// session locks, with this transaction's own writes applied. Others
	// write a session's records under its lock, except the sweep's
	// deletion of old ones, which a read at any moment may miss as well.
	lost map[string][]store.Lost

	aggs         map[string]*string // member → root; nil: known to have none
	noAggregates bool               // the table was empty when the transaction began

	// Sequence values drawn ahead, ascending, in a round trip made
	// anyway, so that NextToken and AppendAudit cost none. A token is only
	// good while the transaction takes no further key lock: a grant's
	// token must be drawn after the locks of its key are held, so that it
	// is above the token of every conflicting grant committed before.
	tokens, auditIDs []int64
	// What the next round trip draws, in one statement after everything
	// else it sends (see queueDraw): at least so many tokens and audit
	// ids, and, when starting, the start of a write transaction.
	wantTokens, wantAuditIDs int
	starting                 bool
	// drawAggregates are names whose aggregate mappings the opening draw
	// reads (see queueAggregates).
	drawAggregates []string
	// notified are the audit ids to announce at commit (Config.Notify).
	notified []int64
	// catchUpIdleAt, when set, is the IdleSessions time up to which
	// lagging idle_afters are moved up after the commit (catchUpIdle).
	catchUpIdleAt time.Time
}

type lockRef struct{ key, session string }

// versionedSession is a session record and its row version.
type versionedSession struct {
	s       store.Session
	version string
}

type queued struct {
	sql  string
	args []any
}

var (
	_ store.Tx      = (*tx)(nil)
	_ store.Toucher = (*tx)(nil)
)

// run calls fn, turning a panic into a rolled-back transaction.
func (t *tx) run(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			t.close()
			panic(r)
		}
	}()
	err = fn()
	if t.err != nil {
		return t.err
	}
	return err
}

// batch starts the next round trip: the advisory locks still needed, then
// the queued writes. The caller queues its statements after them.
func (t *tx) batch() *pgx.Batch {
	b := &pgx.Batch{}
	if !t.begun {
		t.start(b)
	} else {
		t.flush(b)
	}
	return b
}

// start opens the transaction at the head of its first round trip: BEGIN,
// the locks and writes so far, then the transaction's start time, the
// clock of every decision it takes (one instant, on the clock every
// server shares), and whether any aggregate is mapped; a read's statement
// also turns JIT off, as the writes' planner settings do. A write
// transaction reads those with its first draws, at the end of the round
// trip, and draws an audit id ahead, since most append one.
func (t *tx) start(b *pgx.Batch) {
	t.begun = true
	if t.write {
		b.Queue(`BEGIN ISOLATION LEVEL READ COMMITTED`)
		t.flush(b)
		t.starting = true
		t.drawAhead(0, 1)
		return
	}
	b.Queue(`BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY`)
	t.flush(b)
	b.Queue(t.q.startRead).QueryRow(func(row pgx.Row) error {
		var anyAggregates bool
		if err := row.Scan(&t.now, &anyAggregates, nil); err != nil {
			return err
		}
		t.began(anyAggregates)
		return nil
	})
}

// began sets the transaction's clock, read as it started.
func (t *tx) began(anyAggregates bool) {
	t.now, t.noAggregates = t.now.UTC(), !anyAggregates
	if t.s.now != nil {
		t.now = t.s.now().UTC()
	}
}

// drawAhead asks the next round trip to draw at least so many tokens and
// audit ids beyond those drawn already.
func (t *tx) drawAhead(tokens, auditIDs int) {
	t.wantTokens, t.wantAuditIDs = max(t.wantTokens, tokens), max(t.wantAuditIDs, auditIDs)
}

// queueDraw queues what drawAhead and start asked for, in one statement,
// last: after the advisory locks b takes, so that its tokens are good for
// grants of their keys.
func (t *tx) queueDraw(b *pgx.Batch) {
	if !t.starting && t.wantTokens <= 0 && t.wantAuditIDs <= 0 {
		return
	}
	starting, sql, args := t.starting, t.q.draw, []any{max(t.wantTokens, 0), max(t.wantAuditIDs, 0)}
	names := t.drawAggregates
	if starting {
		sql, args = t.q.startDraw, append(args, names)
	}
	b.Queue(sql, args...).QueryRow(func(row pgx.Row) error {
		var (
			tokens, auditIDs []int64
			anyAggregates    bool
			members, roots   []string
		)
		dest := []any{&tokens, &auditIDs}
		if starting {
			dest = append(dest, &t.now, &anyAggregates, &members, &roots)
		}
		if err := row.Scan(dest...); err != nil {
			return err
		}
		if starting {
			t.began(anyAggregates)
			if len(names) > 0 {
				found := make(map[string]string, len(members))
				for i, m := range members {
					found[m] = roots[i]
				}
				t.knowAggregates(names, found)
			}
		}
		t.tokens, t.auditIDs = appendDrawn(t.tokens, tokens), appendDrawn(t.auditIDs, auditIDs)
		return nil
	})
	t.starting, t.wantTokens, t.wantAuditIDs, t.drawAggregates = false, 0, 0, nil
}

// flush queues the advisory locks still needed and the queued writes.
func (t *tx) flush(b *pgx.Batch) {
	if ids, x, wait := t.locks.take(); len(ids) > 0 {
		if slices.Contains(wait, false) {
			b.Queue(t.q.takeLocks, ids, x, wait)
		} else {
			b.Queue(t.q.takeLocksInOrder, ids, x)
		}
	}
	for _, c := range t.checks {
		b.Queue(c.sql, c.args...)
	}
	t.checks = t.checks[:0]
	t.writes.flush(b, &t.s.q) // the writes' statements: a read queues none
}

// send makes one round trip with b.
func (t *tx) send(b *pgx.Batch) error {
	if t.err != nil {
		return t.err
	}
	if err := t.conn.SendBatch(t.ctx, b).Close(); err != nil {
		t.err = err
		return err
	}
	t.locks.taken()
	return nil
}

// exchange sends the pending locks and writes with the statements that
// add queues, and the draws they ask for, in one round trip.
func (t *tx) exchange(add func(b *pgx.Batch)) error {
	if t.err != nil {
		return t.err
	}
	b := t.batch()
	add(b)
	t.queueDraw(b)
	return t.send(b)
}

// commit sends the queued writes and COMMIT in one round trip.
func (t *tx) commit() error {
	if t.err != nil {
		return t.err
	}
	b := t.batch()
	t.queueDraw(b)
	if t.touched && !t.durable {
		b.Queue(`SET LOCAL synchronous_commit TO off`)
	}
	committed := false
	b.Queue(`COMMIT`).Exec(func(ct pgconn.CommandTag) error {
		committed = ct.String() == "COMMIT"
		return nil
	})
	t.queueNotify(b)
	err := t.send(b)
	if err != nil && committed {
		// Only the notification after the COMMIT failed: the transaction
		// is durable and must be answered as such; other servers' streams
		// miss its entries live, and replay them from the audit table.
		t.s.log.Warn("pgstore: a commit could not be announced to other servers", slog.Any("error", err))
		err, t.err = nil, nil
	}
	t.ended = err == nil
	if err == nil && !committed {
		err = errors.New("pgstore: the transaction was rolled back at commit")
		t.err = err
	}
	if err == nil && !t.catchUpIdleAt.IsZero() {
		t.catchUpIdle()
	}
	return err
}

// catchUpIdle moves lagging idle_afters up after the sweep's commit, in a
// transaction of their own, with the writes' planner settings (so that
// the plan it keeps is theirs): it only spares later sweeps some reading,
// so its failure must not undo the sweep, and the rows it locks, skipping
// those others hold, are held for one statement only.
func (t *tx) catchUpIdle() {
	b := &pgx.Batch{}
	b.Queue(`BEGIN ISOLATION LEVEL READ COMMITTED`)
	b.Queue(`SELECT ` + plannerSettings)
	b.Queue(t.q.catchUpIdle, t.catchUpIdleAt, catchUpBatch)
	b.Queue(`COMMIT`)
	if err := t.conn.SendBatch(t.ctx, b).Close(); err != nil {
		t.s.log.Warn("pgstore: could not move lagging idle deadlines up; the sweep reads past them", slog.Any("error", err))
		t.ended = false // close rolls that transaction back
	}
}

// close ends the transaction if it is still open, then returns the
// connection to the pool. A connection that cannot be rolled back is
// closed rather than returned.
func (t *tx) close() {
	if t.conn == nil {
		return
	}
	if t.begun && !t.ended {
		ctx, cancel := context.WithTimeout(context.Background(), pingTimeout)
		if _, err := t.conn.Exec(ctx, `ROLLBACK`); err != nil {
			t.conn.Conn().Close(ctx)
		}
		cancel()
		t.ended = true
	}
	t.conn.Release()
	t.conn = nil
}

// lockKey asks for the advisory locks of a transaction that reads or
// writes the locks on key: exclusive on key, shared on its ancestors.
func (t *tx) lockKey(key string) {
	if !t.write {
		return
	}
	n := len(t.locks.pending)
	t.locks.need(lockID(t.s.schema, classKey, key), true)
	for i := len(key) - 1; i > 0; i-- {
		if key[i] == '/' {
			t.locks.need(lockID(t.s.schema, classKey, key[:i]), false)
		}
	}
	if len(t.locks.pending) > n {
		t.tokens = t.tokens[:0] // drawn before this key's locks: not good for its grant
	}
}

func (t *tx) lockSession(id string) {
	if !t.write {
		return
	}
	lid := lockID(t.s.schema, classSession, id)
	if _, held := t.locks.held[lid]; held {
		return
	}
	t.locks.need(lid, true)
	if v, ok := t.seen[id]; ok {
		t.checks = append(t.checks, queued{t.q.checkSession, []any{id, v}})
		delete(t.seen, id)
	}
}

func (t *tx) lockAggregates(exclusive bool) {
	if t.write {
		t.locks.need(lockID(t.s.schema, classAggregates, ""), exclusive)
	}
}

// remember caches lock rows read under their keys' advisory locks.
func (t *tx) remember(ls ...store.Lock) {
	if !t.write {
		return
	}
	if t.fullKeys == nil {
		t.fullKeys = make(map[string]bool)
		t.fullTrees = make(map[string]bool)
		t.fullSessions = make(map[string]bool)
	}
	for _, l := range ls {
		t.rows.put(l.Key, l.Session, &l)
	}
}

// cached answers Lock from what this transaction already knows.
func (t *tx) cached(key, session string) (l *store.Lock, known bool) {
	if l, ok := t.rows.get(key, session); ok {
		return l, true
	}
	return nil, t.fullKeys[key] || t.fullSessions[session] || t.treeAbove(key)
}

// Now opens the transaction if nothing has yet; a failure to is the
// transaction's error, returned by every later call and by Update.
func (t *tx) Now() time.Time {
	if !t.begun {
		t.exchange(func(*pgx.Batch) {})
	}
	return t.now
}

func (t *tx) Lock(key, session string) (store.Lock, bool, error) {
	if l, known := t.cached(key, session); known {
		if l == nil {
			return store.Lock{}, false, t.err
		}
		return *l, true, t.err
	}
	t.lockKey(key)
	var (
		l     store.Lock
		found bool
	)
	err := t.exchange(func(b *pgx.Batch) {
		b.Queue(t.q.lock, key, session).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var err error
				if l, err = scanLock(rows); err != nil {
					return err
				}
				found = true
			}
			return rows.Err()
		})
	})
	if err != nil {
		return store.Lock{}, false, err
	}
	if found {
		t.remember(l)
	} else if t.write {
		t.remember()
		t.rows.put(key, session, nil)
	}
	return l, found, nil
}

func (t *tx) Related(key string, fn func(store.Lock) bool) error {
	t.lockKey(key)
	if t.relatedKnown(key) {
		for _, l := range t.rows.related(key) {
			if !fn(l) {
				break
			}
		}
		return t.err
	}
	var found []store.Lock
	err := t.exchange(func(b *pgx.Batch) {
		if !t.write {
			b.Queue(t.q.relatedHolders, ancestorsAndSelf(key), key+"/", key+"0").Query(func(rows pgx.Rows) error {
				var (
					holders map[string]versionedSession
					err     error
				)
				if found, holders, err = scanLocksAndHolders(rows); err == nil {
					t.addHolders(holders)
				}
				return err
			})
			return
		}
		b.Queue(t.q.related, ancestorsAndSelf(key), key+"/", key+"0").Query(func(rows pgx.Rows) error {
			var err error
			found, err = scanLocks(rows)
			return err
		})
		if len(t.tokens) == 0 {
			// An acquire asks for a token next; draw it now, after the
			// key's locks.
			t.drawAhead(1, 0)
		}
	})
	if err != nil {
		return err
	}
	if t.write {
		t.remember(found...)
		for _, k := range ancestorsAndSelf(key) {
			t.fullKeys[k] = true
		}
		t.fullTrees[key] = true
	}
	for _, l := range found {
		if !fn(l) {
			break
		}
	}
	return t.err
}

// SessionLocks reads the session's locks under its session lock. Every
// write of a lock row holds the lock of the row's session (see PutLock and
// DeleteLock), so what it returns stays true until commit.
func (t *tx) SessionLocks(session string) ([]store.Lock, error) {
	if t.fullSessions[session] {
		return t.rows.ofSession(session), t.err
	}
	t.lockSession(session)
	var found []store.Lock
	err := t.exchange(func(b *pgx.Batch) {
		b.Queue(t.q.sessionLocks, session).Query(func(rows pgx.Rows) (err error) {
			found, err = scanLocks(rows)
			return err
		})
	})
	if err != nil || !t.write {
		return found, err
	}
	t.remember(found...)
	t.fullSessions[session] = true
	return found, nil
}

// ExpiredLocks finds candidates, then locks their keys and reads them
// again, keeping those still expired.
func (t *tx) ExpiredLocks(now time.Time, limit int) ([]store.Lock, error) {
	var found []store.Lock
	err := t.exchange(func(b *pgx.Batch) {
		b.Queue(t.q.expiredLocks, now, limitOf(limit)).Query(func(rows pgx.Rows) error {
			var err error
			found, err = scanLocks(rows)
			return err
		})
	})
	if err != nil || !t.write || len(found) == 0 {
		return found, err
	}
	keys, sessions := make([]string, len(found)), make([]string, len(found))
	for i, l := range found {
		t.lockKey(l.Key)
		keys[i], sessions[i] = l.Key, l.Session
	}
	err = t.exchange(func(b *pgx.Batch) {
		b.Queue(t.q.locksByRef, keys, sessions, now).Query(func(rows pgx.Rows) error {
			var err error
			found, err = scanLocks(rows)
			return err
		})
	})
	if err != nil {
		return nil, err
	}
	t.remember(found...)
	return found, nil
}

func (t *tx) Locks(q store.LockQuery) ([]store.Lock, error) {
	var w where
	if q.Prefix != "" {
		w.add("key >= ?", q.Prefix)
		if end := prefixEnd(q.Prefix); end != "" {
			w.add("key < ?", end)
		} else {
			w.add("starts_with(key, ?)", q.Prefix)
		}
	}
	if q.AfterKey != "" || q.AfterSession != "" {
		w.add("(key, session) > (?, ?)", q.AfterKey, q.AfterSession)
	}
	if q.Session != "" {
		w.add("session = ?", q.Session)
	}
	if q.User != "" {
		w.add("user_id = ?", q.User)
	}
	sql := `SELECT ` + lockCols + ` FROM ` + t.q.schema + `.locks` + w.String() +
		` ORDER BY key, session LIMIT ` + w.arg(limitOf(q.Limit))
	if t.write {
		var found []store.Lock
		err := t.exchange(func(b *pgx.Batch) {
			b.Queue(t.q.mark+sql, w.args...).Query(func(rows pgx.Rows) error {
				var err error
				found, err = scanLocks(rows)
				return err
			})
		})
		return found, err
	}
	// A read lists locks to show who holds them, and the Manager reads
	// each holder's record to tell whether its lock still counts: the
	// records come with the rows, from the same snapshot, rather than in a
	// round trip each.
	sql = t.q.mark + `SELECT l.*, h.* FROM (` + sql + `) l
		LEFT JOIN LATERAL (SELECT xmin::text, ` + sessionCols + ` FROM ` + t.q.schema + `.sessions WHERE id = l.session LIMIT 1) h ON true
		ORDER BY l.key, l.session`
	var (
		found   []store.Lock
		holders map[string]versionedSession
	)
	err := t.exchange(func(b *pgx.Batch) {
		b.Queue(sql, w.args...).Query(func(rows pgx.Rows) error {
			var err error
			found, holders, err = scanLocksAndHolders(rows)
			return err
		})
	})
	if err == nil {
		t.addHolders(holders)
	}
	return found, err
}

// Session reads without the session's lock; see tx.seen. What it reads
// under that lock it keeps.
func (t *tx) Session(id string) (store.Session, bool, error) {
	if s, ok := t.sessions[id]; ok {
		if s == nil {
			return store.Session{}, false, t.err
		}
		return *s, true, t.err
	}
	var (
		s       store.Session
		found   bool
		version string
	)
	lid := lockID(t.s.schema, classSession, id)
	_, held := t.locks.held[lid]
	_, pending := t.locks.pending[lid]
	if h, ok := t.holders[id]; ok && !held && !pending {
		if t.write {
			t.saw(id, h.version)
		}
		return h.s, true, t.err
	}
	err := t.exchange(func(b *pgx.Batch) {
		b.Queue(t.q.session, id).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var err error
				if s, version, err = scanVersionedSession(rows); err != nil {
					return err
				}
				found = true
			}
			return rows.Err()
		})
	})
	if err != nil {
		return s, false, err
	}
	_, held = t.locks.held[lid]
	switch {
	case !t.write:
	case held:
		t.rememberSession(s, id, found)
	default:
		t.saw(id, version)
	}
	return s, found, nil
}

// saw notes the version of a session record read without its lock, unless
// an earlier read noted one.
func (t *tx) saw(id, version string) {
	if t.seen == nil {
		t.seen = make(map[string]string)
	}
	if _, ok := t.seen[id]; !ok {
		t.seen[id] = version
	}
}

// IdleSessions finds candidates, then, in a write, locks them and reads
// them again, keeping those still idle: a session that came back
// meanwhile must not be ended. The candidates are looked up by idle_after,
// which may lag behind a deadline moved later (migration 0003), and
// filtered by the exact deadline; after the commit, lagging idle_afters
// are moved up (catchUpIdle), so that later sweeps need not read past them.
func (t *tx) IdleSessions(now time.Time, limit int) ([]store.Session, error) {
	found, err := t.sessionsWhere(t.q.idleSessions, now, limit)
	if err != nil || !t.write {
		return found, err
	}
	t.catchUpIdleAt = now
	return t.relockSessions(found, func(s store.Session) bool {
		d := s.IdleDeadline()
		return !s.Ended() && !d.IsZero() && !d.After(now)
	})
}

func (t *tx) Sessions(q store.SessionQuery) ([]store.Session, error) {
	var w where
	w.add("ended_at IS NULL")
	if q.After != "" {
		w.add("id > ?", q.After)
	}
	if q.User != "" {
		w.add("user_id = ?", q.User)
	}
	sql := t.q.mark + `SELECT ` + sessionCols + ` FROM ` + t.q.schema + `.sessions` + w.String() +
		` ORDER BY id LIMIT ` + w.arg(limitOf(q.Limit))
	var found []store.Session
	err := t.exchange(func(b *pgx.Batch) {
		b.Queue(sql, w.args...).Query(func(rows pgx.Rows) error {
			var err error
			found, err = scanSessions(rows)
			return err
		})
	})
	return found, err
}

var _ store.LockCounter = (*tx)(nil)

// CountLocks counts the sessions' locks in the database, which sends a
// row per session rather than per lock (see store.LockCounter). A write
// counts under the sessions' locks, after its own queued writes, as
// SessionLocks reads.
func (t *tx) CountLocks(sessions []string, after time.Time) (map[string]int, error) {
	for _, id := range sessions {
		t.lockSession(id)
	}
	counts := make(map[string]int, len(sessions))
	err := t.exchange(func(b *pgx.Batch) {
		b.Queue(t.q.countLocks, sessions, after).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var (
					id string
					n  int
				)
				if err := rows.Scan(&id, &n); err != nil {
					return err
				}
				counts[id] = n
			}
			return rows.Err()
		})
	})
	return counts, err
}

// EndedSessions finds candidates, then locks them and reads them again,
// keeping those still ended: a session started anew must not be deleted.
func (t *tx) EndedSessions(before time.Time, limit int) ([]store.Session, error) {
	found, err := t.sessionsWhere(t.q.endedSessions, before, limit)
	if err != nil || !t.write {
		return found, err
	}
	return t.relockSessions(found, func(s store.Session) bool {
		return s.Ended() && s.EndedAt.Before(before)
	})
}

func (t *tx) sessionsWhere(sql string, at time.Time, limit int) ([]store.Session, error) {
	var found []store.Session
	err := t.exchange(func(b *pgx.Batch) {
		b.Queue(sql, at, limitOf(limit)).Query(func(rows pgx.Rows) error {
			var err error
			found, err = scanSessions(rows)
			return err
		})
	})
	return found, err
}

// relockSessions takes the session locks of found, reads those sessions
// again and returns the ones that still qualify, in found's order.
func (t *tx) relockSessions(found []store.Session, keep func(store.Session) bool) ([]store.Session, error) {
	if len(found) == 0 {
		return found, nil
	}
	ids := make([]string, len(found))
	for i, s := range found {
		t.lockSession(s.ID)
		ids[i] = s.ID
	}
	var again []store.Session
	err := t.exchange(func(b *pgx.Batch) {
		b.Queue(t.q.sessionsByID, ids).Query(func(rows pgx.Rows) error {
			var err error
			again, err = scanSessions(rows)
			return err
		})
	})
	if err != nil {
		return nil, err
	}
	now := make(map[string]store.Session, len(again))
	for _, s := range again {
		now[s.ID] = s
	}
	out := found[:0]
	for _, s := range found {
		if cur, ok := now[s.ID]; ok && keep(cur) {
			out = append(out, cur)
		}
	}
	return out, nil
}

// Aggregate looks up member and all its ancestors at once, since the
// lock manager resolves a key by walking up its ancestors.
func (t *tx) Aggregate(member string) (string, bool, error) {
	if t.noAggregates {
		return "", false, t.err
	}
	if _, ok := t.aggs[member]; !ok {
		if err := t.readAggregates(ancestorsAndSelf(member)); err != nil {
			return "", false, err
		}
	}
	if root := t.aggs[member]; root != nil {
		return *root, true, t.err
	}
	return "", false, t.err
}

// readAggregates reads the mappings of names into t.aggs.
func (t *tx) readAggregates(names []string) error {
	t.lockAggregates(false)
	return t.exchange(func(b *pgx.Batch) { t.queueAggregates(b, names) })
}

// queueAggregates queues the read of the mappings of names into t.aggs.
// A round trip that opens the transaction reads them with its draws
// instead, in the same statement.
func (t *tx) queueAggregates(b *pgx.Batch, names []string) {
	if t.starting {
		t.drawAggregates = append(t.drawAggregates, names...)
		return
	}
	b.Queue(t.q.aggregatesOf, names).Query(func(rows pgx.Rows) error {
		found := make(map[string]string)
		for rows.Next() {
			var m, r string
			if err := rows.Scan(&m, &r); err != nil {
				return err
			}
			found[m] = r
		}
		if err := rows.Err(); err != nil {
			return err
		}
		t.knowAggregates(names, found)
		return nil
	})
}

// knowAggregates notes the mappings of names, found among them.
func (t *tx) knowAggregates(names []string, found map[string]string) {
	if t.aggs == nil {
		t.aggs = make(map[string]*string, len(names))
	}
	for _, n := range names {
		if r, ok := found[n]; ok {
			t.aggs[n] = &r
		} else {
			t.aggs[n] = nil
		}
	}
}

func (t *tx) Aggregates(root string) ([]store.Aggregate, error) {
	t.lockAggregates(false)
	sql, args := t.q.allAggregates, []any(nil)
	if root != "" {
		sql, args = t.q.aggregates, []any{root}
	}
	var out []store.Aggregate
	err := t.exchange(func(b *pgx.Batch) {
		b.Queue(sql, args...).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var a store.Aggregate
				if err := rows.Scan(&a.Member, &a.Root); err != nil {
					return err
				}
				out = append(out, a)
			}
			return rows.Err()
		})
	})
	return out, err
}

func (t *tx) Lost(session string) ([]store.Lost, error) {
	if cached, ok := t.lost[session]; ok {
		return slices.Clone(cached), t.err
	}
	return t.lostWhere(t.q.lost, session)
}

func (t *tx) LostBefore(before time.Time, limit int) ([]store.Lost, error) {
	return t.lostWhere(t.q.lostBefore, before, limitOf(limit))
}

func (t *tx) lostWhere(sql string, args ...any) ([]store.Lost, error) {
	var out []store.Lost
	err := t.exchange(func(b *pgx.Batch) {
		b.Queue(sql, args...).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				l, err := scanLost(rows)
				if err != nil {
					return err
				}
				out = append(out, l)
			}
			return rows.Err()
		})
	})
	return out, err
}

func (t *tx) Audit(q store.AuditQuery) ([]store.AuditEntry, error) {
	var w where
	order := "id"
	switch {
	case q.Newest && q.Before > 0:
		w.add("id < ?", int64(min(q.Before, 1<<63-1)))
		order = "id DESC"
	case q.Newest:
		order = "id DESC"
	default:
		w.add("id > ?", int64(min(q.After, 1<<63-1)))
	}
	if q.Key != "" {
		w.add("(key = ? OR (key >= ? AND key < ?))", q.Key, q.Key+"/", q.Key+"0")
	}
	if q.Session != "" {
		w.add("session = ?", q.Session)
	}
	if q.User != "" {
		w.add("user_id = ?", q.User)
	}
	if q.Event != "" {
		w.add("event = ?", q.Event)
	}
	if !q.Since.IsZero() {
		w.add("at >= ?", q.Since)
	}
	sql := t.q.mark + `SELECT id, at, event, ` + lockCols + `, actor, reason FROM ` + t.q.schema + `.audit` + w.String() +
		` ORDER BY ` + order + ` LIMIT ` + w.arg(limitOf(q.Limit))
	var out []store.AuditEntry
	err := t.exchange(func(b *pgx.Batch) {
		b.Queue(sql, w.args...).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				e, err := scanAudit(rows)
				if err != nil {
					return err
				}
				out = append(out, e)
			}
			return rows.Err()
		})
	})
	return out, err
}

func (t *tx) NextToken() (uint64, error) {
	if len(t.tokens) == 0 {
		if err := t.exchange(func(*pgx.Batch) { t.drawAhead(1, 0) }); err != nil {
			return 0, err
		}
	}
	token := t.tokens[0]
	t.tokens = t.tokens[1:]
	return uint64(token), nil
}

// RaiseTokens moves the token sequence up to floor, and drops the tokens
// drawn ahead at or below it. The counter is read first without a lock: if
// it is at the floor already, it only grows, and nothing else is done, so
// a floor left in the configuration costs a start one round trip. Below
// it, the sequence's lock is taken until the transaction ends, so a
// transaction that raises should do little else.
func (t *tx) RaiseTokens(floor uint64) (bool, error) {
	if floor > math.MaxInt64 {
		return false, fmt.Errorf("pgstore: token floor %d is above the sequence's maximum, %d", floor, int64(math.MaxInt64))
	}
	var last int64
	err := t.exchange(func(b *pgx.Batch) {
		b.Queue(t.q.lastToken).QueryRow(func(row pgx.Row) error { return row.Scan(&last) })
	})
	if err != nil {
		return false, err
	}
	raised := false
	if last < int64(floor) {
		err = t.exchange(func(b *pgx.Batch) {
			b.Queue(t.q.holdTokens)
			b.Queue(t.q.raiseTokens, int64(floor)).Exec(func(ct pgconn.CommandTag) error {
				raised = ct.RowsAffected() == 1
				return nil
			})
		})
		t.durable = true
	}
	// The pool is ascending (appendDrawn); what the raise's own round trip
	// drew is above the floor.
	above := slices.IndexFunc(t.tokens, func(v int64) bool { return v > int64(floor) })
	if above < 0 {
		above = len(t.tokens)
	}
	t.tokens = t.tokens[above:]
	return raised, err
}

// appendDrawn appends sequence values to a pool. Each draw's values are
// above the pool's, and sorted, so the pool stays ascending.
func appendDrawn(pool, drawn []int64) []int64 {
	n := len(pool)
	pool = append(pool, drawn...)
	slices.Sort(pool[n:])
	return pool
}

// PutLock needs the key's locks and the session's lock: every new lock of
// a session is written under its session lock, so that SessionLocks can
// trust that none appears while it holds that lock.
func (t *tx) PutLock(l store.Lock) error {
	t.lockKey(l.Key)
	t.lockSession(l.Session)
	t.writes.putLock(&l, l.Key, l.Session)
	t.durable = true
	t.remember()
	t.rows.put(l.Key, l.Session, &l) // shared: neither changes it in place
	return t.err
}

func (t *tx) DeleteLock(key, session string) error {
	t.lockKey(key)
	// Deleting a session's lock may rest on the session's record as read
	// without its lock (a lock dropped because its session looked ended):
	// locking the session checks that record is still as read, or the
	// transaction runs again.
	t.lockSession(session)
	t.writes.putLock(nil, key, session)
	t.durable = true
	t.remember()
	t.rows.put(key, session, nil)
	return t.err
}

// TouchSession writes s like PutSession, but if the transaction writes
// nothing else it commits with synchronous_commit off: a crash of the
// database may then lose the last fraction of a second of heartbeats
// (making sessions look idle a little early after it, never holding a lock
// longer), and heartbeats, the bulk of the traffic, wait for no disk flush.
// Other transactions see the touch at once, as any commit.
func (t *tx) TouchSession(s store.Session) error {
	durable := t.durable
	err := t.PutSession(s)
	t.durable, t.touched = durable, true
	return err
}

func (t *tx) PutSession(s store.Session) error {
	t.lockSession(s.ID)
	t.writes.putSession(s.ID, t.rememberSession(s, s.ID, true))
	t.durable = true
	return t.err
}

func (t *tx) DeleteSession(id string) error {
	t.lockSession(id)
	t.rememberSession(store.Session{}, id, false)
	t.writes.putSession(id, nil)
	t.durable = true
	return t.err
}

// rememberSession caches a session record read or written under its
// session lock, as the database keeps it (nil if it does not exist), and
// returns that. Nothing changes a cached record in place.
func (t *tx) rememberSession(s store.Session, id string, exists bool) *store.Session {
	if t.sessions == nil {
		t.sessions = make(map[string]*store.Session)
	}
	if !exists {
		t.sessions[id] = nil
		return nil
	}
	s.LastSeen = s.LastSeen.Truncate(time.Microsecond).UTC()
	if s.Ended() {
		s.EndedAt = s.EndedAt.Truncate(time.Microsecond).UTC()
	}
	t.sessions[id] = &s
	return &s
}

func (t *tx) PutAggregate(a store.Aggregate) error {
	t.lockAggregates(true)
	t.noAggregates = false
	t.writes.other = append(t.writes.other, queued{t.q.putAggregate, []any{a.Member, a.Root}})
	t.durable = true
	if t.aggs == nil {
		t.aggs = make(map[string]*string)
	}
	t.aggs[a.Member] = &a.Root
	return t.err
}

func (t *tx) DeleteAggregate(member string) error {
	t.lockAggregates(true)
	t.writes.other = append(t.writes.other, queued{t.q.deleteAggregate, []any{member}})
	t.durable = true
	if t.aggs == nil {
		t.aggs = make(map[string]*string)
	}
	t.aggs[member] = nil
	return t.err
}

func (t *tx) PutLost(l store.Lost) error {
	t.writes.putLost(l, false)
	t.durable = true
	if cached, ok := t.lost[l.Lock.Session]; ok {
		cached = slices.DeleteFunc(cached, func(o store.Lost) bool {
			return o.Lock.Key == l.Lock.Key && (o.Lock.Token == l.Lock.Token || o.Lock.Token < l.Lock.Token && o.Reported)
		})
		t.lost[l.Lock.Session] = sortLost(append(cached, normalLost(l)))
	}
	return t.err
}

func (t *tx) DeleteLost(session, key string, token uint64) error {
	t.writes.putLost(store.Lost{Lock: store.Lock{Key: key, Session: session, Token: token}}, true)
	t.durable = true
	if cached, ok := t.lost[session]; ok {
		t.lost[session] = slices.DeleteFunc(cached, func(o store.Lost) bool { return o.Lock.Key == key && o.Lock.Token == token })
	}
	return t.err
}

// normalLost is l as the database keeps it: times in microseconds, UTC.
func normalLost(l store.Lost) store.Lost {
	k := &l.Lock
	k.AcquiredAt, k.ExpiresAt = k.AcquiredAt.Truncate(time.Microsecond).UTC(), k.ExpiresAt.Truncate(time.Microsecond).UTC()
	l.At = l.At.Truncate(time.Microsecond).UTC()
	return l
}

// sortLost orders lost records as Lost lists them.
func sortLost(ls []store.Lost) []store.Lost {
	slices.SortFunc(ls, func(a, b store.Lost) int {
		return cmp.Or(a.At.Compare(b.At), strings.Compare(a.Lock.Key, b.Lock.Key), cmp.Compare(a.Lock.Token, b.Lock.Token))
	})
	return ls
}

func (t *tx) AppendAudit(e store.AuditEntry) (uint64, error) {
	if len(t.auditIDs) == 0 {
		if err := t.exchange(func(*pgx.Batch) { t.drawAhead(0, 1) }); err != nil {
			return 0, err
		}
	}
	id := t.auditIDs[0]
	t.auditIDs = t.auditIDs[1:]
	if t.s.notify {
		t.notified = append(t.notified, id)
	}
	t.writes.audit = append(t.writes.audit, auditRow{id, e})
	t.durable = true
	return uint64(id), t.err
}

func (t *tx) PruneAudit(before time.Time, limit int) (int, error) {
	t.durable = true
	var n int64
	err := t.exchange(func(b *pgx.Batch) {
		b.Queue(t.q.pruneAudit, before, limitOf(limit)).Exec(func(ct pgconn.CommandTag) error {
			n = ct.RowsAffected()
			return nil
		})
	})
	return int(n), err
}

// scanLock reads a row of lockCols, then of the columns that more are
// the destinations of.
func scanLock(rows pgx.Rows, more ...any) (store.Lock, error) {
	var (
		l     store.Lock
		token int64
	)
	err := rows.Scan(append([]any{&l.Key, &l.Session, &l.User, &l.Name, &l.Shared, &token, &l.AcquiredAt, &l.ExpiresAt, &l.Note}, more...)...)
	l.Token = uint64(token)
	l.AcquiredAt, l.ExpiresAt = l.AcquiredAt.UTC(), l.ExpiresAt.UTC()
	return l, err
}

func scanLocks(rows pgx.Rows) ([]store.Lock, error) {
	var out []store.Lock
	for rows.Next() {
		l, err := scanLock(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, rows.Err()
}

func scanSession(rows pgx.Rows) (store.Session, error) {
	var (
		s     store.Session
		idle  int64
		ended *time.Time
	)
	if err := rows.Scan(&s.ID, &s.User, &s.Name, &s.LastSeen, &idle, &ended, &s.EndReason); err != nil {
		return s, err
	}
	s.LastSeen = s.LastSeen.UTC()
	s.IdleTimeout = time.Duration(idle)
	if ended != nil {
		s.EndedAt = ended.UTC()
	}
	return s, nil
}

func scanVersionedSession(rows pgx.Rows) (store.Session, string, error) {
	var (
		s       store.Session
		version string
		idle    int64
		ended   *time.Time
	)
	if err := rows.Scan(&version, &s.ID, &s.User, &s.Name, &s.LastSeen, &idle, &ended, &s.EndReason); err != nil {
		return s, "", err
	}
	s.LastSeen = s.LastSeen.UTC()
	s.IdleTimeout = time.Duration(idle)
	if ended != nil {
		s.EndedAt = ended.UTC()
	}
	return s, version, nil
}

func scanSessions(rows pgx.Rows) ([]store.Session, error) {
	var out []store.Session
	for rows.Next() {
		s, err := scanSession(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

func scanLost(rows pgx.Rows) (store.Lost, error) {
	var (
		l     store.Lost
		token int64
	)
	k := &l.Lock
	err := rows.Scan(&k.Key, &k.Session, &k.User, &k.Name, &k.Shared, &token, &k.AcquiredAt, &k.ExpiresAt, &k.Note,
		&l.Reason, &l.Actor, &l.ForceReason, &l.At, &l.Reported)
	k.Token = uint64(token)
	k.AcquiredAt, k.ExpiresAt, l.At = k.AcquiredAt.UTC(), k.ExpiresAt.UTC(), l.At.UTC()
	return l, err
}

func scanAudit(rows pgx.Rows) (store.AuditEntry, error) {
	var (
		e         store.AuditEntry
		id, token int64
	)
	k := &e.Lock
	err := rows.Scan(&id, &e.At, &e.Event, &k.Key, &k.Session, &k.User, &k.Name, &k.Shared, &token,
		&k.AcquiredAt, &k.ExpiresAt, &k.Note, &e.Actor, &e.Reason)
	e.ID, k.Token = uint64(id), uint64(token)
	e.At, k.AcquiredAt, k.ExpiresAt = e.At.UTC(), k.AcquiredAt.UTC(), k.ExpiresAt.UTC()
	return e, err
}
