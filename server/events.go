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
// replay already sent (see sentIDs). A subscriber that falls behind has
// its channel closed by the Manager; the stream then subscribes again and
// catches up from the audit log.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	q := newQuery(r.URL.RawQuery, "prefix")
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

	st := &stream{w: w, rc: http.NewResponseController(w)}
	if resume {
		st.sent.resume(last)
	}
	// A stream lives longer than any request timeout; errors only mean the
	// writer has no deadlines to lift.
	_ = st.rc.SetReadDeadline(time.Time{})
	_ = st.rc.SetWriteDeadline(time.Time{})

	ctx := r.Context()
	entries, cancel := s.mgr.Subscribe(prefix)
	defer func() { cancel() }()
	// Before the headers, so that a store that cannot answer is a 503.
	if resume {
		if err := s.replay(ctx, prefix, st); err != nil {
			writeError(w, err)
			return
		}
	} else {
		// Should the stream be dropped before it sends an entry, it
		// catches up from here, not from the start of the audit log.
		page, err := s.mgr.Audit(ctx, holdfast.AuditQuery{Newest: true, Limit: 1})
		if err != nil {
			writeError(w, fmt.Errorf("reading the audit log: %w", err))
			return
		}
		if len(page.Entries) > 0 {
			st.sent.begin(page.Entries[0].ID)
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
				s.log.DebugContext(ctx, "event stream fell behind; catching up from the audit log", "after", st.sent.replayFrom())
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

// replay queues every entry after the stream's window, or after where it
// began if that is higher, that it has not sent.
func (s *Server) replay(ctx context.Context, prefix string, st *stream) error {
	after := strconv.FormatUint(st.sent.replayFrom(), 10)
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

// stream writes events and remembers which it sent, so nothing is sent
// twice.
type stream struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	sent    sentIDs
	pending []pendingEvent
}

// pendingEvent is a replayed entry and the cursor it is sent with.
type pendingEvent struct {
	entry  holdfast.AuditEntry
	cursor uint64
}

func (st *stream) queue(e holdfast.AuditEntry) {
	if st.sent.add(e.ID) {
		st.pending = append(st.pending, pendingEvent{e, st.sent.top})
	}
}

func (st *stream) flushPending() error {
	for _, p := range st.pending {
		if err := st.write(p.entry, p.cursor); err != nil {
			return err
		}
	}
	st.pending = nil
	return st.rc.Flush()
}

func (st *stream) send(e holdfast.AuditEntry) error {
	if !st.sent.add(e.ID) {
		return nil
	}
	if err := st.write(e, st.sent.top); err != nil {
		return err
	}
	return st.rc.Flush()
}

// write sends e with cursor as its event id: the highest ID sent so far,
// which e's own is unless e came after a higher one. Last-Event-ID then
// never goes back, and a resumed stream replays nothing twice.
func (st *stream) write(e holdfast.AuditEntry, cursor uint64) error {
	data, err := json.Marshal(e)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(st.w, "id: %d\nevent: %s\ndata: %s\n\n", cursor, e.Event, data)
	return err
}

// sentWindow is how many IDs up to the highest one sent a stream tracks
// one by one (2 KiB a stream). Audit IDs are drawn before commit, so over
// PostgreSQL an entry can commit, and reach the stream, after one with a
// higher ID (two transactions in flight on a server, or servers sharing
// the database). Within the window the stream still sends it; below, it
// takes it for sent. A live stream misses an entry only if this many IDs
// were drawn after its own before it committed: by other transactions, or
// by its own if it has more entries than this.
const sentWindow = 16384

// sentIDs records the IDs a stream sent: every ID at or below floor, and
// those marked in bits among (top-sentWindow, top], where top is the
// highest sent or the Last-Event-ID resumed from; ID n's bit is bit
// n%sentWindow. since is where the stream began: its Last-Event-ID, or
// just below its first entry.
type sentIDs struct {
	started           bool
	since, floor, top uint64
	bits              [sentWindow / 64]uint64
}

// resume counts every ID up to last as sent: the client has them.
func (s *sentIDs) resume(last uint64) {
	*s = sentIDs{started: true, since: last, floor: last, top: last}
}

// begin sets where a stream that did not resume began: newest, the
// newest ID of the audit log when it subscribed. Its first entry sets it
// anew (see add).
func (s *sentIDs) begin(newest uint64) { s.since = newest }

// replayFrom is the ID after which catching up reads the audit log: the
// window, not what came before the stream began.
func (s *sentIDs) replayFrom() uint64 { return max(s.since, s.floor) }

// add records id as sent and reports whether it was not already.
func (s *sentIDs) add(id uint64) bool {
	if id == 0 {
		return false // audit IDs start at 1
	}
	if !s.started {
		// A stream that did not resume begins at its first entry; one
		// below it that commits later is news all the same.
		s.started, s.since, s.top = true, id-1, id-1
		s.floor = s.top - min(s.top, sentWindow)
	}
	if id <= s.floor {
		return false
	}
	if id > s.top {
		// The slots of the IDs the window leaves are those of the IDs it
		// reaches: clear them.
		if id-s.top >= sentWindow {
			clear(s.bits[:])
		} else {
			for n := id; n > s.top; n-- {
				s.bits[n%sentWindow/64] &^= 1 << (n % 64)
			}
		}
		s.top = id
		s.floor = max(s.floor, id-min(id, sentWindow))
	}
	word, bit := &s.bits[id%sentWindow/64], uint64(1)<<(id%64)
	if *word&bit != 0 {
		return false
	}
	*word |= bit
	return true
}

func (st *stream) comment(text string) error {
	if _, err := fmt.Fprintf(st.w, ": %s\n\n", text); err != nil {
		return err
	}
	return st.rc.Flush()
}
