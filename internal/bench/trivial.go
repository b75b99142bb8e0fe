package bench

import (
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"time"
)

// TrivialHandler is the transport ceiling: it answers holdfast's acquire,
// release, heartbeat and batch requests with fixed, well-formed answers of
// the same shape, after reading and decoding each body as holdfast would,
// but locks nothing and writes nothing. No lock server over the same HTTP
// can beat it.
func TrivialHandler() http.Handler { return trivialHandler(nil) }

// DurableTrivialHandler is the trivial handler made durable the simplest
// way: before it answers an acquire, a release or a batch, it writes the
// request's body to a log in dir and waits for the log's group commit
// (groupLog). Heartbeats it answers at once, as holdfast syncs none. The
// closer stops its log.
func DurableTrivialHandler(dir string) (http.Handler, io.Closer, error) {
	l, err := openGroupLog(filepath.Join(dir, "trivial.log"), groupLogSize)
	if err != nil {
		return nil, nil, err
	}
	return trivialHandler(l), l, nil
}

// WaitingTrivialHandler is the durable trivial handler without its disk:
// it answers each group of acquires and releases after wait, writing
// nothing, as if the disk synced in that time at no cost in CPU. It
// measures what waiting for a group commit alone costs a server.
func WaitingTrivialHandler(wait time.Duration) (http.Handler, io.Closer) {
	l := waitingGroupLog(wait)
	return trivialHandler(l), l
}

// trivialHandler is the trivial handler, durable when log is not nil.
func trivialHandler(log *groupLog) http.Handler {
	now := time.Now().UTC().Format("2006-01-02T15:04:05.000Z")
	lock := `{"key":"order/1","requested_key":"order/1","mode":"exclusive","owner":{"session":"s","user":"u"},` +
		`"acquired_at":"` + now + `","expires_at":"` + now + `","token":1}`
	answers := map[string]string{
		"acquire":     `{"locks":[` + lock + `]}`,
		"release":     `{"released":[` + lock + `],"not_held":[]}`,
		"heartbeat":   `{"session":{"id":"s","user":"u","last_seen":"` + now + `","locks":1},"lost":[]}`,
		"renew":       `{"locks":[` + lock + `]}`,
		"verify":      `{"lock":` + lock + `}`,
		"end_session": `{"released":[]}`,
	}
	mux := http.NewServeMux()
	// durable answers 503 if the body could not be made durable.
	durable := func(w http.ResponseWriter, body []byte) bool {
		if log == nil {
			return true
		}
		if err := log.append(body); err != nil {
			http.Error(w, `{"error":{"code":"unavailable","message":"the log failed"}}`, http.StatusServiceUnavailable)
			return false
		}
		return true
	}
	single := func(op string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			var req trivialRequest
			body, ok := decode(w, r, &req)
			if !ok || op != "heartbeat" && !durable(w, body) {
				return
			}
			writeTrivial(w, answers[op])
		}
	}
	mux.HandleFunc("POST /v1/locks/acquire", single("acquire"))
	mux.HandleFunc("POST /v1/locks/release", single("release"))
	mux.HandleFunc("POST /v1/sessions/heartbeat", single("heartbeat"))
	mux.HandleFunc("POST /v1/batch", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Ops []struct {
				Op   string         `json:"op"`
				Body trivialRequest `json:"body"`
			} `json:"ops"`
		}
		body, ok := decode(w, r, &req)
		if !ok {
			return
		}
		heartbeats := len(req.Ops) > 0 // only: holdfast syncs none of them
		for _, op := range req.Ops {
			heartbeats = heartbeats && op.Op == "heartbeat"
		}
		if !heartbeats && !durable(w, body) {
			return
		}
		out := []byte(`{"results":[`)
		for i, op := range req.Ops {
			if i > 0 {
				out = append(out, ',')
			}
			out = append(out, `{"status":200,"body":`...)
			out = append(out, answers[op.Op]...)
			out = append(out, '}')
		}
		out = append(out, "]}"...)
		w.Header().Set("Content-Type", "application/json")
		w.Write(out)
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) { writeTrivial(w, `{"status":"ok"}`) })
	return mux
}

// trivialRequest has the fields of the requests the handler answers.
type trivialRequest struct {
	Keys    []string        `json:"keys"`
	Session string          `json:"session"`
	Owner   json.RawMessage `json:"owner"`
	TTL     float64         `json:"ttl_seconds"`
}

func decode(w http.ResponseWriter, r *http.Request, v any) ([]byte, bool) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	if err == nil {
		err = json.Unmarshal(body, v)
	}
	if err != nil {
		http.Error(w, `{"error":{"code":"invalid","message":"bad body"}}`, http.StatusBadRequest)
		return nil, false
	}
	return body, true
}

func writeTrivial(w http.ResponseWriter, body string) {
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, body)
}
