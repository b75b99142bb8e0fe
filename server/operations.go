package server

import (
	"context"
	_ "embed"
	"errors"
	"net/http"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/internal/jsonwire"
)

// readyTimeout bounds how long /readyz waits for the store.
const readyTimeout = 5 * time.Second

// healthz answers while the process can serve HTTP at all.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// storeUnavailable is all /readyz tells a caller without a token of why
// it answers 503; the request log has the store's error.
const storeUnavailable = "lock store unavailable, retry later"

// readyz answers 503 while the store cannot confirm durability, so a load
// balancer sends lock traffic elsewhere.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	if err := s.mgr.Ping(ctx); err != nil {
		if !errors.Is(err, holdfast.ErrUnavailable) {
			err = &holdfast.UnavailableError{Err: err}
		}
		if s.auth.authorize(r, Reader) != nil {
			// Anyone may ask, and the store's error can name internal
			// addresses; a caller with any token (or on loopback, where
			// a server without tokens lets all in) is trusted with it.
			err = &redactedError{msg: storeUnavailable, err: err}
		}
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

//go:embed openapi.json
var openAPI []byte

func serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	w.Header()["Content-Type"] = jsonwire.MediaType
	w.Write(openAPI)
}
