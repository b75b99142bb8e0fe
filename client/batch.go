package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"

	"github.com/holdfast/holdfast"
)

// Op is one operation of a batch; build it with AcquireOp, ReleaseOp,
// RenewOp, VerifyOp, HeartbeatOp or EndSessionOp.
type Op struct {
	name string
	body any
	// result points a Result's field for this kind of op at a new value
	// and returns it, for a successful body to be decoded into.
	result func(*Result) any
	// echo holds strings of the request that its answer repeats (keys, a
	// session, a user): the reader hands these out instead of copies.
	echo echo
}

type echo struct {
	keys []string
	strs [3]string
}

func (o Op) MarshalJSON() ([]byte, error) {
	return appendOp(nil, o)
}

// The op functions without a body serve the coalescer, which writes the
// body where the batch is gathered.

func AcquireOp(req holdfast.AcquireRequest) Op { o := acquireOp(req); o.body = req; return o }

func acquireOp(req holdfast.AcquireRequest) Op {
	return Op{name: "acquire", result: acquireResult, echo: echo{req.Keys, [3]string{req.Owner.Session, req.Owner.User}}}
}

func ReleaseOp(req holdfast.ReleaseRequest) Op { o := releaseOp(req); o.body = req; return o }

func releaseOp(req holdfast.ReleaseRequest) Op {
	return Op{name: "release", result: releaseResult, echo: echo{req.Keys, [3]string{req.Session}}}
}

func RenewOp(req holdfast.RenewRequest) Op { o := renewOp(req); o.body = req; return o }

func renewOp(req holdfast.RenewRequest) Op {
	return Op{name: "renew", result: renewResult, echo: echo{req.Keys, [3]string{req.Session}}}
}

func VerifyOp(req holdfast.VerifyRequest) Op { o := verifyOp(req); o.body = req; return o }

func verifyOp(req holdfast.VerifyRequest) Op {
	return Op{name: "verify", result: verifyResult, echo: echo{strs: [3]string{req.Session, req.Key}}}
}

func HeartbeatOp(req holdfast.HeartbeatRequest) Op { o := heartbeatOp(req); o.body = req; return o }

func heartbeatOp(req holdfast.HeartbeatRequest) Op {
	return Op{name: "heartbeat", result: heartbeatResult, echo: echo{strs: [3]string{req.Session}}}
}

func EndSessionOp(req holdfast.EndSessionRequest) Op { o := endSessionOp(req); o.body = req; return o }

func endSessionOp(req holdfast.EndSessionRequest) Op {
	return Op{name: "end_session", result: endSessionResult, echo: echo{strs: [3]string{req.Session}}}
}

func acquireResult(r *Result) any   { r.Acquire = new(holdfast.AcquireResult); return r.Acquire }
func releaseResult(r *Result) any   { r.Release = new(holdfast.ReleaseResult); return r.Release }
func renewResult(r *Result) any     { r.Renew = new(holdfast.RenewResult); return r.Renew }
func verifyResult(r *Result) any    { r.Verify = new(holdfast.VerifyResult); return r.Verify }
func heartbeatResult(r *Result) any { r.Heartbeat = new(holdfast.HeartbeatResult); return r.Heartbeat }
func endSessionResult(r *Result) any {
	r.EndSession = new(holdfast.EndSessionResult)
	return r.EndSession
}

// Result is the outcome of one operation of a batch: Err, mapped exactly as
// the single call's error would be, or else the field named after the
// operation.
type Result struct {
	// Status is the HTTP status the operation would have had on its own.
	Status int
	Err    error

	Acquire    *holdfast.AcquireResult
	Release    *holdfast.ReleaseResult
	Renew      *holdfast.RenewResult
	Verify     *holdfast.VerifyResult
	Heartbeat  *holdfast.HeartbeatResult
	EndSession *holdfast.EndSessionResult
}

// Batch sends ops in one POST /v1/batch and returns one Result per op, in
// order. Each op succeeds or fails on its own; the error returned here is
// for the batch as a whole (malformed envelope, transport, auth).
func (c *Client) Batch(ctx context.Context, ops []Op) ([]Result, error) {
	body, err := batchBody(ops)
	if err != nil {
		return nil, fmt.Errorf("encoding /v1/batch request: %w", err)
	}
	return c.sendBatch(ctx, body, ops, nil)
}

// sendBatch sends body, the request of /v1/batch for ops, and appends
// their results to out.
func (c *Client) sendBatch(ctx context.Context, body []byte, ops []Op, out []Result) ([]Result, error) {
	err := c.roundTrip(ctx, http.MethodPost, "/v1/batch", nil, body, func(answer []byte) error {
		var ok bool
		if out, ok = readBatch(answer, ops, out); ok {
			return nil
		}
		var err error
		out, err = decodeBatch(answer, ops)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// batchBody writes the request of /v1/batch.
func batchBody(ops []Op) ([]byte, error) {
	// Room for a typical op, so that the buffer rarely grows.
	b := append(make([]byte, 0, 16+160*len(ops)), batchStart...)
	for i, o := range ops {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = appendOp(b, o); err != nil {
			return nil, err
		}
	}
	return append(b, batchEnd...), nil
}

const (
	batchStart = `{"ops":[`
	batchEnd   = "]}"
)

// decodeBatch decodes the answer of /v1/batch with encoding/json.
func decodeBatch(answer []byte, ops []Op) ([]Result, error) {
	var res struct {
		Results []struct {
			Status int             `json:"status"`
			Body   json.RawMessage `json:"body"`
			Error  *wireError      `json:"error"`
		} `json:"results"`
	}
	if err := json.Unmarshal(answer, &res); err != nil {
		return nil, fmt.Errorf("decoding /v1/batch response: %w", err)
	}
	if len(res.Results) != len(ops) {
		return nil, fmt.Errorf("/v1/batch answered %d results for %d ops", len(res.Results), len(ops))
	}
	out := make([]Result, len(ops))
	for i, r := range res.Results {
		out[i].Status = r.Status
		if r.Status != http.StatusOK {
			e := r.Error
			if e == nil {
				e = &wireError{}
			}
			out[i].Err = mapError(r.Status, http.Header{}, e)
			continue
		}
		if err := json.Unmarshal(r.Body, ops[i].result(&out[i])); err != nil {
			return nil, fmt.Errorf("/v1/batch result %d (%s): %w", i, ops[i].name, err)
		}
	}
	return out, nil
}

// readBatch decodes the answer of /v1/batch by hand (see decode.go),
// appending the results to out; ok is false when it must be left to
// decodeBatch, whose results or error are then the answer's.
func readBatch(answer []byte, ops []Op, out []Result) (_ []Result, ok bool) {
	r := reader{b: answer}
	start := len(out)
	out = slices.Grow(out, len(ops))
	top := fields{r: &r, names: batchFields}
	r.object(func(name []byte) {
		if top.known(name) != 0 {
			return
		}
		r.array(func() {
			i := len(out) - start
			if i == len(ops) {
				r.fail()
				return
			}
			out = append(out, Result{})
			r.echo = &ops[i].echo
			r.batchResult(&out[len(out)-1], ops[i])
		})
	})
	r.ws()
	if r.failed || r.i != len(r.b) || len(out)-start != len(ops) {
		return nil, false
	}
	return out, true
}

var (
	batchFields  = []string{"results"}
	resultFields = []string{"status", "body", "error"}
)

// batchResult reads one result of a batch into res. Whatever decodeBatch
// would fail on, it fails on.
func (r *reader) batchResult(res *Result, op Op) {
	f := fields{r: r, names: resultFields}
	var (
		body, errBody []byte
		out           any // what op.result gave for the body
		read          bool
	)
	r.object(func(name []byte) {
		switch f.known(name) {
		case 0:
			res.Status = r.int()
		case 1:
			// The server writes the status first: a success's body is read
			// in place rather than skipped and read again.
			if f.seen&1 != 0 && res.Status == http.StatusOK {
				out = op.result(res)
				if read = r.result(out); read {
					return
				}
			}
			body = r.raw()
		case 2:
			errBody = r.raw()
		}
	})
	switch {
	case r.failed:
	case res.Status != http.StatusOK:
		var e wireError
		if errBody != nil && json.Unmarshal(errBody, &e) != nil {
			r.fail()
			return
		}
		res.Err = mapError(res.Status, http.Header{}, &e)
	case errBody != nil:
		// An error beside a success: rare enough to leave to decodeBatch.
		r.fail()
	case read:
	case body == nil:
		r.fail()
	default:
		if out == nil {
			out = op.result(res)
		}
		if decodeResult(body, out) != nil {
			r.fail()
		}
	}
}
