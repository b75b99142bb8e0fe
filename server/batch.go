package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/holdfast/holdfast"
)

// MaxBatchOps is the most operations one /v1/batch request may carry.
const MaxBatchOps = 1000

type batchRequest struct {
	Ops []json.RawMessage `json:"ops"`
}

// batchOp is one operation of a batch; err says why it could not be read,
// which fails it alone.
type batchOp struct {
	Op   string          `json:"op"`
	Body json.RawMessage `json:"body"`
	err  error
}

// batchResult is one op's outcome: status and body, or status and error.
type batchResult struct {
	Status int       `json:"status"`
	Body   any       `json:"body,omitempty"`
	Error  *apiError `json:"error,omitempty"`
}

type batchResponse struct {
	Results []batchResult `json:"results"`
}

// batch runs each op in order exactly as its single endpoint would. Only a
// malformed envelope fails the whole request; a malformed op fails alone.
func (s *Server) batch(ctx context.Context, body []byte) (any, error) {
	ops, err := readBatch(body)
	if err != nil {
		return nil, err
	}
	if len(ops) == 0 || len(ops) > MaxBatchOps {
		return nil, invalidf("ops", fmt.Sprintf("ops: want 1 to %d operations, not %d", MaxBatchOps, len(ops)))
	}
	res := batchResponse{Results: make([]batchResult, len(ops))}
	fail := func(i int, err error) {
		e := toAPIError(err)
		res.Results[i] = batchResult{Status: e.status, Error: e}
	}
	runs := make([]runFunc, len(ops))
	for i, op := range ops {
		run, err := s.decodeOne(i, op)
		if err != nil {
			fail(i, err)
			continue
		}
		runs[i] = run
	}
	// One store transaction, so one durable commit, serves the batch.
	err = s.mgr.Batch(ctx, func(ctx context.Context) {
		for i, run := range runs {
			if run == nil {
				continue
			}
			out, err := run(ctx)
			if err != nil {
				fail(i, err)
				continue
			}
			res.Results[i] = batchResult{Status: http.StatusOK, Body: out}
		}
	})
	if err != nil {
		// Nothing was committed: every answer that rested on the store is
		// void. Only malformed operations keep their own answer.
		for i, r := range res.Results {
			if r.Status != http.StatusBadRequest {
				fail(i, err)
			}
		}
	}
	return &res, nil
}

// readBatch reads the ops of a batch: by hand when it can, else by
// encoding/json, envelope first, then each op, so that a malformed op
// fails alone.
func readBatch(body []byte) ([]batchOp, error) {
	r := jsonReader{b: body}
	var ops []batchOp
	r.object(func(name []byte) { batchField(&r, &ops, name) })
	if r.end() {
		return ops, nil
	}
	return decodeBatch(body)
}

// decodeBatch is readBatch by encoding/json.
func decodeBatch(body []byte) ([]batchOp, error) {
	var req batchRequest
	if err := decodeJSON(body, &req); err != nil {
		return nil, err
	}
	ops := make([]batchOp, len(req.Ops))
	for i, raw := range req.Ops {
		if err := decodeJSON(raw, &ops[i]); err != nil {
			ops[i] = batchOp{err: err}
		}
	}
	return ops, nil
}

// decodeOne decodes operation i of a batch, ready to run.
func (s *Server) decodeOne(i int, op batchOp) (runFunc, error) {
	if op.err != nil {
		var inv *holdfast.InvalidError
		if errors.As(op.err, &inv) {
			inv.Field = fmt.Sprintf("ops[%d].%s", i, inv.Field)
		}
		return nil, op.err
	}
	decode, ok := s.ops[op.Op]
	if !ok {
		return nil, invalidf(fmt.Sprintf("ops[%d].op", i), fmt.Sprintf("ops[%d].op: unknown operation %q (want %s)", i, op.Op, s.opNames()))
	}
	return decode(op.Body)
}

func (s *Server) opNames() string {
	names := make([]string, 0, len(s.ops))
	for name := range s.ops {
		names = append(names, name)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}
