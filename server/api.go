package server

import (
	"context"
	"fmt"

	"github.com/holdfast/holdfast"
)

// opFunc is one POST operation: a JSON body in, a JSON-able result out.
// The single endpoints and /v1/batch share them, so a batched operation
// behaves exactly as its endpoint.
type opFunc func(ctx context.Context, body []byte) (any, error)

// decodeFunc is a batchable operation in two steps: decoding its body,
// then running it. /v1/batch decodes every operation before it runs them
// in one store transaction, so no decoding happens while the store is held.
type decodeFunc func(body []byte) (runFunc, error)

type runFunc func(ctx context.Context) (any, error)

// decoded is the operation of an endpoint whose decoder batch shares:
// decode the body, then run what it decoded.
func decoded(decode decodeFunc) opFunc {
	return func(ctx context.Context, body []byte) (any, error) {
		run, err := decode(body)
		if err != nil {
			return nil, err
		}
		return run(ctx)
	}
}

// queryFunc is one GET operation over the query string (see newQuery).
type queryFunc func(ctx context.Context, rawQuery string) (any, error)

// acquireResponse always carries holders for a read that took no lock,
// even when nobody holds the keys.
type acquireResponse struct {
	Locks   []holdfast.Lock  `json:"locks"`
	Holders *[]holdfast.Lock `json:"holders,omitempty"`
}

func (s *Server) decodeAcquire(body []byte) (runFunc, error) {
	var req holdfast.AcquireRequest
	if err := readRequest(body, &req, acquireField); err != nil {
		return nil, err
	}
	return func(ctx context.Context) (any, error) {
		res, err := s.mgr.Acquire(ctx, req)
		if err != nil {
			return nil, err
		}
		out := acquireResponse{Locks: nonNil(res.Locks)}
		if res.Holders != nil || (req.Intent == holdfast.IntentRead && len(res.Locks) == 0) {
			holders := nonNil(res.Holders)
			out.Holders = &holders
		}
		return &out, nil
	}, nil
}

func (s *Server) decodeRelease(body []byte) (runFunc, error) {
	var req holdfast.ReleaseRequest
	if err := readRequest(body, &req, releaseField); err != nil {
		return nil, err
	}
	return func(ctx context.Context) (any, error) {
		res, err := s.mgr.Release(ctx, req)
		if err != nil {
			return nil, err
		}
		res.Released, res.NotHeld = nonNil(res.Released), nonNil(res.NotHeld)
		return (*releaseResponse)(res), nil
	}, nil
}

func (s *Server) decodeRenew(body []byte) (runFunc, error) {
	var req holdfast.RenewRequest
	if err := readRequest(body, &req, renewField); err != nil {
		return nil, err
	}
	return func(ctx context.Context) (any, error) {
		res, err := s.mgr.Renew(ctx, req)
		if err != nil {
			return nil, err
		}
		res.Locks = nonNil(res.Locks)
		return (*renewResponse)(res), nil
	}, nil
}

func (s *Server) decodeVerify(body []byte) (runFunc, error) {
	var req holdfast.VerifyRequest
	if err := readRequest(body, &req, verifyField); err != nil {
		return nil, err
	}
	return func(ctx context.Context) (any, error) {
		res, err := s.mgr.Verify(ctx, req)
		if err != nil {
			return nil, err
		}
		return (*verifyResponse)(res), nil
	}, nil
}

func (s *Server) decodeHeartbeat(body []byte) (runFunc, error) {
	var req holdfast.HeartbeatRequest
	if err := readRequest(body, &req, heartbeatField); err != nil {
		return nil, err
	}
	return func(ctx context.Context) (any, error) {
		res, err := s.mgr.Heartbeat(ctx, req)
		if err != nil {
			return nil, err
		}
		res.Lost = nonNil(res.Lost)
		return (*heartbeatResponse)(res), nil
	}, nil
}

func (s *Server) decodeEndSession(body []byte) (runFunc, error) {
	var req holdfast.EndSessionRequest
	if err := readRequest(body, &req, endSessionField); err != nil {
		return nil, err
	}
	return func(ctx context.Context) (any, error) {
		res, err := s.mgr.EndSession(ctx, req)
		if err != nil {
			return nil, err
		}
		res.Released = nonNil(res.Released)
		return (*endSessionResponse)(res), nil
	}, nil
}

func (s *Server) setAggregate(ctx context.Context, body []byte) (any, error) {
	var req holdfast.Aggregate
	if err := decodeJSON(body, &req); err != nil {
		return nil, err
	}
	return s.mgr.SetAggregate(ctx, req)
}

func (s *Server) removeAggregate(ctx context.Context, body []byte) (any, error) {
	var req holdfast.RemoveAggregateRequest
	if err := decodeJSON(body, &req); err != nil {
		return nil, err
	}
	if err := s.mgr.RemoveAggregate(ctx, req); err != nil {
		return nil, err
	}
	return req, nil
}

func (s *Server) forceRelease(ctx context.Context, body []byte) (any, error) {
	var req holdfast.ForceReleaseRequest
	if err := decodeJSON(body, &req); err != nil {
		return nil, err
	}
	res, err := s.mgr.ForceRelease(ctx, req)
	if err != nil {
		return nil, err
	}
	res.Released = nonNil(res.Released)
	return res, nil
}

func (s *Server) listLocks(ctx context.Context, rawQuery string) (any, error) {
	q := newQuery(rawQuery, "key", "prefix", "session", "user", "limit", "after")
	lq := holdfast.LockQuery{
		Key: q.str("key"), Prefix: q.str("prefix"), Session: q.str("session"), User: q.str("user"),
		Limit: q.int("limit"), After: q.str("after"),
	}
	if q.err != nil {
		return nil, q.err
	}
	page, err := s.mgr.Locks(ctx, lq)
	if err != nil {
		return nil, err
	}
	page.Locks = nonNil(page.Locks)
	return (*lockPageResponse)(page), nil
}

func (s *Server) listSessions(ctx context.Context, rawQuery string) (any, error) {
	q := newQuery(rawQuery, "session", "user", "limit", "after")
	sq := holdfast.SessionQuery{Session: q.str("session"), User: q.str("user"), Limit: q.int("limit"), After: q.str("after")}
	if q.err != nil {
		return nil, q.err
	}
	page, err := s.mgr.Sessions(ctx, sq)
	if err != nil {
		return nil, err
	}
	page.Sessions = nonNil(page.Sessions)
	return page, nil
}

func (s *Server) listAggregates(ctx context.Context, rawQuery string) (any, error) {
	q := newQuery(rawQuery, "root")
	root := q.str("root")
	if q.err != nil {
		return nil, q.err
	}
	list, err := s.mgr.Aggregates(ctx, root)
	if err != nil {
		return nil, err
	}
	list.Aggregates = nonNil(list.Aggregates)
	return list, nil
}

func (s *Server) audit(ctx context.Context, rawQuery string) (any, error) {
	q := newQuery(rawQuery, "key", "session", "user", "event", "since", "order", "limit", "after")
	aq := holdfast.AuditQuery{
		Key: q.str("key"), Session: q.str("session"), User: q.str("user"), Event: holdfast.Event(q.str("event")),
		Since: q.time("since"), Limit: q.int("limit"), After: q.str("after"),
	}
	switch order := q.str("order"); order {
	case "", "oldest":
	case "newest":
		aq.Newest = true
	default:
		if q.err == nil {
			q.err = invalidf("order", fmt.Sprintf("order: want oldest or newest, not %q", order))
		}
	}
	if q.err != nil {
		return nil, q.err
	}
	page, err := s.mgr.Audit(ctx, aq)
	if err != nil {
		return nil, err
	}
	page.Entries = nonNil(page.Entries)
	return page, nil
}

// nonNil makes empty lists travel as [] rather than null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
