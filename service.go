package holdfast

import (
	"context"
	"time"
)

// Service is what applications call. The in-process *Manager and the HTTP
// client (package client) both implement it, so switching between an
// embedded lock manager and a remote server is a change of constructor.
// Errors keep their identity on both: test them with errors.Is and As.
type Service interface {
	Acquire(ctx context.Context, req AcquireRequest) (*AcquireResult, error)
	Release(ctx context.Context, req ReleaseRequest) (*ReleaseResult, error)
	Renew(ctx context.Context, req RenewRequest) (*RenewResult, error)
	Verify(ctx context.Context, req VerifyRequest) (*VerifyResult, error)
	Locks(ctx context.Context, q LockQuery) (*LockPage, error)

	Heartbeat(ctx context.Context, req HeartbeatRequest) (*HeartbeatResult, error)
	EndSession(ctx context.Context, req EndSessionRequest) (*EndSessionResult, error)
	Sessions(ctx context.Context, q SessionQuery) (*SessionPage, error)

	SetAggregate(ctx context.Context, a Aggregate) (*Aggregate, error)
	RemoveAggregate(ctx context.Context, req RemoveAggregateRequest) error
	Aggregates(ctx context.Context, root string) (*AggregateList, error)

	ForceRelease(ctx context.Context, req ForceReleaseRequest) (*ForceReleaseResult, error)
	Audit(ctx context.Context, q AuditQuery) (*AuditPage, error)
}

// AcquireRequest is the body of POST /v1/locks/acquire.
type AcquireRequest struct {
	Keys []string `json:"keys"`
	// Mode, or else Intent mapped through the type's policy; neither means
	// exclusive.
	Mode        Mode     `json:"mode,omitempty"`
	Intent      Intent   `json:"intent,omitempty"`
	Owner       Owner    `json:"owner"`
	TTL         Duration `json:"ttl_seconds,omitempty"`
	IdleTimeout Duration `json:"idle_timeout_seconds,omitempty"`
	// Takeover succeeds over holders that are the same non-empty user.
	Takeover bool   `json:"takeover,omitempty"`
	Note     string `json:"note,omitempty"`
}

// AcquireResult lists the grants; Holders is set only for a read intent
// that took no lock.
type AcquireResult struct {
	Locks   []Lock `json:"locks"`
	Holders []Lock `json:"holders,omitempty"`
}

// ReleaseRequest is the body of POST /v1/locks/release.
type ReleaseRequest struct {
	Session string   `json:"session"`
	Keys    []string `json:"keys"`
	// Token, when set, must be the current grant's token (one key only).
	Token uint64 `json:"token,omitempty"`
}

type ReleaseResult struct {
	Released []Lock   `json:"released"`
	NotHeld  []string `json:"not_held"`
}

// RenewRequest is the body of POST /v1/locks/renew. No keys means all of
// the session's locks.
type RenewRequest struct {
	Session string   `json:"session"`
	Keys    []string `json:"keys,omitempty"`
	TTL     Duration `json:"ttl_seconds,omitempty"`
}

type RenewResult struct {
	Locks []Lock `json:"locks"`
}

// VerifyRequest is the body of POST /v1/locks/verify.
type VerifyRequest struct {
	Key     string `json:"key"`
	Session string `json:"session"`
	Token   uint64 `json:"token,omitempty"`
}

type VerifyResult struct {
	Lock Lock `json:"lock"`
}

// LockQuery selects locks for GET /v1/locks. Key lists the locks that
// conflict-check against it; Prefix (keys under it, see UnderPrefix),
// Session and User filter.
type LockQuery struct {
	Key     string
	Prefix  string
	Session string
	User    string
	Limit   int
	After   string
}

type LockPage struct {
	Locks []Lock  `json:"locks"`
	Next  *string `json:"next"`
}

// HeartbeatRequest is the body of POST /v1/sessions/heartbeat.
type HeartbeatRequest struct {
	Session     string   `json:"session"`
	IdleTimeout Duration `json:"idle_timeout_seconds,omitempty"`
}

// SessionInfo describes a live session.
type SessionInfo struct {
	ID          string   `json:"id"`
	User        string   `json:"user,omitempty"`
	Name        string   `json:"name,omitempty"`
	LastSeen    Time     `json:"last_seen"`
	IdleTimeout Duration `json:"idle_timeout_seconds,omitempty"`
	// ExpiresAt is when the session ends without further requests: nil
	// without an idle timeout, else LastSeen + IdleTimeout, or later for a
	// session last seen before the Manager started (Config.RestartGrace).
	ExpiresAt *Time `json:"expires_at"`
	Locks     int   `json:"locks"`
}

// LostLock tells a holder that, and why, it no longer holds a lock.
type LostLock struct {
	Lock        Lock       `json:"lock"`
	Reason      LostReason `json:"reason"`
	Actor       string     `json:"actor,omitempty"`
	ForceReason string     `json:"force_reason,omitempty"`
}

type HeartbeatResult struct {
	Session SessionInfo `json:"session"`
	Lost    []LostLock  `json:"lost"`
}

type EndSessionRequest struct {
	Session string `json:"session"`
}

type EndSessionResult struct {
	Released []Lock `json:"released"`
}

// SessionQuery selects live sessions for GET /v1/sessions.
type SessionQuery struct {
	Session string
	User    string
	Limit   int
	After   string
}

type SessionPage struct {
	Sessions []SessionInfo `json:"sessions"`
	Next     *string       `json:"next"`
}

// Aggregate maps a member key onto a root key.
type Aggregate struct {
	Member string `json:"member"`
	Root   string `json:"root"`
}

type RemoveAggregateRequest struct {
	Member string `json:"member"`
}

type AggregateList struct {
	Aggregates []Aggregate `json:"aggregates"`
}

// ForceReleaseRequest is the body of POST /v1/admin/force-release.
type ForceReleaseRequest struct {
	Keys    []string `json:"keys,omitempty"`
	Session string   `json:"session,omitempty"`
	Reason  string   `json:"reason"`
	Actor   string   `json:"actor,omitempty"`
}

type ForceReleaseResult struct {
	Released []Lock `json:"released"`
}

// Event names an audit entry.
type Event string

const (
	EventAcquired       Event = "acquired"
	EventReleased       Event = "released"
	EventRenewed        Event = "renewed"
	EventExpired        Event = "expired"
	EventSessionExpired Event = "session_expired"
	EventForceReleased  Event = "force_released"
	EventTakenOver      Event = "taken_over"
)

// Known reports whether e is one of the events above.
func (e Event) Known() bool {
	switch e {
	case EventAcquired, EventReleased, EventRenewed, EventExpired, EventSessionExpired, EventForceReleased, EventTakenOver:
		return true
	}
	return false
}

// AuditEntry is one event of the audit log.
type AuditEntry struct {
	ID     uint64 `json:"id"`
	At     Time   `json:"at"`
	Event  Event  `json:"event"`
	Lock   Lock   `json:"lock"`
	Actor  string `json:"actor,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// AuditQuery selects entries for GET /v1/admin/audit: oldest first, or
// newest first with Newest. After is the Next cursor of the previous page.
type AuditQuery struct {
	// Key selects the entries of a key and of the keys under it; a
	// trailing "/" is ignored, and one that is not a key is invalid.
	Key     string
	Session string
	User    string
	Event   Event
	Since   time.Time
	Newest  bool
	Limit   int
	After   string
}

type AuditPage struct {
	Entries []AuditEntry `json:"entries"`
	Next    *string      `json:"next"`
}
