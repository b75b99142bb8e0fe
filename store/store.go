// Package store is the storage contract of holdfast: the records a lock
// manager keeps and the atomic, durable transactions it keeps them in.
//
// A Store knows nothing of lock semantics. The holdfast Manager reads and
// writes records inside Update; the store makes each Update atomic (no other
// transaction sees part of it, and a failed one leaves nothing) and durable
// (when Update returns nil, a crash cannot undo it). Because every decision
// is taken inside one transaction, no check-then-act race is possible
// through this interface.
//
// The conformance suite in package storetest states the semantics every
// store must keep; run it from each store's tests.
package store

import (
	"context"
	"errors"
	"time"
)

// Store is the small interface every backend implements.
type Store interface {
	// Update runs fn in one atomic, durable read-write transaction. If fn
	// returns an error, nothing it wrote is kept and Update returns that
	// error. fn may be called more than once (a store may retry it after a
	// conflict), so it must not have side effects outside the transaction.
	// Update returns nil only after the transaction is durable. An error
	// wrapping ErrUnavailable after fn returned nil leaves the outcome
	// unknown: the commit may have been made, or may still be made (a
	// connection lost during COMMIT, a disk that completes a stalled
	// write).
	Update(ctx context.Context, fn func(Tx) error) error

	// View runs fn in a read-only transaction that sees a consistent state
	// no older than the last Update that returned.
	View(ctx context.Context, fn func(ReadTx) error) error

	// Ping reports whether the store can currently confirm durability.
	Ping(ctx context.Context) error

	// Close releases the store's resources. It does not wait for
	// transactions still running.
	Close() error
}

// ErrUnavailable is returned (wrapped) by a store that cannot reach its
// backend or cannot confirm that a write is durable. Callers fail closed.
var ErrUnavailable = errors.New("store unavailable")

// ReadTx reads records. Every listing is ordered and paginated by a cursor
// that is the last item's sort key.
type ReadTx interface {
	// Now is the store's clock, the only clock that judges expiry. Stores
	// shared by several servers use their own (the database's) clock.
	Now() time.Time

	// Lock returns the lock of session on exactly key.
	Lock(key, session string) (Lock, bool, error)
	// Related calls fn for every lock on key, on an ancestor of key or on a
	// descendant of key, until fn returns false. Stores answer it from an
	// index, never by scanning all locks.
	Related(key string, fn func(Lock) bool) error
	// SessionLocks returns every lock held by session, ordered by key.
	SessionLocks(session string) ([]Lock, error)
	// ExpiredLocks returns up to limit locks with ExpiresAt <= now, oldest
	// expiry first.
	ExpiredLocks(now time.Time, limit int) ([]Lock, error)
	// Locks lists locks ordered by (key, session) after the cursor, in a
	// slice of the caller's own.
	Locks(q LockQuery) ([]Lock, error)

	// Session returns a session record, live or ended.
	Session(id string) (Session, bool, error)
	// IdleSessions returns up to limit live sessions whose idle deadline
	// (LastSeen + IdleTimeout) is <= now.
	IdleSessions(now time.Time, limit int) ([]Session, error)
	// Sessions lists live (not ended) sessions ordered by id after the cursor.
	Sessions(q SessionQuery) ([]Session, error)
	// EndedSessions returns up to limit ended sessions that ended before t.
	EndedSessions(before time.Time, limit int) ([]Session, error)

	// Aggregate returns the root that member maps to.
	Aggregate(member string) (root string, ok bool, err error)
	// Aggregates lists mappings ordered by member; root "" means all.
	Aggregates(root string) ([]Aggregate, error)

	// Lost returns every remembered lost lock of session, oldest first.
	Lost(session string) ([]Lost, error)
	// LostBefore returns up to limit lost records made before t.
	LostBefore(before time.Time, limit int) ([]Lost, error)

	// Audit lists audit entries with ID > q.After, oldest first, or with
	// q.Newest those with ID < q.Before, newest first.
	Audit(q AuditQuery) ([]AuditEntry, error)
}

// Tx reads and writes records inside Update.
type Tx interface {
	ReadTx

	// NextToken returns a fencing token greater than every token this store
	// has returned before, across restarts.
	NextToken() (uint64, error)
	// RaiseTokens makes every token NextToken returns from now on greater
	// than floor, and reports whether the counter had to move: it never
	// lowers it. It is how an operator passes the tokens a restored backup
	// would grant again. Like every write, it takes effect with the
	// transaction's commit.
	RaiseTokens(floor uint64) (raised bool, err error)

	PutLock(l Lock) error
	DeleteLock(key, session string) error

	PutSession(s Session) error
	DeleteSession(id string) error

	PutAggregate(a Aggregate) error
	DeleteAggregate(member string) error

	// PutLost stores l and deletes the session's reported records of the
	// same key with older tokens: one record is enough to tell why.
	PutLost(l Lost) error
	DeleteLost(session, key string, token uint64) error

	// AppendAudit stores e with a new ID greater than every earlier one and
	// returns that ID.
	AppendAudit(e AuditEntry) (uint64, error)
	// PruneAudit deletes up to limit entries older than before and reports
	// how many it deleted.
	PruneAudit(before time.Time, limit int) (int, error)
}

// Toucher is implemented by a Tx that can record a session's activity
// lazily. TouchSession stores s exactly like PutSession, but a durable
// store need not make it durable before Update returns: it is written
// with a later commit, and a crash may lose the touches of the last
// moments, never any other write. A Tx without it gets PutSession.
//
// The Manager touches sessions for heartbeats that change nothing but
// LastSeen, the bulk of a lock service's traffic, so that they cost no
// fsync. A lost touch can only make a session look idle earlier after a
// crash, never keep a lock longer.
type Toucher interface {
	TouchSession(s Session) error
}

// Merger is implemented by a Store whose concurrent transactions share
// durable writes of its own accord (a group commit of its own), or write
// none (memstore), so that more of them under way at once cost no more
// writes, and whose transactions are answered in the order they commit.
// MergesCommits reports whether this one does. The Manager then starts
// each group's transaction as soon as the group before has run its
// operations, however many are still waiting to be durable, and publishes
// their audit entries in commit order; over other stores it keeps two
// under way, because each pays a commit of its own, and publishes each
// one's entries as soon as it has committed. A wrapper of a Store should
// forward it.
type Merger interface {
	MergesCommits() bool
}

// Bounded is implemented by a Store that bounds how long each transaction
// may take (pgstore's Config.Timeout), failing one that runs out with
// ErrUnavailable. The Manager then fails an operation that has waited
// longer than that for its turn the same way: otherwise, while the store
// hangs, callers queued behind it would wait one bound for every group of
// operations ahead of them.
type Bounded interface {
	// TransactionTimeout is the bound; zero or less means none.
	TransactionTimeout() time.Duration
}

// Preparer is implemented by a Tx that can read ahead. The Manager calls
// Prepare first in a transaction that runs several operations (a batch,
// or concurrent requests grouped into one commit) or one operation on
// several keys, naming every key they
// lock, release or check, as the callers gave them, and every session they
// act for, and among those the sessions whose lost records an operation
// reads (heartbeats, which report them). A store whose reads cost a round
// trip each may then take the locks those reads need and read the records
// in one round trip. It is only a hint: the operations make the same calls
// as without it, may touch records it did not name, and must get the same
// answers.
type Preparer interface {
	Prepare(keys, sessions, reporting []string) error
}

// AuditLister is implemented by a Store that can list its audit log outside
// any transaction. A log kept on disk may be long, and a listing that reads
// far into it (a filter few entries match, a key not touched for weeks)
// would hold up every commit while it reads, if it read inside View.
// ListAudit answers like ReadTx.Audit; like View it sees every commit whose
// Update has returned, and it lists only durable entries. The Manager
// lists the audit log of a Store without it in View.
type AuditLister interface {
	ListAudit(ctx context.Context, q AuditQuery) ([]AuditEntry, error)
}

// LockCounter is implemented by a ReadTx that can count locks without
// reading them. A listing of sessions shows how many locks each holds;
// a store whose reads cost a round trip each counts those of the whole
// page at once, and sends counts rather than every lock row. A ReadTx
// without it gets SessionLocks for each session.
type LockCounter interface {
	// CountLocks returns, for each of sessions holding a lock with
	// ExpiresAt after the given time, how many it holds. A session
	// holding none has no entry. In a write transaction the counts
	// include the transaction's own writes so far.
	CountLocks(sessions []string, after time.Time) (map[string]int, error)
}
