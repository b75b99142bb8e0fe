package bench

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/client"
)

// target is a system that locks keys for owners: holdfast, or a peer that
// users would pick instead. Every target is driven by the same goroutines
// and timers; only these calls differ.
type target interface {
	// acquire locks every key for owner, all or nothing; granted is false
	// when another owner holds one of them.
	acquire(ctx context.Context, owner string, keys []string) (granted bool, err error)
	release(ctx context.Context, owner string, keys []string) error
	close() error
}

// heartbeater is a target that keeps sessions alive. Each heartbeat asks
// for the idle timeout idle (zero: none), as an editor's client repeats
// it: the same timeout again is activity only.
type heartbeater interface {
	heartbeat(ctx context.Context, session string, idle time.Duration) error
	// heartbeatBatch keeps many sessions alive in one request.
	heartbeatBatch(ctx context.Context, sessions []string, idle time.Duration) error
}

// lockTTL is the lifetime every target gives a lock: far longer than a
// row, so that no lock expires while it is measured.
const lockTTL = 5 * time.Minute

// rowEnder is a target that lets go of what a row left behind once the
// row has ended (etcd's leases, which expire once granted).
type rowEnder interface {
	endRow()
}

// httpTarget drives an HTTP server that speaks holdfast's API (holdfast
// itself, or the trivial handler) through the Go client.
type httpTarget struct {
	c *client.Client
}

// newHTTPClient returns a client whose connection pool keeps one idle
// connection per concurrent caller, as a load generator must: Go's default
// of two would close and reopen connections all the time.
func newHTTPClient(url string, clients int, coalesce time.Duration) (*client.Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = clients + 16
	tr.MaxIdleConnsPerHost = clients + 16
	return client.New(client.Config{BaseURL: url, HTTPClient: &http.Client{Transport: tr}, Coalesce: coalesce,
		UserAgent: "holdfast-bench"})
}

func (t *httpTarget) acquire(ctx context.Context, owner string, keys []string) (bool, error) {
	_, err := t.c.Acquire(ctx, holdfast.AcquireRequest{Keys: keys,
		Owner: holdfast.Owner{Session: owner, User: owner}, TTL: holdfast.Duration(lockTTL)})
	if errors.Is(err, holdfast.ErrLocked) {
		return false, nil
	}
	return err == nil, err
}

func (t *httpTarget) release(ctx context.Context, owner string, keys []string) error {
	_, err := t.c.Release(ctx, holdfast.ReleaseRequest{Session: owner, Keys: keys})
	return err
}

func (t *httpTarget) heartbeat(ctx context.Context, session string, idle time.Duration) error {
	_, err := t.c.Heartbeat(ctx, holdfast.HeartbeatRequest{Session: session, IdleTimeout: holdfast.Duration(idle)})
	return err
}

func (t *httpTarget) heartbeatBatch(ctx context.Context, sessions []string, idle time.Duration) error {
	ops := make([]client.Op, len(sessions))
	for i, s := range sessions {
		ops[i] = client.HeartbeatOp(holdfast.HeartbeatRequest{Session: s, IdleTimeout: holdfast.Duration(idle)})
	}
	results, err := t.c.Batch(ctx, ops)
	if err != nil {
		return err
	}
	for _, r := range results {
		if r.Err != nil {
			return r.Err
		}
	}
	return nil
}

func (t *httpTarget) close() error { return nil }
