package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/holdfast/holdfast"
)

// maxEventLine bounds one line of the event stream.
const maxEventLine = 1 << 20

// EventStream reads GET /v1/events. Call Next until it returns false, then
// Err; resume a broken stream by calling Events again with LastEventID.
//
//	s, err := c.Events(ctx, "policy/", "")
//	...
//	defer s.Close()
//	for s.Next() {
//		e := s.Entry()
//		...
//	}
//	err = s.Err()
type EventStream struct {
	ctx    context.Context
	body   io.ReadCloser
	lines  *bufio.Scanner
	entry  holdfast.AuditEntry
	lastID string
	err    error

	closeOnce sync.Once
	closed    chan struct{}
}

// errStreamEnded is what a stream the server closed reports: the caller is
// expected to resume.
var errStreamEnded = errors.New("event stream ended")

// Events opens the server-sent event stream of lock changes for keys at or
// below prefix ("" for all), resuming after lastEventID when it is not "".
// Errors of the request itself (401, 403, 503…) are returned here.
func (c *Client) Events(ctx context.Context, prefix, lastEventID string) (*EventStream, error) {
	q := url.Values{}
	setIf(q, "prefix", prefix)
	req, err := c.newRequest(ctx, http.MethodGet, "/v1/events", q, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, c.unreachable(err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
		if err != nil {
			return nil, &holdfast.UnavailableError{Err: fmt.Errorf("reading /v1/events response: %w", err)}
		}
		return nil, responseError(resp.StatusCode, resp.Header, body)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		resp.Body.Close()
		return nil, fmt.Errorf("/v1/events answered Content-Type %q, not text/event-stream", ct)
	}
	lines := bufio.NewScanner(resp.Body)
	lines.Buffer(make([]byte, 0, 4096), maxEventLine)
	return &EventStream{ctx: ctx, body: resp.Body, lines: lines, lastID: lastEventID, closed: make(chan struct{})}, nil
}

// Next reads up to the next audit entry and reports whether there is one.
func (s *EventStream) Next() bool {
	if s.err != nil {
		return false
	}
	var data strings.Builder
	hasData := false
	for s.lines.Scan() {
		line := s.lines.Text()
		if line == "" {
			if !hasData {
				continue
			}
			var e holdfast.AuditEntry
			if err := json.Unmarshal([]byte(data.String()), &e); err != nil {
				s.err = fmt.Errorf("decoding event: %w", err)
				return false
			}
			s.entry = e
			return true
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "": // a comment, such as a keep-alive
		case "data":
			if hasData {
				data.WriteByte('\n')
			}
			data.WriteString(value)
			hasData = true
		case "id":
			if !strings.ContainsRune(value, 0) {
				s.lastID = value
			}
		}
		// "event" repeats the entry's own Event field; "retry" is for
		// browsers that reconnect by themselves.
	}
	s.err = s.streamError(s.lines.Err())
	return false
}

// streamError says why the stream stopped.
func (s *EventStream) streamError(err error) error {
	select {
	case <-s.closed:
		return nil
	default:
	}
	if ctxErr := s.ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	if err == nil {
		err = errStreamEnded
	}
	if errors.Is(err, bufio.ErrTooLong) {
		return fmt.Errorf("reading events: %w", err)
	}
	return &holdfast.UnavailableError{Err: err}
}

// Entry is the entry that the last successful Next read.
func (s *EventStream) Entry() holdfast.AuditEntry { return s.entry }

// LastEventID is the cursor of the last entry read (or the one Events was
// given): pass it to Events to resume after it.
func (s *EventStream) LastEventID() string { return s.lastID }

// Err is why Next returned false: nil after Close, the context's error
// when it ended, and a *holdfast.UnavailableError when the connection broke
// or the server closed the stream, which the caller should resume.
func (s *EventStream) Err() error { return s.err }

// Close ends the stream. It may be called from another goroutine to
// unblock Next.
func (s *EventStream) Close() error {
	var err error
	s.closeOnce.Do(func() {
		close(s.closed)
		err = s.body.Close()
	})
	return err
}
