package holdfast

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"
)

// Mode is how a lock is held.
type Mode string

const (
	Exclusive Mode = "exclusive"
	Shared    Mode = "shared"
)

// Intent is what a caller means to do with a record; the record type's
// Policy turns it into a Mode (or into no lock at all).
type Intent string

const (
	IntentRead  Intent = "read"
	IntentWrite Intent = "write"
)

// Policy decides, per record type, which lock an intent takes.
type Policy string

const (
	// ExclusiveWrite locks only for writing; readers take no lock and see
	// the current holders.
	ExclusiveWrite Policy = "exclusive-write"
	// ExclusiveRead locks exclusively for reading and writing.
	ExclusiveRead Policy = "exclusive-read"
	// ReadWrite lets readers share and writers exclude.
	ReadWrite Policy = "read-write"
)

// modeFor maps an intent through the policy; ok is false when no lock is
// taken (a read under exclusive-write).
func (p Policy) modeFor(i Intent) (m Mode, ok bool) {
	if i == IntentWrite {
		return Exclusive, true
	}
	switch p {
	case ExclusiveRead:
		return Exclusive, true
	case ReadWrite:
		return Shared, true
	default:
		return "", false
	}
}

// Owner identifies who holds a lock. Session is the business transaction
// and the unit of re-entrancy; User is the stable person; Name is what
// other people are shown.
type Owner struct {
	Session string `json:"session"`
	User    string `json:"user,omitempty"`
	Name    string `json:"name,omitempty"`
}

// Lock is a grant.
type Lock struct {
	Key          string    `json:"key"`
	RequestedKey string    `json:"requested_key"`
	Mode         Mode      `json:"mode"`
	Owner        Owner     `json:"owner"`
	AcquiredAt   time.Time `json:"acquired_at"`
	ExpiresAt    time.Time `json:"expires_at"`
	// Token is the fencing token: it grows with every grant of the store.
	Token uint64 `json:"token"`
	Note  string `json:"note,omitempty"`
}

// MarshalJSON writes times as RFC 3339 UTC with milliseconds.
func (l Lock) MarshalJSON() ([]byte, error) {
	type plain Lock
	return json.Marshal(struct {
		plain
		AcquiredAt Time `json:"acquired_at"`
		ExpiresAt  Time `json:"expires_at"`
	}{plain(l), Time(l.AcquiredAt), Time(l.ExpiresAt)})
}

// Time is a time.Time that travels as RFC 3339 UTC with milliseconds.
type Time time.Time

const timeLayout = "2006-01-02T15:04:05.000Z07:00"

func (t Time) MarshalJSON() ([]byte, error) {
	if time.Time(t).IsZero() {
		return []byte("null"), nil
	}
	b := make([]byte, 0, len(timeLayout)+2)
	b = append(b, '"')
	b = time.Time(t).UTC().AppendFormat(b, timeLayout)
	return append(b, '"'), nil
}

func (t *Time) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*t = Time{}
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return err
	}
	*t = Time(v)
	return nil
}

// Duration is a time.Duration that travels as seconds (a JSON number,
// fractions allowed). Zero means "not given".
type Duration time.Duration

func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).Seconds())
}

func (d *Duration) UnmarshalJSON(b []byte) error {
	// The JSON decoder has checked that b is one JSON value; of those,
	// ParseFloat takes exactly the numbers, and null decodes to zero.
	var s float64
	if string(b) != "null" {
		var err error
		if s, err = strconv.ParseFloat(string(b), 64); err != nil {
			return fmt.Errorf("a duration is a number of seconds")
		}
	}
	if s <= 0 || math.IsNaN(s) || s > float64(math.MaxInt64)/float64(time.Second) {
		return fmt.Errorf("must be a number of seconds greater than 0")
	}
	*d = Duration(s * float64(time.Second))
	if *d <= 0 {
		return fmt.Errorf("must be a number of seconds greater than 0")
	}
	return nil
}
