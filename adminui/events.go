package adminui

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// events tells the console's pages that locks changed, as server-sent
// events fed by Manager.Subscribe. Pages re-fetch what they show, so an
// event carries only the key and what happened, and a stream that falls
// behind simply says "resync".
func (c *Console) events(w http.ResponseWriter, r *http.Request) {
	select {
	case <-c.closing:
		w.Header().Set("Retry-After", "1")
		http.Error(w, "shutting down", http.StatusServiceUnavailable)
		return
	default:
	}
	rc := http.NewResponseController(w)
	// A stream outlives the server's request timeouts; an error only means
	// the writer has no deadlines to lift.
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})

	entries, cancel := c.mgr.Subscribe("")
	defer func() { cancel() }()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	// The first message tells the page the stream is up.
	if _, err := fmt.Fprint(w, "retry: 2000\nevent: hello\ndata: {}\n\n"); err != nil || rc.Flush() != nil {
		return
	}
	ping := time.NewTicker(c.cfg.EventPing)
	defer ping.Stop()
	for {
		var msg string
		select {
		case <-r.Context().Done():
			return
		case <-c.closing:
			return
		case <-ping.C:
			msg = ": ping\n\n"
		case e, ok := <-entries:
			if !ok {
				// Fell behind: start again and let the page re-read.
				entries, cancel = c.mgr.Subscribe("")
				msg = "event: resync\ndata: {}\n\n"
				break
			}
			data, _ := json.Marshal(struct {
				Key   string `json:"key"`
				Event string `json:"event"`
			}{e.Lock.Key, string(e.Event)})
			msg = "event: lock\ndata: " + string(data) + "\n\n"
		}
		if _, err := fmt.Fprint(w, msg); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
	}
}
