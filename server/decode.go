package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/internal/jsonwire"
)

// readBody reads a JSON request body of at most limit bytes. It wants
// Content-Type application/json, which a web page on another site cannot
// send without the browser asking first: that keeps forms and no-cors
// fetches from posting to a server that accepts anonymous requests.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if !jsonContent(r.Header.Get("Content-Type")) {
		return nil, invalidf("Content-Type", "request bodies must be sent with Content-Type: application/json")
	}
	src := r.Body
	if r.ContentLength < 0 || r.ContentLength > limit {
		// A body of unknown length, or too long: stop at the limit, and
		// have net/http close the connection rather than read on. A body
		// of a length within the limit ends there by itself.
		src = http.MaxBytesReader(w, r.Body, limit)
	}
	body, err := readAll(src, r.ContentLength, limit)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, invalidf("body", fmt.Sprintf("request body is larger than %d bytes", limit))
		}
		return nil, invalidf("body", "reading request body: "+err.Error())
	}
	if !utf8.Valid(body) {
		// encoding/json would read each bad byte as U+FFFD, so that two
		// different keys became one.
		return nil, invalidf("body", "request body is not valid UTF-8 (JSON must be)")
	}
	return body, nil
}

// jsonContent reports whether a Content-Type is application/json,
// sparing the parse for the exact value every client sends.
func jsonContent(contentType string) bool {
	if contentType == "application/json" {
		return true
	}
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
}

// readAll is io.ReadAll into a buffer of the announced length, so that a
// body of known length is read without growing and copying the buffer.
func readAll(r io.Reader, length, limit int64) ([]byte, error) {
	size := int64(512) // as io.ReadAll starts
	if length > 0 && length <= limit {
		size = length + 1 // the last byte lets Read report EOF
	}
	b := make([]byte, 0, size)
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

// decodeJSON decodes exactly one JSON object into v, refusing unknown
// fields, and names the offending field in the error.
func decodeJSON(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return invalidf("body", "request body is empty; want a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(body, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return invalidf("body", "request body has data after the JSON object")
	}
	return nil
}

func decodeError(body []byte, err error) error {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax), errors.Is(err, io.ErrUnexpectedEOF):
		return invalidf("body", "malformed JSON: "+err.Error())
	case errors.As(err, &typ):
		if typ.Field == "" {
			return invalidf("body", fmt.Sprintf("want a JSON object, not %s", typ.Value))
		}
		return invalidf(typ.Field, fmt.Sprintf("%s: want %s, not %s", typ.Field, jsonKind(typ.Type.Kind().String()), typ.Value))
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		name, _ = strconv.Unquote(name)
		return invalidf(name, fmt.Sprintf("unknown field %q", name))
	}
	// The decoder does not say which field a custom unmarshaler refused;
	// only durations have one, so find the duration that does not parse.
	if field := badDuration(body); field != "" {
		return invalidf(field, fmt.Sprintf("%s: %v", field, err))
	}
	return invalidf("body", err.Error())
}

func badDuration(body []byte) string {
	var fields map[string]json.RawMessage
	if json.Unmarshal(body, &fields) != nil {
		return ""
	}
	for name, raw := range fields {
		if !strings.HasSuffix(name, "_seconds") {
			continue
		}
		var d holdfast.Duration
		if d.UnmarshalJSON(raw) != nil {
			return name
		}
	}
	return ""
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "slice", "array":
		return "an array"
	case "struct", "map":
		return "an object"
	case "bool":
		return "true or false"
	default:
		return "a number"
	}
}

// query reads a GET request's query parameters, refusing unknown ones so
// that typos never pass silently.
type query struct {
	values url.Values
	err    error
}

// newQuery parses raw, a request's query string, refusing one that does
// not parse (a bad %-escape, a ";") rather than drop what it could not
// read, and refusing parameters other than known.
func newQuery(raw string, known ...string) *query {
	values, err := url.ParseQuery(raw)
	q := &query{values: values}
	if err != nil {
		q.err = invalidf("query", "malformed query string: "+err.Error())
		return q
	}
	for name := range values {
		found := false
		for _, k := range known {
			found = found || k == name
		}
		if !found {
			q.err = invalidf(name, fmt.Sprintf("unknown query parameter %q", name))
		}
	}
	return q
}

func (q *query) str(name string) string {
	vs := q.values[name]
	if len(vs) > 1 && q.err == nil {
		q.err = invalidf(name, fmt.Sprintf("query parameter %q is given more than once", name))
	}
	if len(vs) == 0 {
		return ""
	}
	return vs[0]
}

func (q *query) int(name string) int {
	s := q.str(name)
	if s == "" {
		return 0
	}
	n, err := strconv.Atoi(s)
	if err != nil && q.err == nil {
		q.err = invalidf(name, fmt.Sprintf("%s: want an integer, not %q", name, s))
	}
	return n
}

func (q *query) time(name string) time.Time {
	s := q.str(name)
	if s == "" {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil && q.err == nil {
		q.err = invalidf(name, fmt.Sprintf("%s: want an RFC 3339 time, not %q", name, s))
	}
	return t
}

// responseBuffers keep the memory of response bodies from one request to
// the next: the Write of a body copies it.
var responseBuffers = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledResponse is the largest buffer kept for reuse; a rare huge
// listing should not stay in memory.
const maxPooledResponse = 1 << 20

// lengthBuffered is the longest body that net/http (HTTP/1.1 and HTTP/2)
// holds until the handler returns and then sends with its Content-Length,
// which it counts without the cost of a header set and parsed again. A
// longer body is sent as it is written: it needs the header, or it goes
// out chunked.
const lengthBuffered = 2048

// writeJSON answers v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	buf := responseBuffers.Get().(*[]byte)
	body, err := appendJSON((*buf)[:0], v)
	if err != nil {
		status = http.StatusInternalServerError
		body = append(body[:0], `{"error":{"code":"internal","message":"encoding the response failed"}}`...)
	}
	body = append(body, '\n')
	h := w.Header()
	h["Content-Type"] = jsonwire.MediaType
	if len(body) > lengthBuffered {
		h.Set("Content-Length", strconv.Itoa(len(body)))
	}
	w.WriteHeader(status)
	w.Write(body)
	if cap(body) <= maxPooledResponse {
		*buf = body
		responseBuffers.Put(buf)
	}
}
