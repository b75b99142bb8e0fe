package pgstore

import (
	"regexp"
	"strconv"
	"strings"
)

// A transaction's queued writes go out as one statement: each table's
// multi-row write is a data-modifying CTE of it. PostgreSQL pays a fixed
// cost per statement (locking and opening the relations of its plan,
// starting and ending the executor) that is larger than the cost of the
// rows themselves for the few rows of one transaction. The CTEs write
// distinct rows (see writes), so that they see one snapshot does not
// matter, and the tables have no triggers or keys between them.

// writePart is one CTE of the write statement.
type writePart uint8

const (
	partDeleteLocks writePart = iota
	partPutLocks
	partDeleteSessions
	partPutSessions
	partDeleteLosts
	partPutLosts
	partAudit
	numParts
)

// writeParts are the CTE bodies, each numbering its arguments from $1.
func writeParts(s string) [numParts]string {
	return [numParts]string{
		partDeleteLocks: `DELETE FROM ` + s + `.locks WHERE (key, session) IN (SELECT * FROM unnest($1::text[], $2::text[]))`,
		partPutLocks: `INSERT INTO ` + s + `.locks (` + lockCols + `) SELECT * FROM unnest(` + lockArrays + `)
			ON CONFLICT (key, session) DO UPDATE SET user_id = EXCLUDED.user_id, name = EXCLUDED.name,
			shared = EXCLUDED.shared, token = EXCLUDED.token, acquired_at = EXCLUDED.acquired_at,
			expires_at = EXCLUDED.expires_at, note = EXCLUDED.note`,
		partDeleteSessions: `DELETE FROM ` + s + `.sessions WHERE id = ANY($1::text[])`,
		// idle_after stays put while the deadline only moves later, so
		// that a touch changes no indexed column (migration 0003).
		partPutSessions: `INSERT INTO ` + s + `.sessions (` + sessionCols + `, idle_deadline, idle_after)
			SELECT u.*, u.idle_deadline FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[], $5::bigint[], $6::timestamptz[], $7::text[], $8::timestamptz[])
				AS u (` + sessionCols + `, idle_deadline)
			ON CONFLICT (id) DO UPDATE SET user_id = EXCLUDED.user_id, name = EXCLUDED.name,
			last_seen = EXCLUDED.last_seen, idle_timeout_ns = EXCLUDED.idle_timeout_ns, ended_at = EXCLUDED.ended_at,
			end_reason = EXCLUDED.end_reason, idle_deadline = EXCLUDED.idle_deadline,
			idle_after = CASE WHEN EXCLUDED.idle_deadline >= sessions.idle_after THEN sessions.idle_after ELSE EXCLUDED.idle_deadline END`,
		partDeleteLosts: `DELETE FROM ` + s + `.lost WHERE (session, key, token) IN (SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[]))`,
		// Three CTEs: data-modifying ones cannot nest. Each session and
		// key comes at most once: the deletion of older reported records
		// and the insert see the same snapshot.
		partPutLosts: `SELECT * FROM unnest(` + lostArrays + `) AS n (` + lostCols + `)),
			lost_older AS (DELETE FROM ` + s + `.lost l USING lost_new n
				WHERE l.session = n.session AND l.key = n.key AND l.token < n.token AND l.reported),
			lost_put AS (INSERT INTO ` + s + `.lost (` + lostCols + `) SELECT ` + lostCols + ` FROM lost_new
			ON CONFLICT (session, key, token) DO UPDATE SET user_id = EXCLUDED.user_id, name = EXCLUDED.name,
			shared = EXCLUDED.shared, acquired_at = EXCLUDED.acquired_at, expires_at = EXCLUDED.expires_at,
			note = EXCLUDED.note, reason = EXCLUDED.reason, actor = EXCLUDED.actor,
			force_reason = EXCLUDED.force_reason, at = EXCLUDED.at, reported = EXCLUDED.reported`,
		partAudit: `INSERT INTO ` + s + `.audit (id, at, event, ` + lockCols + `, actor, reason)
			SELECT * FROM unnest(` + auditArrays + `)`,
	}
}

var partNames = [numParts]string{"locks_deleted", "locks_put", "sessions_deleted", "sessions_put", "lost_deleted", "lost_new", "audit_appended"}

// writeStatements are the write statements of every combination of parts
// (index bit i: writePart i), built once per store, so that a commit only
// looks its statement up.
type writeStatements [1 << numParts]string

func newWriteStatements(schema string) *writeStatements {
	parts := writeParts(schema)
	var w writeStatements
	for mask := 1; mask < len(w); mask++ {
		w[mask] = buildWrite(&parts, uint8(mask))
	}
	return &w
}

// sql returns the statement of the parts in mask.
func (w *writeStatements) sql(mask uint8) string { return w[mask] }

var placeholder = regexp.MustCompile(`\$[0-9]+`)

// buildWrite joins the parts in mask into one statement, numbering their
// arguments on.
func buildWrite(parts *[numParts]string, mask uint8) string {
	var b strings.Builder
	b.WriteString("WITH ")
	args := 0
	for p := range numParts {
		if mask&(1<<p) == 0 {
			continue
		}
		if b.Len() > len("WITH ") {
			b.WriteString(",\n")
		}
		n := 0
		body := placeholder.ReplaceAllStringFunc(parts[p], func(ph string) string {
			i, _ := strconv.Atoi(ph[1:])
			n = max(n, i)
			return "$" + strconv.Itoa(args+i)
		})
		args += n
		b.WriteString(partNames[p] + " AS (" + body + ")")
	}
	b.WriteString("\nSELECT")
	return b.String()
}
