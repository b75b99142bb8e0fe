package client

import (
	"context"
	"net/url"
	"time"

	"github.com/holdfast/holdfast"
)

// Acquire calls POST /v1/locks/acquire. A refusal is a
// *holdfast.LockedError naming every holder.
func (c *Client) Acquire(ctx context.Context, req holdfast.AcquireRequest) (*holdfast.AcquireResult, error) {
	if c.coalesce != nil {
		r := c.coalesce.do(ctx, acquireOp(req), func(b []byte) []byte { return appendAcquire(b, req) })
		return r.Acquire, r.Err
	}
	var res holdfast.AcquireResult
	if err := c.post(ctx, "/v1/locks/acquire", req, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// Release calls POST /v1/locks/release.
func (c *Client) Release(ctx context.Context, req holdfast.ReleaseRequest) (*holdfast.ReleaseResult, error) {
	if c.coalesce != nil {
		r := c.coalesce.do(ctx, releaseOp(req), func(b []byte) []byte { return appendRelease(b, req) })
		return r.Release, r.Err
	}
	var res holdfast.ReleaseResult
	if err := c.post(ctx, "/v1/locks/release", req, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// Renew calls POST /v1/locks/renew.
func (c *Client) Renew(ctx context.Context, req holdfast.RenewRequest) (*holdfast.RenewResult, error) {
	if c.coalesce != nil {
		r := c.coalesce.do(ctx, renewOp(req), func(b []byte) []byte { return appendRenew(b, req) })
		return r.Renew, r.Err
	}
	var res holdfast.RenewResult
	if err := c.post(ctx, "/v1/locks/renew", req, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// Verify calls POST /v1/locks/verify.
func (c *Client) Verify(ctx context.Context, req holdfast.VerifyRequest) (*holdfast.VerifyResult, error) {
	if c.coalesce != nil {
		r := c.coalesce.do(ctx, verifyOp(req), func(b []byte) []byte { return appendVerify(b, req) })
		return r.Verify, r.Err
	}
	var res holdfast.VerifyResult
	if err := c.post(ctx, "/v1/locks/verify", req, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// Locks calls GET /v1/locks: one page; follow Next for more.
func (c *Client) Locks(ctx context.Context, q holdfast.LockQuery) (*holdfast.LockPage, error) {
	v := url.Values{}
	setIf(v, "key", q.Key)
	setIf(v, "prefix", q.Prefix)
	setIf(v, "session", q.Session)
	setIf(v, "user", q.User)
	var res holdfast.LockPage
	if err := c.get(ctx, "/v1/locks", pageQuery(v, q.Limit, q.After), &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// Heartbeat calls POST /v1/sessions/heartbeat.
func (c *Client) Heartbeat(ctx context.Context, req holdfast.HeartbeatRequest) (*holdfast.HeartbeatResult, error) {
	if c.coalesce != nil {
		r := c.coalesce.do(ctx, heartbeatOp(req), func(b []byte) []byte { return appendHeartbeat(b, req) })
		return r.Heartbeat, r.Err
	}
	var res holdfast.HeartbeatResult
	if err := c.post(ctx, "/v1/sessions/heartbeat", req, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// EndSession calls POST /v1/sessions/end.
func (c *Client) EndSession(ctx context.Context, req holdfast.EndSessionRequest) (*holdfast.EndSessionResult, error) {
	if c.coalesce != nil {
		r := c.coalesce.do(ctx, endSessionOp(req), func(b []byte) []byte { return appendEndSession(b, req) })
		return r.EndSession, r.Err
	}
	var res holdfast.EndSessionResult
	if err := c.post(ctx, "/v1/sessions/end", req, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// Sessions calls GET /v1/sessions.
func (c *Client) Sessions(ctx context.Context, q holdfast.SessionQuery) (*holdfast.SessionPage, error) {
	v := url.Values{}
	setIf(v, "session", q.Session)
	setIf(v, "user", q.User)
	var res holdfast.SessionPage
	if err := c.get(ctx, "/v1/sessions", pageQuery(v, q.Limit, q.After), &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// SetAggregate calls POST /v1/aggregates.
func (c *Client) SetAggregate(ctx context.Context, a holdfast.Aggregate) (*holdfast.Aggregate, error) {
	var res holdfast.Aggregate
	if err := c.post(ctx, "/v1/aggregates", a, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// RemoveAggregate calls POST /v1/aggregates/remove.
func (c *Client) RemoveAggregate(ctx context.Context, req holdfast.RemoveAggregateRequest) error {
	return c.post(ctx, "/v1/aggregates/remove", req, nil)
}

// Aggregates calls GET /v1/aggregates; root "" lists every mapping.
func (c *Client) Aggregates(ctx context.Context, root string) (*holdfast.AggregateList, error) {
	v := url.Values{}
	setIf(v, "root", root)
	var res holdfast.AggregateList
	if err := c.get(ctx, "/v1/aggregates", v, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// ForceRelease calls POST /v1/admin/force-release (admin role).
func (c *Client) ForceRelease(ctx context.Context, req holdfast.ForceReleaseRequest) (*holdfast.ForceReleaseResult, error) {
	var res holdfast.ForceReleaseResult
	if err := c.post(ctx, "/v1/admin/force-release", req, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// Audit calls GET /v1/admin/audit (admin role).
func (c *Client) Audit(ctx context.Context, q holdfast.AuditQuery) (*holdfast.AuditPage, error) {
	v := url.Values{}
	setIf(v, "key", q.Key)
	setIf(v, "session", q.Session)
	setIf(v, "user", q.User)
	setIf(v, "event", string(q.Event))
	if q.Newest {
		v.Set("order", "newest")
	}
	if !q.Since.IsZero() {
		v.Set("since", q.Since.UTC().Format(time.RFC3339Nano))
	}
	var res holdfast.AuditPage
	if err := c.get(ctx, "/v1/admin/audit", pageQuery(v, q.Limit, q.After), &res); err != nil {
		return nil, err
	}
	return &res, nil
}
