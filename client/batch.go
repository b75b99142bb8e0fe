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
	return json.Marshal(struct {
		Op   string `json:"op"`
		Body any    `json:"body"`
	}{o.name, o.body})
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
	var res struct {
		Results []struct {
			Status int             `json:"status"`
			Body   json.RawMessage `json:"body"`
			Error  *wireError      `json:"error"`
		} `json:"results"`
	}
	if err := c.post(ctx, "/v1/batch", struct {
		Ops []Op `json:"ops"`
	}{ops}, &res); err != nil {
		return nil, err
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
