package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

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
}

func (o Op) MarshalJSON() ([]byte, error) {
	return appendOp(nil, o)
}

func AcquireOp(req holdfast.AcquireRequest) Op {
	return Op{"acquire", req, func(r *Result) any { r.Acquire = new(holdfast.AcquireResult); return r.Acquire }}
}

func ReleaseOp(req holdfast.ReleaseRequest) Op {
	return Op{"release", req, func(r *Result) any { r.Release = new(holdfast.ReleaseResult); return r.Release }}
}

func RenewOp(req holdfast.RenewRequest) Op {
	return Op{"renew", req, func(r *Result) any { r.Renew = new(holdfast.RenewResult); return r.Renew }}
}

func VerifyOp(req holdfast.VerifyRequest) Op {
	return Op{"verify", req, func(r *Result) any { r.Verify = new(holdfast.VerifyResult); return r.Verify }}
}

func HeartbeatOp(req holdfast.HeartbeatRequest) Op {
	return Op{"heartbeat", req, func(r *Result) any { r.Heartbeat = new(holdfast.HeartbeatResult); return r.Heartbeat }}
}

func EndSessionOp(req holdfast.EndSessionRequest) Op {
	return Op{"end_session", req, func(r *Result) any { r.EndSession = new(holdfast.EndSessionResult); return r.EndSession }}
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
	var out []Result
	err = c.roundTrip(ctx, http.MethodPost, "/v1/batch", nil, body, func(answer []byte) error {
		var ok bool
		if out, ok = readBatch(answer, ops); ok {
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
	b := append(make([]byte, 0, 16+160*len(ops)), `{"ops":[`...)
	for i, o := range ops {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = appendOp(b, o); err != nil {
			return nil, err
		}
	}
	return append(b, "]}"...), nil
}

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

// readBatch decodes the answer of /v1/batch by hand (see decode.go); ok is
// false when it must be left to decodeBatch, whose results or error are
// then the answer's.
func readBatch(answer []byte, ops []Op) (out []Result, ok bool) {
	r := reader{b: answer}
	out = make([]Result, 0, len(ops))
	top := fields{r: &r, names: batchFields}
	r.object(func(name []byte) {
		if top.known(name) != 0 {
			return
		}
		r.array(func() {
			if len(out) == len(ops) {
				r.fail()
				return
			}
			out = append(out, Result{})
			r.batchResult(&out[len(out)-1], ops[len(out)-1])
		})
	})
	r.ws()
	if r.failed || r.i != len(r.b) || len(out) != len(ops) {
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
