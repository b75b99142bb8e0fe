package server

import (
	"encoding/json"
	"strconv"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/internal/jsonwire"
)

// The answers of the lock operations, and error bodies (a refused acquire
// carries every holder), are written by hand for the reason their requests
// are read by hand: json.Marshal reflects over each result
// and then checks and copies every Lock's MarshalJSON output a second
// time. jsonwrite_test.go checks that the output is byte for byte what
// json.Marshal writes for the holdfast result types.

// jsonAppender is an answer that writes its own JSON.
type jsonAppender interface {
	appendJSON(b []byte) ([]byte, error)
}

// appendJSON appends the JSON of v, by its own hand when it has one.
func appendJSON(b []byte, v any) ([]byte, error) {
	if a, ok := v.(jsonAppender); ok {
		return a.appendJSON(b)
	}
	j, err := json.Marshal(v)
	return append(b, j...), err
}

// The answers of the operations, as the holdfast result types with their
// JSON written by hand.
type (
	releaseResponse    holdfast.ReleaseResult
	renewResponse      holdfast.RenewResult
	verifyResponse     holdfast.VerifyResult
	heartbeatResponse  holdfast.HeartbeatResult
	endSessionResponse holdfast.EndSessionResult
	lockPageResponse   holdfast.LockPage
)

func (r *acquireResponse) appendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"locks":`...)
	b = appendLocks(b, r.Locks)
	if r.Holders != nil {
		b = append(b, `,"holders":`...)
		b = appendLocks(b, *r.Holders)
	}
	return append(b, '}'), nil
}

func (r *releaseResponse) appendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"released":`...)
	b = appendLocks(b, r.Released)
	b = append(b, `,"not_held":`...)
	if r.NotHeld == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, key := range r.NotHeld {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonwire.AppendString(b, key)
		}
		b = append(b, ']')
	}
	return append(b, '}'), nil
}

func (r *renewResponse) appendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"locks":`...)
	b = appendLocks(b, r.Locks)
	return append(b, '}'), nil
}

func (r *verifyResponse) appendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"lock":`...)
	b = appendLock(b, &r.Lock)
	return append(b, '}'), nil
}

func (r *heartbeatResponse) appendJSON(b []byte) ([]byte, error) {
	s := &r.Session
	b = append(b, `{"session":{"id":`...)
	b = jsonwire.AppendString(b, s.ID)
	if s.User != "" {
		b = append(b, `,"user":`...)
		b = jsonwire.AppendString(b, s.User)
	}
	if s.Name != "" {
		b = append(b, `,"name":`...)
		b = jsonwire.AppendString(b, s.Name)
	}
	b = append(b, `,"last_seen":`...)
	b = appendTime(b, s.LastSeen)
	if s.IdleTimeout != 0 {
		b = append(b, `,"idle_timeout_seconds":`...)
		j, _ := s.IdleTimeout.MarshalJSON() // seconds of an int64: never fails
		b = append(b, j...)
	}
	b = append(b, `,"expires_at":`...)
	if s.ExpiresAt == nil {
		b = append(b, "null"...)
	} else {
		b = appendTime(b, *s.ExpiresAt)
	}
	b = append(b, `,"locks":`...)
	b = strconv.AppendInt(b, int64(s.Locks), 10)
	b = append(b, `},"lost":`...)
	if r.Lost == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range r.Lost {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendLostLock(b, &r.Lost[i])
		}
		b = append(b, ']')
	}
	return append(b, '}'), nil
}

func appendLostLock(b []byte, l *holdfast.LostLock) []byte {
	b = append(b, `{"lock":`...)
	b = appendLock(b, &l.Lock)
	b = append(b, `,"reason":`...)
	b = jsonwire.AppendString(b, string(l.Reason))
	if l.Actor != "" {
		b = append(b, `,"actor":`...)
		b = jsonwire.AppendString(b, l.Actor)
	}
	if l.ForceReason != "" {
		b = append(b, `,"force_reason":`...)
		b = jsonwire.AppendString(b, l.ForceReason)
	}
	return append(b, '}')
}

func (r *endSessionResponse) appendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"released":`...)
	b = appendLocks(b, r.Released)
	return append(b, '}'), nil
}

// appendJSON writes a page of GET /v1/locks, up to 1000 locks.
func (r *lockPageResponse) appendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"locks":`...)
	b = appendLocks(b, r.Locks)
	b = append(b, `,"next":`...)
	if r.Next == nil {
		b = append(b, "null"...)
	} else {
		b = jsonwire.AppendString(b, *r.Next)
	}
	return append(b, '}'), nil
}

func (r *batchResponse) appendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"results":[`...)
	var err error
	for i := range r.Results {
		res := &r.Results[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"status":`...)
		b = strconv.AppendInt(b, int64(res.Status), 10)
		if res.Body != nil {
			b = append(b, `,"body":`...)
			if b, err = appendJSON(b, res.Body); err != nil {
				return b, err
			}
		}
		if res.Error != nil {
			b = append(b, `,"error":`...)
			if b, err = appendJSON(b, res.Error); err != nil {
				return b, err
			}
		}
		b = append(b, '}')
	}
	return append(b, "]}"...), nil
}

func (e *errorBody) appendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"error":`...)
	if e.Error == nil {
		b = append(b, "null"...)
	} else {
		b, _ = e.Error.appendJSON(b)
	}
	return append(b, '}'), nil
}

// appendJSON writes the fields of apiError as its tags say; omitempty
// leaves out empty lists too.
func (e *apiError) appendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"code":`...)
	b = jsonwire.AppendString(b, e.Code)
	b = append(b, `,"message":`...)
	b = jsonwire.AppendString(b, e.Message)
	if e.Field != "" {
		b = append(b, `,"field":`...)
		b = jsonwire.AppendString(b, e.Field)
	}
	if len(e.Conflicts) > 0 {
		b = append(b, `,"conflicts":[`...)
		for i := range e.Conflicts {
			c := &e.Conflicts[i]
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"key":`...)
			b = jsonwire.AppendString(b, c.Key)
			b = append(b, `,"requested_key":`...)
			b = jsonwire.AppendString(b, c.RequestedKey)
			b = append(b, `,"holders":`...)
			b = appendLocks(b, c.Holders)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if e.Reason != "" {
		b = append(b, `,"reason":`...)
		b = jsonwire.AppendString(b, string(e.Reason))
	}
	if e.Lock != nil {
		b = append(b, `,"lock":`...)
		b = appendLock(b, e.Lock)
	}
	if e.Actor != "" {
		b = append(b, `,"actor":`...)
		b = jsonwire.AppendString(b, e.Actor)
	}
	if e.ForceReason != "" {
		b = append(b, `,"force_reason":`...)
		b = jsonwire.AppendString(b, e.ForceReason)
	}
	if e.Released != nil {
		b = append(b, `,"released":`...)
		b = appendLocks(b, e.Released)
	}
	return append(b, '}'), nil
}

func appendLocks(b []byte, locks []holdfast.Lock) []byte {
	if locks == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i := range locks {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendLock(b, &locks[i])
	}
	return append(b, ']')
}

// appendLock appends a Lock's own JSON, which is compact and escaped as
// json.Marshal would leave it.
func appendLock(b []byte, l *holdfast.Lock) []byte { return l.AppendJSON(b) }

// appendTime appends a Time's own MarshalJSON, which never fails.
func appendTime(b []byte, t holdfast.Time) []byte {
	j, _ := t.MarshalJSON()
	return append(b, j...)
}
