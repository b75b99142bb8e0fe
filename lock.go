package holdfast

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/holdfast/holdfast/internal/jsonwire"
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

// MarshalJSON writes times as RFC 3339 UTC with milliseconds. It is
// written out by hand because every answer of the API carries locks: the
// reflection of encoding/json cost more than the rest of the encoding.
func (l Lock) MarshalJSON() ([]byte, error) {
	return l.AppendJSON(make([]byte, 0, 256)), nil
}

// AppendJSON appends what MarshalJSON returns to b, so that an answer
// carrying many locks is written into one buffer.
func (l Lock) AppendJSON(b []byte) []byte {
	b = append(b, `{"key":`...)
	b = jsonwire.AppendString(b, l.Key)
	b = append(b, `,"requested_key":`...)
	b = jsonwire.AppendString(b, l.RequestedKey)
	b = append(b, `,"mode":`...)
	b = jsonwire.AppendString(b, string(l.Mode))
	b = append(b, `,"owner":{"session":`...)
	b = jsonwire.AppendString(b, l.Owner.Session)
	if l.Owner.User != "" {
		b = append(b, `,"user":`...)
		b = jsonwire.AppendString(b, l.Owner.User)
	}
	if l.Owner.Name != "" {
		b = append(b, `,"name":`...)
		b = jsonwire.AppendString(b, l.Owner.Name)
	}
	b = append(b, `},"token":`...)
	b = strconv.AppendUint(b, l.Token, 10)
	if l.Note != "" {
		b = append(b, `,"note":`...)
		b = jsonwire.AppendString(b, l.Note)
	}
	b = append(b, `,"acquired_at":`...)
	b = Time(l.AcquiredAt).appendJSON(b)
	b = append(b, `,"expires_at":`...)
	b = Time(l.ExpiresAt).appendJSON(b)
	return append(b, '}')
}

// Time is a time.Time that travels as RFC 3339 UTC with milliseconds.
type Time time.Time

const timeLayout = "2006-01-02T15:04:05.000Z07:00"

func (t Time) MarshalJSON() ([]byte, error) {
	return t.appendJSON(make([]byte, 0, len(timeLayout)+2)), nil
}

// appendJSON writes the digits of timeLayout by hand for the years of
// four digits: AppendFormat reads the layout anew for every time, and an
// answer of 100 locks has 200 of them.
func (t Time) appendJSON(b []byte) []byte {
	if time.Time(t).IsZero() {
		return append(b, "null"...)
	}
	u := time.Time(t).UTC()
	year, month, day := u.Date()
	if year < 0 || year > 9999 {
		b = append(b, '"')
		b = u.AppendFormat(b, timeLayout)
		return append(b, '"')
	}
	hour, minute, second := u.Clock()
	ms := u.Nanosecond() / 1e6 // .000 truncates
	return append(b, '"',
		digit(year/1000), digit(year/100), digit(year/10), digit(year), '-',
		digit(int(month)/10), digit(int(month)), '-', digit(day/10), digit(day), 'T',
		digit(hour/10), digit(hour), ':', digit(minute/10), digit(minute), ':', digit(second/10), digit(second),
		'.', digit(ms/100), digit(ms/10), digit(ms), 'Z', '"')
}

// digit is the last decimal digit of n ≥ 0.
func digit(n int) byte { return byte('0' + n%10) }

// UnmarshalJSON parses an RFC 3339 time. A string without escapes, which
// is what the API writes, is parsed where it lies; anything else is
// unquoted by encoding/json first.
func (t *Time) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*t = Time{}
		return nil
	}
	s, ok := plainString(b)
	if !ok {
		var q string
		if err := json.Unmarshal(b, &q); err != nil {
			return err
		}
		s = q
	}
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return err
	}
	*t = Time(v)
	return nil
}

// plainString returns the contents of b when b is a JSON string that
// encoding/json would decode to exactly its bytes: quoted, printable ASCII,
// no escape.
func plainString(b []byte) (string, bool) {
	if len(b) < 2 || b[0] != '"' || b[len(b)-1] != '"' {
		return "", false
	}
	b = b[1 : len(b)-1]
	for _, c := range b {
		if c < 0x20 || c >= 0x80 || c == '"' || c == '\\' {
			return "", false
		}
	}
	return string(b), true
}

// Duration is a time.Duration that travels as seconds (a JSON number,
// fractions allowed). Zero means "not given".
type Duration time.Duration

// MarshalJSON writes the seconds as encoding/json writes a float64; by hand
// because every acquire carries a TTL.
func (d Duration) MarshalJSON() ([]byte, error) {
	return d.appendJSON(make([]byte, 0, 24)), nil
}

// appendJSON formats the seconds as encoding/json does a float64: plain
// decimals from 1e-6 up to 1e21, else an exponent without a leading zero.
// A duration's seconds are always finite.
func (d Duration) appendJSON(b []byte) []byte {
	s := time.Duration(d).Seconds()
	format := byte('f')
	if a := math.Abs(s); a != 0 && (a < 1e-6 || a >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, s, format, -1, 64)
	if n := len(b); format == 'e' && n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
		// e-07 becomes e-7.
		b[n-2] = b[n-1]
		b = b[:n-1]
	}
	return b
}

func (d *Duration) UnmarshalJSON(b []byte) error {
	// The JSON decoder has checked that b is one JSON value; of those,
	// ParseFloat takes exactly the numbers, and null decodes to zero.
	var s float64
	if string(b) != "null" {
		var err error
		// Out of float64's range, ParseFloat gives ±Inf or 0, and ErrRange.
		if s, err = strconv.ParseFloat(string(b), 64); err != nil && !errors.Is(err, strconv.ErrRange) {
			return fmt.Errorf("a duration is a number of seconds")
		}
	}
	if s <= 0 || math.IsNaN(s) {
		return fmt.Errorf("must be a number of seconds greater than 0")
	}
	// Beyond what a time.Duration holds (292 years) a duration is as long
	// as it can be: a lifetime is capped by its type's maximum anyway.
	*d = Duration(math.MaxInt64)
	if s < float64(math.MaxInt64)/float64(time.Second) {
		*d = Duration(s * float64(time.Second))
	}
	if *d <= 0 {
		return fmt.Errorf("must be a number of seconds greater than 0")
	}
	return nil
}
