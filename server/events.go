package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/holdfast/holdfast"
)

// auditPage is how many audit entries one replay query reads.
const auditPage = 1000

// events streams audit entries as server-sent events. It subscribes
// before it replays what the client missed (entries after Last-Event-ID),
// so nothing committed in between is lost, and it drops by ID what the
// replay already sent. A subscriber that falls behind has its channel
// closed by the Manager; the stream then subscribes again and catches up
// from the audit log.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	q := newQuery(r.URL.Query(), "prefix")
	prefix := q.str("prefix")
	if q.err == nil && prefix != "" {
		// A trailing "/" is allowed: the prefix is a point in the key
		// hierarchy (see holdfast.UnderPrefix), like a listing's.
		prefix = strings.TrimSuffix(prefix, "/")
		if err := holdfast.ValidateKey(prefix); err != nil {
			q.err = invalidf("prefix", "prefix: "+err.Error())
		}
	}
	if q.err != nil {
		writeError(w, q.err)
		return
	}
	var last uint64
	resume := false
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		var err error
		if last, err = strconv.ParseUint(id, 10, 64); err != nil {
			writeError(w, invalidf("Last-Event-ID", fmt.Sprintf("Last-Event-ID: want an event id, not %q", id)))
			return
		}
		resume = true
	}
	select {
	case <-s.closing:
		writeError(w, &holdfast.UnavailableError{RetryAfter: time.Second, Err: fmt.Errorf("server is shutting down")})
		return
	default:
	}

	st := &stream{w: w, rc: http.NewResponseController(w), last: last}
	// A stream lives longer than any request timeout; errors only mean the
	// writer has no deadlines to lift.
	_ = st.rc.SetReadDeadline(time.Time{})
	_ = st.rc.SetWriteDeadline(time.Time{})

	ctx := r.Context()
	entries, cancel := s.mgr.Subscribe(prefix)
	defer func() { cancel() }()
	if resume {
		// Before the headers, so that a store that cannot answer is a 503.
		if err := s.replay(ctx, prefix, st); err != nil {
			writeError(w, err)
			return
		}
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	s.metrics.streams.Inc()
	defer s.metrics.streams.Dec()
	w.WriteHeader(http.StatusOK)
	if err := st.flushPending(); err != nil {
		return
	}

	ping := time.NewTicker(s.cfg.EventPing)
	defer ping.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.closing:
			return
		case <-ping.C:
			if err := st.comment("ping"); err != nil {
				return
			}
		case e, ok := <-entries:
			if !ok {
				s.log.DebugContext(ctx, "event stream fell behind; catching up from the audit log", "after", st.last)
				cancel()
				entries, cancel = s.mgr.Subscribe(prefix)
				if err := s.replay(ctx, prefix, st); err != nil {
					s.log.WarnContext(ctx, "event stream ended: catching up from the audit log failed", "error", err)
					return
				}
				if err := st.flushPending(); err != nil {
					return
				}
				continue
			}
			if err := st.send(e); err != nil {
				return
			}
		}
	}
}

// replay queues every entry after st.last for the stream.
func (s *Server) replay(ctx context.Context, prefix string, st *stream) error {
	after := strconv.FormatUint(st.last, 10)
	for {
		page, err := s.mgr.Audit(ctx, holdfast.AuditQuery{Key: prefix, After: after, Limit: auditPage})
		if err != nil {
			return fmt.Errorf("reading the audit log: %w", err)
		}
		for _, e := range page.Entries {
			st.queue(e)
		}
		if page.Next == nil || len(page.Entries) == 0 {
			return nil
		}
		after = *page.Next
	}
}

// stream writes events and remembers the last ID sent, so nothing is sent
// twice.
type stream struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	last    uint64
	pending []holdfast.AuditEntry
}

func (st *stream) queue(e holdfast.AuditEntry) {
	if e.ID > st.last {
		st.pending = append(st.pending, e)
		st.last = e.ID
	}
}

func (st *stream) flushPending() error {
	for _, e := range st.pending {
		if err := st.write(e); err != nil {
			return err
		}
	}
	st.pending = nil
	return st.rc.Flush()
}

func (st *stream) send(e holdfast.AuditEntry) error {
	if e.ID <= st.last {
		return nil
	}
	st.last = e.ID
	if err := st.write(e); err != nil {
		return err
	}
	return st.rc.Flush()
}

func (st *stream) write(e holdfast.AuditEntry) error {
	data, err := json.Marshal(e)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(st.w, "id: %d\nevent: %s\ndata: %s\n\n", e.ID, e.Event, data)
	return err
}

func (st *stream) comment(text string) error {
	if _, err := fmt.Fprintf(st.w, ": %s\n\n", text); err != nil {
		return err
	}
	return st.rc.Flush()
}
