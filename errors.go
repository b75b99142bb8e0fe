package holdfast

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Sentinels. Every error the Manager and the client return matches one of
// them with errors.Is; the struct errors below carry the details.
var (
	// ErrLocked: other sessions hold conflicting locks (HTTP 423).
	ErrLocked = errors.New("locked")
	// ErrLockLost: the session no longer holds the lock or has ended (409).
	ErrLockLost = errors.New("lock lost")
	// ErrStaleToken: the token is not the current grant's token (409).
	ErrStaleToken = errors.New("stale token")
	// ErrUnavailable: the store cannot be reached or cannot confirm
	// durability; nothing was done, and the call may be retried (503).
	ErrUnavailable = errors.New("unavailable")
	// ErrInvalid: the request is malformed (400).
	ErrInvalid = errors.New("invalid")
	// ErrNotFound: unknown route or session (404).
	ErrNotFound = errors.New("not found")
	// ErrUnauthenticated and ErrForbidden come only from a remote server.
	ErrUnauthenticated = errors.New("unauthenticated")
	ErrForbidden       = errors.New("forbidden")
)

// LostReason says why a lock or session is no longer held.
type LostReason string

const (
	LostExpired        LostReason = "expired"
	LostReleased       LostReason = "released"
	LostForceReleased  LostReason = "force_released"
	LostTakenOver      LostReason = "taken_over"
	LostSessionExpired LostReason = "session_expired"
	LostSessionEnded   LostReason = "session_ended"
	LostNeverHeld      LostReason = "never_held"
)

// Conflict is one requested key that other sessions block, with every
// holder that blocks it.
type Conflict struct {
	Key          string `json:"key"`
	RequestedKey string `json:"requested_key"`
	Holders      []Lock `json:"holders"`
}

// LockedError is returned when an acquire is refused. Nothing was taken.
type LockedError struct {
	Conflicts []Conflict
	// Message reads like "policy/1 is being edited by Bob Smith since
	// 10:47 UTC (until 12:47 UTC)".
	Message string
}

func (e *LockedError) Error() string        { return e.Message }
func (e *LockedError) Is(target error) bool { return target == ErrLocked }

// LockLostError is returned by renew, verify and heartbeat when the lock or
// session is gone, with the reason.
type LockLostError struct {
	Reason LostReason
	// Lock is the lost grant, when known.
	Lock        *Lock
	Actor       string
	ForceReason string
	// Released lists the locks an ended session lost.
	Released []Lock
	Message  string
}

func (e *LockLostError) Error() string        { return e.Message }
func (e *LockLostError) Is(target error) bool { return target == ErrLockLost }

// StaleTokenError is returned when a token names an older grant.
type StaleTokenError struct {
	Lock    Lock // the current grant
	Message string
}

func (e *StaleTokenError) Error() string        { return e.Message }
func (e *StaleTokenError) Is(target error) bool { return target == ErrStaleToken }

// InvalidError names the field that is wrong and how.
type InvalidError struct {
	Field   string
	Message string
}

func (e *InvalidError) Error() string        { return e.Message }
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

func invalid(field, format string, args ...any) error {
	return &InvalidError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// UnavailableError is returned when the store cannot decide. Nothing was
// granted; retry after RetryAfter.
type UnavailableError struct {
	RetryAfter time.Duration
	Err        error
}

func (e *UnavailableError) Error() string {
	if e.Err == nil {
		return "lock store unavailable, retry later"
	}
	return "lock store unavailable, retry later: " + e.Err.Error()
}
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }
func (e *UnavailableError) Unwrap() error        { return e.Err }

// holderName is how a holder is shown to people.
func holderName(o Owner) string {
	switch {
	case o.Name != "":
		return o.Name
	case o.User != "":
		return o.User
	default:
		return "session " + o.Session
	}
}

// clock prints a time for people: the hour when it is today, with the date
// otherwise.
func clock(t, now time.Time) string {
	t, now = t.UTC(), now.UTC()
	if t.YearDay() == now.YearDay() && t.Year() == now.Year() {
		return t.Format("15:04 UTC")
	}
	return t.Format("Jan 2 15:04 UTC")
}

// holding says how h's lock stands to key, the key locked: on it, above
// it or below it, and to edit or to read.
func holding(key string, h Lock) string {
	doing := "being edited by "
	if h.Mode == Shared {
		doing = "being read by "
	}
	switch {
	case h.Key == key:
		return " is " + doing
	case Covers(h.Key, key):
		return " is covered by " + h.Key + ", " + doing
	default:
		return " contains " + h.Key + ", " + doing
	}
}

// lockedMessage describes every conflict in one sentence per key.
func lockedMessage(conflicts []Conflict, now time.Time) string {
	var b strings.Builder
	for i, c := range conflicts {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(c.RequestedKey)
		if c.Key != c.RequestedKey {
			fmt.Fprintf(&b, " (locked as %s)", c.Key)
		}
		for j, h := range c.Holders {
			if j > 0 {
				b.WriteString(", and")
			}
			fmt.Fprintf(&b, "%s%s since %s (until %s)", holding(c.Key, h), holderName(h.Owner),
				clock(h.AcquiredAt, now), clock(h.ExpiresAt, now))
		}
	}
	return b.String()
}
