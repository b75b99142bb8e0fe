package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/holdfast/holdfast"
)

// wireError is the "error" object of every error response.
type wireError struct {
	Code        string              `json:"code"`
	Message     string              `json:"message"`
	Field       string              `json:"field"`
	Conflicts   []holdfast.Conflict `json:"conflicts"`
	Reason      holdfast.LostReason `json:"reason"`
	Lock        *holdfast.Lock      `json:"lock"`
	Actor       string              `json:"actor"`
	ForceReason string              `json:"force_reason"`
	Released    []holdfast.Lock     `json:"released"`
}

// errorClass turns one kind of error response back into the root package's
// error.
type errorClass struct {
	status int
	code   string
	build  func(e *wireError, h http.Header) error
}

// errorClasses is the mirror of the server's table: an error response is
// matched by its code, or by its status when it carries none (a proxy's
// error page, say).
var errorClasses = []errorClass{
	{http.StatusBadRequest, "invalid", func(e *wireError, _ http.Header) error {
		return &holdfast.InvalidError{Field: e.Field, Message: e.Message}
	}},
	{http.StatusUnauthorized, "unauthenticated", sentinel(holdfast.ErrUnauthenticated)},
	{http.StatusForbidden, "forbidden", sentinel(holdfast.ErrForbidden)},
	{http.StatusNotFound, "not_found", sentinel(holdfast.ErrNotFound)},
	{http.StatusConflict, "lock_lost", func(e *wireError, _ http.Header) error {
		return &holdfast.LockLostError{Reason: e.Reason, Lock: e.Lock, Actor: e.Actor,
			ForceReason: e.ForceReason, Released: e.Released, Message: e.Message}
	}},
	{http.StatusConflict, "stale_token", func(e *wireError, _ http.Header) error {
		se := &holdfast.StaleTokenError{Message: e.Message}
		if e.Lock != nil {
			se.Lock = *e.Lock
		}
		return se
	}},
	{http.StatusLocked, "locked", func(e *wireError, _ http.Header) error {
		return &holdfast.LockedError{Conflicts: e.Conflicts, Message: e.Message}
	}},
	{http.StatusServiceUnavailable, "unavailable", unavailable},
	// Gateways in front of the server answer these when it is down.
	{http.StatusBadGateway, "", unavailable},
	{http.StatusGatewayTimeout, "", unavailable},
}

func sentinel(err error) func(*wireError, http.Header) error {
	return func(e *wireError, _ http.Header) error {
		if e.Message == "" || e.Message == err.Error() {
			return err
		}
		return fmt.Errorf("%w: %s", err, e.Message)
	}
}

func unavailable(e *wireError, h http.Header) error {
	ue := &holdfast.UnavailableError{RetryAfter: retryAfter(h.Get("Retry-After"))}
	// A holdfast server's message is an UnavailableError's text already:
	// its cause is what follows the text this one would say again.
	msg, _ := strings.CutPrefix(e.Message, unavailableText+": ")
	if msg != "" && msg != unavailableText {
		ue.Err = errors.New(msg)
	}
	return ue
}

// unavailableText is what an UnavailableError without a cause says.
var unavailableText = (&holdfast.UnavailableError{}).Error()

// UnreachableError is a request that got no answer from the server: the
// connection was refused or broke, the name did not resolve, TLS failed, or
// the context ended first. The server may or may not have acted on it;
// every operation of the API can be retried with the same session. Like a
// server's own 503, it is holdfast.ErrUnavailable to errors.Is and a
// *holdfast.UnavailableError to errors.As, so that callers retry both alike;
// its text says which of the two it is.
type UnreachableError struct {
	// URL is the server's base URL, without a password.
	URL string
	// Err is the transport's error.
	Err error
}

func (e *UnreachableError) Error() string {
	cause := e.Err
	// The transport's error names the request's method and URL: the
	// server's URL says enough.
	var ue *url.Error
	if errors.As(cause, &ue) {
		cause = ue.Err
	}
	return fmt.Sprintf("cannot reach the holdfast server at %s: %v", e.URL, cause)
}

// Unwrap makes the error an unavailable one to errors.Is and errors.As.
func (e *UnreachableError) Unwrap() error { return &holdfast.UnavailableError{Err: e.Err} }

// ResponseError is an error response that the API does not define, such as
// a 500 from the server or a proxy.
type ResponseError struct {
	StatusCode int
	Code       string
	Message    string
}

func (e *ResponseError) Error() string {
	s := fmt.Sprintf("holdfast server answered %d %s", e.StatusCode, http.StatusText(e.StatusCode))
	if e.Code != "" {
		s += " (" + e.Code + ")"
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// responseError decodes a non-200 response.
func responseError(status int, h http.Header, body []byte) error {
	var envelope struct {
		Error *wireError `json:"error"`
	}
	if json.Unmarshal(body, &envelope) != nil || envelope.Error == nil {
		envelope.Error = &wireError{Message: describe(body)}
	}
	return mapError(status, h, envelope.Error)
}

// mapError finds the class of an error by code, else by status.
func mapError(status int, h http.Header, e *wireError) error {
	for _, c := range errorClasses {
		if e.Code != "" && c.code == e.Code {
			return c.build(e, h)
		}
	}
	for _, c := range errorClasses {
		if e.Code == "" && c.status == status {
			return c.build(e, h)
		}
	}
	return &ResponseError{StatusCode: status, Code: e.Code, Message: e.Message}
}

// retryAfter reads a Retry-After header: seconds or an HTTP date.
func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := time.Until(t); d > 0 {
			return d
		}
	}
	return 0
}
