package server

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strconv"

	"github.com/holdfast/holdfast"
)

// errorCodes is the one table from holdfast's sentinels to HTTP statuses and
// API error codes. The Go client maps the codes back to the same sentinels.
var errorCodes = []struct {
	sentinel error
	status   int
	code     string
}{
	{holdfast.ErrInvalid, http.StatusBadRequest, "invalid"},
	{holdfast.ErrUnauthenticated, http.StatusUnauthorized, "unauthenticated"},
	{holdfast.ErrForbidden, http.StatusForbidden, "forbidden"},
	{holdfast.ErrNotFound, http.StatusNotFound, "not_found"},
	{holdfast.ErrLockLost, http.StatusConflict, "lock_lost"},
	{holdfast.ErrStaleToken, http.StatusConflict, "stale_token"},
	{holdfast.ErrLocked, http.StatusLocked, "locked"},
	{holdfast.ErrUnavailable, http.StatusServiceUnavailable, "unavailable"},
}

// codeInternal answers errors that match no sentinel: a bug, not a state
// of the locks, so the client is not told more than that.
const codeInternal = "internal"

// classify returns the status and code of err.
func classify(err error) (status int, code string) {
	for _, c := range errorCodes {
		if errors.Is(err, c.sentinel) {
			return c.status, c.code
		}
	}
	return http.StatusInternalServerError, codeInternal
}

// callerGone reports whether err is the cancellation of its caller's
// context: the caller gave up, which is no fault of the store's, though
// the operation comes back as unavailable.
func callerGone(err error) bool { return errors.Is(err, context.Canceled) }

// apiError is the "error" object of every error body.
type apiError struct {
	Code    string `json:"code"`
	Message string `json:"message"`

	Field       string              `json:"field,omitempty"`
	Conflicts   []holdfast.Conflict `json:"conflicts,omitempty"`
	Reason      holdfast.LostReason `json:"reason,omitempty"`
	Lock        *holdfast.Lock      `json:"lock,omitempty"`
	Actor       string              `json:"actor,omitempty"`
	ForceReason string              `json:"force_reason,omitempty"`
	Released    []holdfast.Lock     `json:"released,omitzero"` // [] for an ended session

	status     int
	retryAfter int // seconds; only for unavailable
}

type errorBody struct {
	Error *apiError `json:"error"`
}

// toAPIError turns err into the error object of API.md with the extra
// fields its code carries.
func toAPIError(err error) *apiError {
	status, code := classify(err)
	e := &apiError{Code: code, Message: err.Error(), status: status}
	if status == http.StatusInternalServerError {
		e.Message = "internal server error"
	}
	var redacted *redactedError
	if errors.As(err, &redacted) {
		e.Message = redacted.msg
	}

	var invalid *holdfast.InvalidError
	var locked *holdfast.LockedError
	var lost *holdfast.LockLostError
	var stale *holdfast.StaleTokenError
	var unavailable *holdfast.UnavailableError
	switch {
	case errors.As(err, &invalid):
		e.Field = invalid.Field
	case errors.As(err, &locked):
		e.Conflicts = locked.Conflicts
	case errors.As(err, &lost):
		e.Reason = lost.Reason
		e.Lock = lost.Lock
		e.Actor = lost.Actor
		e.ForceReason = lost.ForceReason
		e.Released = lost.Released
		if e.Released == nil && (lost.Reason == holdfast.LostSessionEnded || lost.Reason == holdfast.LostSessionExpired) {
			e.Released = []holdfast.Lock{}
		}
	case errors.As(err, &stale):
		l := stale.Lock
		e.Lock = &l
	case errors.As(err, &unavailable):
		e.retryAfter = int(math.Ceil(unavailable.RetryAfter.Seconds()))
	}
	if status == http.StatusServiceUnavailable && e.retryAfter < 1 {
		e.retryAfter = 1
	}
	return e
}

// redactedError answers with msg alone, where the whole of err would tell
// callers who may be anyone (internal addresses, paths) more than they
// should know; the request log still gets all of err.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.err.Error() }
func (e *redactedError) Unwrap() error { return e.err }

// writeError answers err with its status, code and error body.
func writeError(w http.ResponseWriter, err error) {
	if rec, ok := w.(*recorder); ok {
		rec.err = err
	}
	var notAllowed *methodNotAllowedError
	if errors.As(err, &notAllowed) {
		w.Header().Set("Allow", notAllowed.allow)
		writeJSON(w, http.StatusMethodNotAllowed, &errorBody{Error: &apiError{Code: "method_not_allowed", Message: err.Error()}})
		return
	}
	e := toAPIError(err)
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.retryAfter))
	}
	writeJSON(w, e.status, &errorBody{Error: e})
}

// invalidf is a 400 invalid naming the field at fault.
func invalidf(field, msg string) error {
	return &holdfast.InvalidError{Field: field, Message: msg}
}
