package client

import (
	"encoding/json"
	"reflect"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/holdfast/holdfast"
)

// The answers of the calls that can be coalesced are read by hand: they
// are mostly locks, and decoding them by reflection was the largest part
// of the client's CPU per operation. The reader takes the fast path only
// where it is sure to decode exactly what encoding/json would; anything
// else (an escaped string, a field spelt in another case, a repeated
// field, a number that is not a plain integer, malformed JSON) makes it
// give up, and the caller decodes the whole answer with encoding/json
// instead, so results and errors never differ (fuzz_test.go compares the
// two).

// decodeResult decodes a successful answer into out, which must point at
// a zero value: by hand when out is one of the results the reader knows
// and the body is plain enough, else with encoding/json.
func decodeResult(body []byte, out any) error {
	if readResult(body, out) {
		return nil
	}
	return json.Unmarshal(body, out)
}

// readResult decodes body, one JSON object, into out, which must point at
// a zero value, by hand. When it gives up, it leaves out zero again, for
// encoding/json must not start from a half-filled value.
func readResult(body []byte, out any) bool {
	r := reader{b: body}
	if !r.peek('{') || !r.result(out) {
		return false
	}
	r.ws()
	if r.failed || r.i != len(r.b) {
		reflect.ValueOf(out).Elem().SetZero()
		return false
	}
	return true
}

// result reads the next value into out, which must point at a zero value,
// when out is one of the results the reader knows; known is false, and
// nothing read, for any other.
func (r *reader) result(out any) (known bool) {
	switch v := out.(type) {
	case *holdfast.AcquireResult:
		r.acquireResult(v)
	case *holdfast.ReleaseResult:
		r.releaseResult(v)
	case *holdfast.RenewResult:
		r.renewResult(v)
	case *holdfast.VerifyResult:
		r.verifyResult(v)
	case *holdfast.EndSessionResult:
		r.endSessionResult(v)
	case *holdfast.HeartbeatResult:
		r.heartbeatResult(v)
	default:
		return false
	}
	return true
}

// reader walks a JSON text. Once it has given up (failed), every method
// returns a zero value, so a decoder reads straight on and checks once at
// the end.
type reader struct {
	b      []byte
	i      int
	failed bool
	// echo, when set, holds strings of the request being answered, which
	// string hands out rather than allocate copies of them.
	echo *echo
}

// maxSkipDepth bounds the nesting of values the reader skips; deeper ones
// are left to encoding/json, which has its own limit.
const maxSkipDepth = 100

func (r *reader) fail() { r.failed = true }

func (r *reader) ws() {
	for r.i < len(r.b) {
		switch r.b[r.i] {
		case ' ', '\t', '\n', '\r':
			r.i++
		default:
			return
		}
	}
}

// peek reports whether the next byte, after white space, is c.
func (r *reader) peek(c byte) bool {
	r.ws()
	return !r.failed && r.i < len(r.b) && r.b[r.i] == c
}

func (r *reader) expect(c byte) {
	if !r.peek(c) {
		r.fail()
		return
	}
	r.i++
}

// peekNull reports whether a null comes next, without consuming it.
func (r *reader) peekNull() bool {
	r.ws()
	return !r.failed && len(r.b)-r.i >= 4 && string(r.b[r.i:r.i+4]) == "null"
}

// null consumes a null if one comes next.
func (r *reader) null() bool {
	if r.peekNull() {
		r.i += 4
		return true
	}
	return false
}

// object calls field for each member of an object, which it must consume.
func (r *reader) object(field func(name []byte)) {
	r.expect('{')
	if r.peek('}') {
		r.i++
		return
	}
	for !r.failed {
		name := r.rawString()
		r.expect(':')
		field(name)
		if r.peek(',') {
			r.i++
			continue
		}
		r.expect('}')
		return
	}
}

// array calls elem for each element of an array, which it must consume.
func (r *reader) array(elem func()) {
	r.expect('[')
	if r.peek(']') {
		r.i++
		return
	}
	for !r.failed {
		elem()
		if r.peek(',') {
			r.i++
			continue
		}
		r.expect(']')
		return
	}
}

// rawString returns the bytes of a string that holds no escape and no
// control character, which are its value when they are valid UTF-8.
func (r *reader) rawString() []byte {
	r.expect('"')
	if r.failed {
		return nil
	}
	start, ascii := r.i, true
	for ; r.i < len(r.b); r.i++ {
		switch c := r.b[r.i]; {
		case c == '"':
			s := r.b[start:r.i]
			r.i++
			if !ascii && !utf8.Valid(s) {
				r.fail()
			}
			return s
		case c == '\\' || c < 0x20:
			r.fail()
			return nil
		case c >= 0x80:
			ascii = false
		}
	}
	r.fail()
	return nil
}

func (r *reader) string() string { return r.intern(r.rawString()) }

// intern returns s as a string, one of the request's own when it has s.
// Keys are searched only in requests of a few: in one of many, every
// string of the answer would scan them all.
func (r *reader) intern(s []byte) string {
	if e := r.echo; e != nil {
		for _, k := range e.strs {
			if string(s) == k {
				return k
			}
		}
		if len(e.keys) <= maxInternKeys {
			for _, k := range e.keys {
				if string(s) == k {
					return k
				}
			}
		}
	}
	return string(s)
}

const maxInternKeys = 16

// mode returns the two modes without allocating.
func (r *reader) mode() holdfast.Mode {
	switch s := r.rawString(); string(s) {
	case string(holdfast.Exclusive):
		return holdfast.Exclusive
	case string(holdfast.Shared):
		return holdfast.Shared
	default:
		return holdfast.Mode(s)
	}
}

// uint reads a plain decimal integer into a uint64.
func (r *reader) uint() uint64 {
	r.ws()
	start := r.i
	var n uint64
	for ; r.i < len(r.b) && r.b[r.i] >= '0' && r.b[r.i] <= '9'; r.i++ {
		d := uint64(r.b[r.i] - '0')
		if n > (1<<64-1-d)/10 {
			r.fail()
			return 0
		}
		n = n*10 + d
	}
	r.endOfInteger(start)
	return n
}

// int reads a plain decimal integer of at most 18 digits, which no int
// overflows.
func (r *reader) int() int {
	r.ws()
	neg := r.i < len(r.b) && r.b[r.i] == '-'
	if neg {
		r.i++
	}
	start := r.i
	n := 0
	for ; r.i < len(r.b) && r.b[r.i] >= '0' && r.b[r.i] <= '9'; r.i++ {
		n = n*10 + int(r.b[r.i]-'0')
	}
	if r.i-start > 18 {
		r.fail()
	}
	r.endOfInteger(start)
	if neg {
		return -n
	}
	return n
}

// endOfInteger checks that the digits from start are a whole JSON integer:
// at least one, no leading zero, no fraction or exponent after them.
func (r *reader) endOfInteger(start int) {
	digits := r.i - start
	if digits == 0 || digits > 1 && r.b[start] == '0' {
		r.fail()
		return
	}
	if r.i < len(r.b) {
		if c := r.b[r.i]; c == '.' || c == 'e' || c == 'E' {
			r.fail()
		}
	}
}

// time reads a time as time.Time's own UnmarshalJSON does.
func (r *reader) time() time.Time {
	r.ws()
	start := r.i
	r.rawString()
	var t time.Time
	if !r.failed && t.UnmarshalJSON(r.b[start:r.i]) != nil {
		r.fail()
	}
	return t
}

// raw returns the bytes of the next value, checking its syntax.
func (r *reader) raw() []byte {
	r.ws()
	start := r.i
	r.skip(0)
	if r.failed {
		return nil
	}
	return r.b[start:r.i]
}

// unmarshaler hands the next value, null included, to the field's own
// UnmarshalJSON, exactly as encoding/json would.
func (r *reader) unmarshaler(u json.Unmarshaler) {
	if raw := r.raw(); !r.failed && u.UnmarshalJSON(raw) != nil {
		r.fail()
	}
}

// skip consumes any one JSON value, checking its syntax.
func (r *reader) skip(depth int) {
	if depth > maxSkipDepth {
		r.fail()
		return
	}
	r.ws()
	if r.i >= len(r.b) {
		r.fail()
		return
	}
	switch c := r.b[r.i]; {
	case c == '{':
		r.object(func([]byte) { r.skip(depth + 1) })
	case c == '[':
		r.array(func() { r.skip(depth + 1) })
	case c == '"':
		r.skipString()
	case c == '-' || c >= '0' && c <= '9':
		r.skipNumber()
	case c == 't':
		r.literal("true")
	case c == 'f':
		r.literal("false")
	case c == 'n':
		r.literal("null")
	default:
		r.fail()
	}
}

func (r *reader) literal(word string) {
	if len(r.b)-r.i < len(word) || string(r.b[r.i:r.i+len(word)]) != word {
		r.fail()
		return
	}
	r.i += len(word)
}

// skipString consumes a string with any valid escapes.
func (r *reader) skipString() {
	r.i++ // the opening quote
	for r.i < len(r.b) {
		c := r.b[r.i]
		r.i++
		switch {
		case c == '"':
			return
		case c < 0x20:
			r.fail()
			return
		case c == '\\':
			if r.i >= len(r.b) {
				r.fail()
				return
			}
			e := r.b[r.i]
			r.i++
			switch e {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if len(r.b)-r.i < 4 || !isHex(r.b[r.i]) || !isHex(r.b[r.i+1]) || !isHex(r.b[r.i+2]) || !isHex(r.b[r.i+3]) {
					r.fail()
					return
				}
				r.i += 4
			default:
				r.fail()
				return
			}
		}
	}
	r.fail()
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// skipNumber consumes a number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (r *reader) skipNumber() {
	if r.b[r.i] == '-' {
		r.i++
	}
	switch {
	case r.i < len(r.b) && r.b[r.i] == '0':
		r.i++
	case r.digits() == 0:
		r.fail()
		return
	}
	if r.i < len(r.b) && r.b[r.i] == '.' {
		r.i++
		if r.digits() == 0 {
			r.fail()
			return
		}
	}
	if r.i < len(r.b) && (r.b[r.i] == 'e' || r.b[r.i] == 'E') {
		r.i++
		if r.i < len(r.b) && (r.b[r.i] == '+' || r.b[r.i] == '-') {
			r.i++
		}
		if r.digits() == 0 {
			r.fail()
		}
	}
}

func (r *reader) digits() int {
	start := r.i
	for r.i < len(r.b) && r.b[r.i] >= '0' && r.b[r.i] <= '9' {
		r.i++
	}
	return r.i - start
}

// fields tracks which members of one object were read: a repeated member
// is merged into the first by encoding/json, which the reader leaves to it,
// and an unknown member is skipped unless encoding/json would take it for
// a known one spelt in another case.
type fields struct {
	r     *reader
	names []string
	seen  uint32
}

// known returns the index of name among f.names, or -1 after skipping the
// member's value. A null value is skipped too: into a fresh value,
// encoding/json stores nothing for it either.
func (f *fields) known(name []byte) int {
	for i, n := range f.names {
		if string(name) == n {
			if f.seen&(1<<i) != 0 {
				f.r.fail()
				return -1
			}
			f.seen |= 1 << i
			if f.r.null() {
				return -1
			}
			return i
		}
	}
	for i := range name {
		if name[i] >= utf8.RuneSelf {
			// Unicode case folding is encoding/json's business.
			f.r.fail()
			return -1
		}
	}
	for _, n := range f.names {
		if strings.EqualFold(string(name), n) {
			f.r.fail()
			return -1
		}
	}
	f.r.skip(0)
	return -1
}

var lockFields = []string{"key", "requested_key", "mode", "owner", "acquired_at", "expires_at", "token", "note"}

func (r *reader) lock(l *holdfast.Lock) {
	f := fields{r: r, names: lockFields}
	r.object(func(name []byte) {
		switch f.known(name) {
		case 0:
			l.Key = r.string()
		case 1:
			// Most locks are held on the key requested: share its bytes.
			if s := r.rawString(); string(s) == l.Key {
				l.RequestedKey = l.Key
			} else {
				l.RequestedKey = r.intern(s)
			}
		case 2:
			l.Mode = r.mode()
		case 3:
			r.owner(&l.Owner)
		case 4:
			l.AcquiredAt = r.time()
		case 5:
			l.ExpiresAt = r.time()
		case 6:
			l.Token = r.uint()
		case 7:
			l.Note = r.string()
		}
	})
}

var ownerFields = []string{"session", "user", "name"}

func (r *reader) owner(o *holdfast.Owner) {
	f := fields{r: r, names: ownerFields}
	r.object(func(name []byte) {
		switch f.known(name) {
		case 0:
			o.Session = r.string()
		case 1:
			// A user named after the session is the common case.
			if s := r.rawString(); string(s) == o.Session {
				o.User = o.Session
			} else {
				o.User = r.intern(s)
			}
		case 2:
			o.Name = r.string()
		}
	})
}

// locks reads an array of locks; an empty one is an empty, non-nil slice,
// as encoding/json makes it.
func (r *reader) locks() []holdfast.Lock {
	ls := []holdfast.Lock{}
	r.array(func() {
		if r.null() {
			// A zero lock, which the reader leaves to encoding/json.
			r.fail()
			return
		}
		ls = append(ls, holdfast.Lock{})
		r.lock(&ls[len(ls)-1])
	})
	return ls
}

func (r *reader) strings() []string {
	ss := []string{}
	r.array(func() { ss = append(ss, r.string()) })
	return ss
}

var acquireFields = []string{"locks", "holders"}

func (r *reader) acquireResult(v *holdfast.AcquireResult) {
	f := fields{r: r, names: acquireFields}
	r.object(func(name []byte) {
		switch f.known(name) {
		case 0:
			v.Locks = r.locks()
		case 1:
			v.Holders = r.locks()
		}
	})
}

var releaseFields = []string{"released", "not_held"}

func (r *reader) releaseResult(v *holdfast.ReleaseResult) {
	f := fields{r: r, names: releaseFields}
	r.object(func(name []byte) {
		switch f.known(name) {
		case 0:
			v.Released = r.locks()
		case 1:
			v.NotHeld = r.strings()
		}
	})
}

var renewFields = []string{"locks"}

func (r *reader) renewResult(v *holdfast.RenewResult) {
	f := fields{r: r, names: renewFields}
	r.object(func(name []byte) {
		if f.known(name) == 0 {
			v.Locks = r.locks()
		}
	})
}

var verifyFields = []string{"lock"}

func (r *reader) verifyResult(v *holdfast.VerifyResult) {
	f := fields{r: r, names: verifyFields}
	r.object(func(name []byte) {
		if f.known(name) == 0 {
			r.lock(&v.Lock)
		}
	})
}

var endSessionFields = []string{"released"}

func (r *reader) endSessionResult(v *holdfast.EndSessionResult) {
	f := fields{r: r, names: endSessionFields}
	r.object(func(name []byte) {
		if f.known(name) == 0 {
			v.Released = r.locks()
		}
	})
}

var heartbeatFields = []string{"session", "lost"}

func (r *reader) heartbeatResult(v *holdfast.HeartbeatResult) {
	f := fields{r: r, names: heartbeatFields}
	r.object(func(name []byte) {
		switch f.known(name) {
		case 0:
			r.sessionInfo(&v.Session)
		case 1:
			v.Lost = []holdfast.LostLock{}
			r.array(func() {
				if r.null() {
					r.fail() // a zero element: left to encoding/json
					return
				}
				v.Lost = append(v.Lost, holdfast.LostLock{})
				r.lostLock(&v.Lost[len(v.Lost)-1])
			})
		}
	})
}

var sessionFields = []string{"id", "user", "name", "last_seen", "idle_timeout_seconds", "expires_at", "locks"}

func (r *reader) sessionInfo(s *holdfast.SessionInfo) {
	f := fields{r: r, names: sessionFields}
	r.object(func(name []byte) {
		if string(name) == "idle_timeout_seconds" && r.peekNull() {
			// Duration's UnmarshalJSON refuses null, which known would
			// skip.
			r.fail()
			return
		}
		switch f.known(name) {
		case 0:
			s.ID = r.string()
		case 1:
			if u := r.rawString(); string(u) == s.ID {
				s.User = s.ID
			} else {
				s.User = string(u)
			}
		case 2:
			s.Name = r.string()
		case 3:
			r.unmarshaler(&s.LastSeen)
		case 4:
			r.unmarshaler(&s.IdleTimeout)
		case 5:
			s.ExpiresAt = new(holdfast.Time)
			r.unmarshaler(s.ExpiresAt)
		case 6:
			s.Locks = r.int()
		}
	})
}

var lostFields = []string{"lock", "reason", "actor", "force_reason"}

func (r *reader) lostLock(l *holdfast.LostLock) {
	f := fields{r: r, names: lostFields}
	r.object(func(name []byte) {
		switch f.known(name) {
		case 0:
			r.lock(&l.Lock)
		case 1:
			l.Reason = holdfast.LostReason(r.rawString())
		case 2:
			l.Actor = r.string()
		case 3:
			l.ForceReason = r.string()
		}
	})
}
