package server

import (
	"strconv"
	"unicode/utf8"

	"github.com/holdfast/holdfast"
)

// Request bodies of the lock operations are read by hand: encoding/json's
// reflection, and its extra passes (a Decoder buffers the body again, and
// /v1/batch decoded each op three times), cost more server CPU than
// anything else of the server's own (profile of holdfast bench cycle).
//
// jsonReader accepts only what it fully understands: exact field names,
// strings without escapes in valid UTF-8, plain numbers. On anything else
// it gives up and the body goes to encoding/json, which decides the rest
// (case-insensitive names, escapes, null) and words every error. So what
// jsonReader accepts, it decodes exactly as encoding/json would
// (jsonread_test.go fuzzes that), and what it refuses costs one extra pass.
type jsonReader struct {
	b   []byte
	i   int
	bad bool // gave up: leave the body to encoding/json
}

// readRequest decodes body into v with field, which reads the value of one
// member of the object, and falls back to decodeJSON when the reader gives
// up, so that v and the error are always what decodeJSON makes of body.
func readRequest[T any](body []byte, v *T, field func(r *jsonReader, v *T, name []byte)) error {
	r := jsonReader{b: body}
	r.object(func(name []byte) { field(&r, v, name) })
	if r.end() {
		return nil
	}
	var zero T
	*v = zero
	return decodeJSON(body, v)
}

// end reports whether the reader read one value and nothing but
// whitespace follows.
func (r *jsonReader) end() bool {
	r.space()
	return !r.bad && r.i == len(r.b)
}

func (r *jsonReader) space() {
	for r.i < len(r.b) {
		switch r.b[r.i] {
		case ' ', '\t', '\n', '\r':
			r.i++
		default:
			return
		}
	}
}

// next consumes c if it comes next after whitespace.
func (r *jsonReader) next(c byte) bool {
	r.space()
	if r.i < len(r.b) && r.b[r.i] == c {
		r.i++
		return true
	}
	return false
}

func (r *jsonReader) expect(c byte) {
	if !r.next(c) {
		r.bad = true
	}
}

// object reads an object, calling member with each name; member reads the
// value (or gives up on names it does not know).
func (r *jsonReader) object(member func(name []byte)) {
	if r.expect('{'); r.bad || r.next('}') {
		return
	}
	for !r.bad {
		name := r.stringBytes()
		if r.expect(':'); r.bad {
			return
		}
		member(name)
		if !r.next(',') {
			r.expect('}')
			return
		}
	}
}

// stringBytes reads a string without escapes and returns its bytes, which
// alias the body.
func (r *jsonReader) stringBytes() []byte {
	if r.expect('"'); r.bad {
		return nil
	}
	start, ascii := r.i, true
	for ; r.i < len(r.b); r.i++ {
		switch c := r.b[r.i]; {
		case c == '"':
			s := r.b[start:r.i]
			r.i++
			// encoding/json replaces invalid UTF-8 with U+FFFD.
			r.bad = !ascii && !utf8.Valid(s)
			return s
		case c < 0x20 || c == '\\':
			r.bad = true
			return nil
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	r.bad = true
	return nil
}

// string reads a string into memory of its own: the body may be reused.
func (r *jsonReader) string() string { return string(r.stringBytes()) }

func (r *jsonReader) strings() []string {
	if r.expect('['); r.bad {
		return nil
	}
	list := []string{} // encoding/json makes [] an empty slice, not nil
	if r.next(']') {
		return list
	}
	for !r.bad {
		list = append(list, r.string())
		if !r.next(',') {
			r.expect(']')
			break
		}
	}
	return list
}

func (r *jsonReader) bool() bool {
	r.space()
	for _, lit := range []string{"true", "false"} {
		if len(r.b)-r.i >= len(lit) && string(r.b[r.i:r.i+len(lit)]) == lit {
			r.i += len(lit)
			return lit == "true"
		}
	}
	r.bad = true
	return false
}

// uint64 reads an integer; a fraction or exponent is encoding/json's to
// judge.
func (r *jsonReader) uint64() uint64 {
	r.space()
	start := r.i
	for r.i < len(r.b) && isDigit(r.b[r.i]) {
		r.i++
	}
	digits := r.b[start:r.i]
	if len(digits) == 0 || digits[0] == '0' && len(digits) > 1 || r.i < len(r.b) && (r.b[r.i] == '.' || r.b[r.i]|0x20 == 'e') {
		r.bad = true
		return 0
	}
	n, err := strconv.ParseUint(string(digits), 10, 64)
	r.bad = err != nil
	return n
}

// duration reads a number and gives it to holdfast.Duration, as
// encoding/json does; the errors are left to encoding/json.
func (r *jsonReader) duration() holdfast.Duration {
	var d holdfast.Duration
	if n := r.number(); r.bad || d.UnmarshalJSON(n) != nil {
		r.bad = true
	}
	return d
}

// number reads a number of JSON's grammar and returns its bytes.
func (r *jsonReader) number() []byte {
	r.space()
	start := r.i
	r.skip('-')
	switch {
	case r.skip('0'):
	case r.i < len(r.b) && '1' <= r.b[r.i] && r.b[r.i] <= '9':
		r.digits()
	default:
		r.bad = true
		return nil
	}
	if r.skip('.') && !r.digits() {
		r.bad = true
	}
	if r.skip('e') || r.skip('E') {
		if !r.skip('+') {
			r.skip('-')
		}
		if !r.digits() {
			r.bad = true
		}
	}
	return r.b[start:r.i]
}

// skip consumes c if it is the next byte.
func (r *jsonReader) skip(c byte) bool {
	if r.i < len(r.b) && r.b[r.i] == c {
		r.i++
		return true
	}
	return false
}

// digits consumes a run of digits and reports whether there was one.
func (r *jsonReader) digits() bool {
	start := r.i
	for r.i < len(r.b) && isDigit(r.b[r.i]) {
		r.i++
	}
	return r.i > start
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// maxSkipDepth bounds the nesting value skips; deeper values are
// encoding/json's to judge.
const maxSkipDepth = 32

// value skips one JSON value of any kind, checking it as strictly as
// encoding/json does, and returns its bytes.
func (r *jsonReader) value(depth int) []byte {
	r.space()
	start := r.i
	if r.i == len(r.b) || depth > maxSkipDepth {
		r.bad = true
		return nil
	}
	switch c := r.b[r.i]; {
	case c == '{':
		r.object(func([]byte) { r.value(depth + 1) })
	case c == '[':
		r.i++
		if r.next(']') {
			break
		}
		for !r.bad {
			r.value(depth + 1)
			if !r.next(',') {
				r.expect(']')
				break
			}
		}
	case c == '"':
		r.skipString()
	case c == '-' || isDigit(c):
		r.number()
	default:
		r.literal()
	}
	return r.b[start:r.i]
}

// skipString skips a string, escapes and all.
func (r *jsonReader) skipString() {
	r.i++ // the opening quote
	for r.i < len(r.b) {
		c := r.b[r.i]
		r.i++
		switch {
		case c == '"':
			return
		case c < 0x20:
			r.bad = true
			return
		case c == '\\':
			if r.i == len(r.b) {
				r.bad = true
				return
			}
			e := r.b[r.i]
			r.i++
			switch e {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				for n := 0; n < 4; n++ {
					if r.i == len(r.b) || !isHex(r.b[r.i]) {
						r.bad = true
						return
					}
					r.i++
				}
			default:
				r.bad = true
				return
			}
		}
	}
	r.bad = true
}

func isHex(c byte) bool { return isDigit(c) || 'a' <= c|0x20 && c|0x20 <= 'f' }

// literal skips true, false or null.
func (r *jsonReader) literal() {
	for _, lit := range []string{"true", "false", "null"} {
		if len(r.b)-r.i >= len(lit) && string(r.b[r.i:r.i+len(lit)]) == lit {
			r.i += len(lit)
			return
		}
	}
	r.bad = true
}

func (r *jsonReader) owner(o *holdfast.Owner) {
	r.object(func(name []byte) {
		switch string(name) {
		case "session":
			o.Session = r.string()
		case "user":
			o.User = r.string()
		case "name":
			o.Name = r.string()
		default:
			r.bad = true
		}
	})
}

// The members of each request body, by their exact names.

func acquireField(r *jsonReader, req *holdfast.AcquireRequest, name []byte) {
	switch string(name) {
	case "keys":
		req.Keys = r.strings()
	case "mode":
		req.Mode = holdfast.Mode(r.string())
	case "intent":
		req.Intent = holdfast.Intent(r.string())
	case "owner":
		r.owner(&req.Owner)
	case "ttl_seconds":
		req.TTL = r.duration()
	case "idle_timeout_seconds":
		req.IdleTimeout = r.duration()
	case "takeover":
		req.Takeover = r.bool()
	case "note":
		req.Note = r.string()
	default:
		r.bad = true
	}
}

func releaseField(r *jsonReader, req *holdfast.ReleaseRequest, name []byte) {
	switch string(name) {
	case "session":
		req.Session = r.string()
	case "keys":
		req.Keys = r.strings()
	case "token":
		req.Token = r.uint64()
	default:
		r.bad = true
	}
}

func renewField(r *jsonReader, req *holdfast.RenewRequest, name []byte) {
	switch string(name) {
	case "session":
		req.Session = r.string()
	case "keys":
		req.Keys = r.strings()
	case "ttl_seconds":
		req.TTL = r.duration()
	default:
		r.bad = true
	}
}

func verifyField(r *jsonReader, req *holdfast.VerifyRequest, name []byte) {
	switch string(name) {
	case "key":
		req.Key = r.string()
	case "session":
		req.Session = r.string()
	case "token":
		req.Token = r.uint64()
	default:
		r.bad = true
	}
}

func heartbeatField(r *jsonReader, req *holdfast.HeartbeatRequest, name []byte) {
	switch string(name) {
	case "session":
		req.Session = r.string()
	case "idle_timeout_seconds":
		req.IdleTimeout = r.duration()
	default:
		r.bad = true
	}
}

func endSessionField(r *jsonReader, req *holdfast.EndSessionRequest, name []byte) {
	switch string(name) {
	case "session":
		req.Session = r.string()
	default:
		r.bad = true
	}
}

// batchField reads the envelope of /v1/batch, leaving each op's body as
// bytes for its operation's reader.
func batchField(r *jsonReader, ops *[]batchOp, name []byte) {
	if string(name) != "ops" {
		r.bad = true
		return
	}
	if r.expect('['); r.bad {
		return
	}
	*ops = []batchOp{}
	if r.next(']') {
		return
	}
	for !r.bad {
		var op batchOp
		r.object(func(name []byte) {
			switch string(name) {
			case "op":
				op.Op = r.string()
			case "body":
				op.Body = r.value(0)
			default:
				r.bad = true
			}
		})
		*ops = append(*ops, op)
		if !r.next(',') {
			r.expect(']')
			return
		}
	}
}
