package pgstore

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// queries holds the fixed SQL of one schema, built once.
type queries struct {
	takeLocks, takeLocksInOrder, draw, startDraw string
	lastToken, holdTokens, raiseTokens           string

	lock, related, relatedHolders, locksAhead, sessionLocks, countLocks, locksByRef, expiredLocks string

	session, checkSession                     string
	sessionsByID, idleSessions, endedSessions string
	catchUpIdle                               string

	startRead string

	aggregates, aggregatesOf, allAggregates string
	putAggregate, deleteAggregate           string

	lost, sessionsLost, lostBefore string

	pruneAudit string

	// writes builds the statement of a transaction's queued writes.
	writes *writeStatements

	schema string // quoted
	// mark starts the listings built as they are needed: readMark in
	// reads, so that their plans are kept apart too (see forReads).
	mark string
}

const lockCols = `key, session, user_id, name, shared, token, acquired_at, expires_at, note`

const sessionCols = `id, user_id, name, last_seen, idle_timeout_ns, ended_at, end_reason`

const lostCols = lockCols + `, reason, actor, force_reason, at, reported`

// The array types of the columns, for statements that write many rows
// from one array per column.
const (
	lockArrays  = `$1::text[], $2::text[], $3::text[], $4::text[], $5::boolean[], $6::bigint[], $7::timestamptz[], $8::timestamptz[], $9::text[]`
	lostArrays  = lockArrays + `, $10::text[], $11::text[], $12::text[], $13::timestamptz[], $14::boolean[]`
	auditArrays = `$1::bigint[], $2::timestamptz[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::boolean[], $9::bigint[],
		$10::timestamptz[], $11::timestamptz[], $12::text[], $13::text[], $14::text[]`
)

// plannerSettings set the planner for the rest of a write transaction
// (set_config(…, true) is SET LOCAL). Every statement a write sends finds
// its rows through an index, so an index scan is always right for it, and a
// connection keeps the generic plan it makes first. Made while the tables
// were small or not yet analyzed (a new schema, autovacuum off), that plan
// would scan the whole table, dead rows and all, on every call ever after.
// Plain index scans, not bitmap scans: they mark the dead index entries
// they pass, so later scans skip them. Generic plans always: with those
// scans the planner would otherwise judge a generic plan dearer than a
// custom one and plan some statements anew on every call. Never parallel:
// once a table passes a few megabytes (dead rows count), PostgreSQL would
// start workers for a lookup of a few rows, and every transaction would
// wait milliseconds for them. Never compiled (noJIT).
const plannerSettings = `set_config('enable_seqscan', 'off', true), set_config('enable_bitmapscan', 'off', true),
	set_config('plan_cache_mode', 'force_generic_plan', true), set_config('max_parallel_workers_per_gather', '0', true),
	` + noJIT

// noJIT turns off PostgreSQL's JIT compilation for the rest of a
// transaction, reads' and writes' alike. It compiles a statement whose
// estimated cost passes jit_above_cost (100,000 by default) on every
// execution, in milliseconds, to save microseconds on a few rows. The
// estimates grow with the tables' pages, dead rows included: after a
// minute of contended acquires the generic plan of a group's read-ahead
// passed it, and every heartbeat over that schema took five times as long
// (docs/POSTGRES.md, "JIT").
const noJIT = `set_config('jit', 'off', true)`

func newQueries(schema string) queries {
	s := quote(schema)
	// The last token drawn from token_seq, by any server.
	const lastDrawn = `CASE WHEN is_called THEN last_value ELSE last_value - 1 END`
	return queries{
		schema:    s,
		writes:    newWriteStatements(s),
		takeLocks: `SELECT ` + s + `.take_locks($1::bigint[], $2::boolean[], $3::boolean[], '` + briefWait + `')`,
		// take_locks where every lock may be waited for without limit, as
		// in a transaction's first round trip: the same ascending order
		// (a function scan yields the array's elements in order) without
		// a call of plpgsql per lock. The comment names it in
		// pg_stat_activity. It is the first statement after BEGIN of
		// every write transaction (each takes the aggregates lock at
		// least), and sets the planner for the rest of it.
		takeLocksInOrder: `/* ` + s + `.take_locks */ SELECT count(CASE WHEN x THEN pg_advisory_xact_lock(id) ELSE pg_advisory_xact_lock_shared(id) END),
				` + plannerSettings + `
			FROM unnest($1::bigint[], $2::boolean[]) AS l (id, x)`,
		// $1 tokens and $2 audit ids; startDraw also reads a write
		// transaction's clock, whether any aggregate is mapped and the
		// mappings of the names $3, so that its start and its first draws
		// are one statement. The counts are sub-selects, so that no plan
		// knows them: PostgreSQL then keeps one generic plan instead of
		// planning the statement anew for each count (a tenth of a
		// millisecond of the database's CPU per transaction).
		draw: `SELECT ARRAY(SELECT nextval('` + s + `.token_seq') FROM generate_series(1, (SELECT $1::int))),
			ARRAY(SELECT nextval('` + s + `.audit_id_seq') FROM generate_series(1, (SELECT $2::int)))`,
		startDraw: `SELECT ARRAY(SELECT nextval('` + s + `.token_seq') FROM generate_series(1, (SELECT $1::int))),
			ARRAY(SELECT nextval('` + s + `.audit_id_seq') FROM generate_series(1, (SELECT $2::int))),
			now(), EXISTS (SELECT FROM ` + s + `.aggregates), a.members, a.roots
			FROM (SELECT array_agg(member) AS members, array_agg(root) AS roots
				FROM ` + s + `.aggregates WHERE member = ANY($3::text[])) a`,
		lastToken: `SELECT ` + lastDrawn + ` FROM ` + s + `.token_seq`,
		// ALTER SEQUENCE, though it changes none of the settings, rewrites
		// the sequence under a lock that nextval waits for until the
		// transaction ends (LOCK TABLE takes no sequence): no other server
		// draws a token between the raise's read of the counter and its
		// move, which would then go back below that token. It needs the
		// sequence's owner.
		holdTokens: `ALTER SEQUENCE ` + s + `.token_seq NO CYCLE`,
		// $1 the floor: the counter moves up to it, if it is below; a row
		// if it moved.
		raiseTokens: `SELECT setval('` + s + `.token_seq', $1) FROM ` + s + `.token_seq WHERE ` + lastDrawn + ` < $1`,

		startRead: `SELECT now(), EXISTS (SELECT FROM ` + s + `.aggregates), ` + noJIT,

		lock: `SELECT ` + lockCols + ` FROM ` + s + `.locks WHERE key = $1 AND session = $2`,
		// The key itself and its ancestors by the exact list, descendants
		// by one range of the primary key.
		related: `SELECT ` + lockCols + ` FROM ` + s + `.locks WHERE key = ANY($1::text[])
			UNION ALL
			SELECT ` + lockCols + ` FROM ` + s + `.locks WHERE key >= $2 AND key < $3
			ORDER BY key, session`,
		// related for a read, which reads each holder's record next to
		// tell whether its lock still counts: the records come with the
		// rows, as in locksAhead.
		relatedHolders: `SELECT l.*, h.* FROM (
				SELECT ` + lockCols + ` FROM ` + s + `.locks WHERE key = ANY($1::text[])
				UNION ALL
				SELECT ` + lockCols + ` FROM ` + s + `.locks WHERE key >= $2 AND key < $3
			) l LEFT JOIN LATERAL (SELECT xmin::text, ` + sessionCols + ` FROM ` + s + `.sessions
				WHERE id = l.session LIMIT 1) h ON true
			ORDER BY l.key, l.session`,
		// related for many keys at once (the exact list of every key and
		// ancestor, and one range per key) and the locks of many sessions,
		// in one statement. A row may come more than once. Each row of
		// another session than those of $4 comes with that session's
		// record and its row version (NULL if there is none), read
		// without its lock: the operations read the record of every
		// holder they meet, and would otherwise pay a round trip each.
		// The record is looked up by id for each row (LIMIT 1 keeps the
		// planner from making the lookup a join, which a plan made on a
		// small table did by reading all of sessions_pkey).
		locksAhead: `SELECT l.*, h.* FROM (
				SELECT ` + lockCols + ` FROM ` + s + `.locks WHERE key = ANY($1::text[])
				UNION ALL
				SELECT ` + lockCols + ` FROM unnest($2::text[], $3::text[]) AS r (low, high),
					LATERAL (SELECT ` + lockCols + ` FROM ` + s + `.locks WHERE key >= r.low AND key < r.high) l
				UNION ALL
				SELECT ` + lockCols + ` FROM ` + s + `.locks WHERE session = ANY($4::text[])
			) l LEFT JOIN LATERAL (SELECT xmin::text, ` + sessionCols + ` FROM ` + s + `.sessions
				WHERE id = l.session AND id <> ALL(coalesce($4::text[], '{}')) LIMIT 1) h ON true`,
		sessionLocks: `SELECT ` + lockCols + ` FROM ` + s + `.locks WHERE session = $1 ORDER BY key`,
		countLocks: `SELECT session, count(*) FROM ` + s + `.locks
			WHERE session = ANY($1::text[]) AND expires_at > $2 GROUP BY session`,
		locksByRef: `SELECT ` + lockCols + ` FROM ` + s + `.locks
			WHERE (key, session) IN (SELECT * FROM unnest($1::text[], $2::text[])) AND expires_at <= $3
			ORDER BY expires_at, key, session`,
		expiredLocks: `SELECT ` + lockCols + ` FROM ` + s + `.locks WHERE expires_at <= $1
			ORDER BY expires_at, key, session LIMIT $2`,

		session:      `SELECT xmin::text, ` + sessionCols + ` FROM ` + s + `.sessions WHERE id = $1`,
		checkSession: `SELECT ` + s + `.check_session($1, $2)`,
		sessionsByID: `SELECT ` + sessionCols + ` FROM ` + s + `.sessions WHERE id = ANY($1::text[])`,
		idleSessions: `SELECT ` + sessionCols + ` FROM ` + s + `.sessions WHERE idle_after <= $1 AND idle_deadline <= $1
			ORDER BY idle_after, id LIMIT $2`,
		// Moves up to $2 idle_afters that lag behind their deadlines up to
		// them, skipping rows other transactions hold: it waits for none.
		catchUpIdle: `UPDATE ` + s + `.sessions SET idle_after = idle_deadline WHERE id = ANY(ARRAY(
				SELECT id FROM ` + s + `.sessions WHERE idle_after <= $1 AND (idle_deadline > $1 OR idle_deadline IS NULL)
				ORDER BY idle_after, id LIMIT $2 FOR UPDATE SKIP LOCKED))`,
		endedSessions: `SELECT ` + sessionCols + ` FROM ` + s + `.sessions WHERE ended_at < $1
			ORDER BY ended_at, id LIMIT $2`,

		aggregatesOf:  `SELECT member, root FROM ` + s + `.aggregates WHERE member = ANY($1::text[])`,
		aggregates:    `SELECT member, root FROM ` + s + `.aggregates WHERE root = $1 ORDER BY member`,
		allAggregates: `SELECT member, root FROM ` + s + `.aggregates ORDER BY member`,

		putAggregate:    `INSERT INTO ` + s + `.aggregates (member, root) VALUES ($1, $2) ON CONFLICT (member) DO UPDATE SET root = EXCLUDED.root`,
		deleteAggregate: `DELETE FROM ` + s + `.aggregates WHERE member = $1`,

		lost:         `SELECT ` + lostCols + ` FROM ` + s + `.lost WHERE session = $1 ORDER BY at, key, token`,
		sessionsLost: `SELECT ` + lostCols + ` FROM ` + s + `.lost WHERE session = ANY($1::text[]) ORDER BY at, key, token`,
		lostBefore:   `SELECT ` + lostCols + ` FROM ` + s + `.lost WHERE at < $1 ORDER BY at, session, key, token LIMIT $2`,
		pruneAudit: `DELETE FROM ` + s + `.audit WHERE id IN (
			SELECT id FROM ` + s + `.audit WHERE at < $1 ORDER BY at, id LIMIT $2)`,
	}
}

// readMark starts the statements of read transactions (see forReads).
const readMark = "/* read */ "

// forReads returns q with each statement marked as a read's. PostgreSQL
// keeps one plan per statement text and connection, and a read plans with
// the server's settings (custom plans, bitmap scans for the listings by
// key or time), where a write forces generic plans of plain index scans
// (plannerSettings): each kind must keep plans of its own, or the plan
// one made first would serve the other.
func (q queries) forReads() queries {
	for _, stmt := range []*string{
		&q.takeLocks, &q.takeLocksInOrder, &q.draw, &q.startDraw,
		&q.lock, &q.related, &q.relatedHolders, &q.locksAhead, &q.sessionLocks, &q.countLocks, &q.locksByRef, &q.expiredLocks,
		&q.session, &q.checkSession, &q.sessionsByID, &q.idleSessions, &q.endedSessions, &q.catchUpIdle,
		&q.startRead, &q.aggregates, &q.aggregatesOf, &q.allAggregates, &q.putAggregate, &q.deleteAggregate,
		&q.lost, &q.sessionsLost, &q.lostBefore, &q.pruneAudit, &q.lastToken, &q.holdTokens, &q.raiseTokens,
	} {
		*stmt = readMark + *stmt
	}
	q.writes = nil // reads write nothing
	q.mark = readMark
	return q
}

// briefWait is how long a transaction waits for a lock out of order
// before it gives up and runs again with its locks in order: long enough
// for the holder's short transaction to end, short enough that a rare
// cycle of waits costs little.
const briefWait = "25ms"

// catchUpBatch bounds the idle_afters moved up after one sweep step. A
// session that keeps beating needs this once per idle timeout, so a sweep
// a second keeps up with 2,000 such sessions a second: 120,000 with a
// one-minute timeout. Beyond that the sweep reads past more lagging ones.
const catchUpBatch = 2000

// noLimit stands for "all rows" where the contract's limit is <= 0.
const noLimit = 1<<63 - 1

func limitOf(n int) int64 {
	if n <= 0 {
		return noLimit
	}
	return int64(n)
}

// where builds the WHERE clause of a listing whose filters vary, so that
// each shape is its own prepared statement with its own plan.
type where struct {
	conds []string
	args  []any
}

// add appends a condition; each ? in it takes the next argument.
func (w *where) add(cond string, args ...any) {
	for _, a := range args {
		w.args = append(w.args, a)
		cond = strings.Replace(cond, "?", "$"+strconv.Itoa(len(w.args)), 1)
	}
	w.conds = append(w.conds, cond)
}

// arg appends an argument and returns its placeholder.
func (w *where) arg(a any) string {
	w.args = append(w.args, a)
	return "$" + strconv.Itoa(len(w.args))
}

func (w *where) String() string {
	if len(w.conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(w.conds, " AND ")
}

// prefixEnd returns the least string above every string that starts with
// prefix, or "" if there is none. Keys are UTF-8, whose byte order is code
// point order, so it is prefix with its last code point incremented.
func prefixEnd(prefix string) string {
	r, size := utf8.DecodeLastRuneInString(prefix)
	if r == utf8.RuneError || r >= utf8.MaxRune {
		return ""
	}
	r++
	if r >= 0xD800 && r <= 0xDFFF { // surrogates are not code points of UTF-8
		r = 0xE000
	}
	return prefix[:len(prefix)-size] + string(r)
}

// ancestorsAndSelf returns key and each of its ancestors.
func ancestorsAndSelf(key string) []string {
	out := []string{key}
	for i := len(key) - 1; i > 0; i-- {
		if key[i] == '/' {
			out = append(out, key[:i])
		}
	}
	return out
}
