package store

import "time"

// Lock is one session's grant on one key.
type Lock struct {
	Key        string
	Session    string
	User       string
	Name       string
	Shared     bool
	Token      uint64
	AcquiredAt time.Time
	ExpiresAt  time.Time
	Note       string
}

// Session is a business transaction's identity and liveness. A session that
// ended keeps its record (EndedAt set) so that a late heartbeat learns why.
type Session struct {
	ID          string
	User        string
	Name        string
	LastSeen    time.Time
	IdleTimeout time.Duration // zero: no idle timeout
	EndedAt     time.Time     // zero while live
	EndReason   string        // "session_expired" or "session_ended" once ended
}

// Ended reports whether the session has ended.
func (s Session) Ended() bool { return !s.EndedAt.IsZero() }

// IdleDeadline is when a live session ends without further requests, or
// the zero time when it has no idle timeout.
func (s Session) IdleDeadline() time.Time {
	if s.IdleTimeout <= 0 {
		return time.Time{}
	}
	return s.LastSeen.Add(s.IdleTimeout)
}

// Aggregate maps a member key onto a root key.
type Aggregate struct {
	Member string
	Root   string
}

// Lost remembers a lock its session no longer holds, and why.
type Lost struct {
	Lock        Lock
	Reason      string
	Actor       string
	ForceReason string
	At          time.Time
	// Reported is set once the session's heartbeat has listed it.
	Reported bool
}

// AuditEntry is one event in the audit log.
type AuditEntry struct {
	ID     uint64
	At     time.Time
	Event  string
	Lock   Lock
	Actor  string
	Reason string
}

// LockQuery selects locks for listing. At most one of Prefix, Session and
// User is usually set; all set filters must match.
type LockQuery struct {
	Prefix  string // key equals Prefix or starts with it
	Session string
	User    string
	// After is the (key, session) of the last lock already seen.
	AfterKey, AfterSession string
	Limit                  int
}

// SessionQuery selects live sessions for listing.
type SessionQuery struct {
	User  string
	After string // id of the last session already seen
	Limit int
}

// AuditQuery selects audit entries.
type AuditQuery struct {
	Key     string // entries for exactly this key or below it
	Session string
	User    string
	Event   string
	Since   time.Time
	// After lists entries with ID > After, oldest first. With Newest set,
	// entries with ID < Before (0: no bound) are listed newest first.
	After  uint64
	Newest bool
	Before uint64
	Limit  int
}
