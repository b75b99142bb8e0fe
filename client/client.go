// Package client is the Go client of a holdfast server: a holdfast.Service
// that speaks the HTTP API, so an application moves between an embedded
// Manager and a remote server by changing one constructor.
//
// Errors keep their identity across the wire: a refused acquire is a
// *holdfast.LockedError (errors.Is(err, holdfast.ErrLocked)), a lost lock a
// *holdfast.LockLostError, and a server that cannot be reached at all is an
// *UnreachableError wrapping the transport's error, which errors.Is and
// errors.As take for a *holdfast.UnavailableError, exactly as when the
// server itself reports that its store is unavailable.
//
// The package uses the standard library only.
package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/internal/jsonwire"
)

// Config configures a Client.
type Config struct {
	// BaseURL is where the server listens, e.g. "http://127.0.0.1:7070". A
	// path is kept as a prefix, for servers behind a reverse proxy.
	BaseURL string
	// Token is sent as "Authorization: Bearer Token" when not empty.
	Token string
	// HTTPClient carries the requests. The default has no timeout, so that
	// each call's context decides how long it may take, and keeps up to 100
	// idle connections to the server (Go's default transport keeps two, and
	// concurrent callers would open and close connections all the time).
	// Every Client built without one shares the default, and its pool. A
	// Timeout set here also cuts the event stream of Events.
	HTTPClient *http.Client
	// UserAgent is sent with every request; default "holdfast-go-client".
	UserAgent string
	// Coalesce, when greater than zero, turns on transparent batching:
	// Acquire, Release, Renew, Verify, Heartbeat and EndSession calls made
	// concurrently travel together in one POST /v1/batch, which the server
	// commits at once. A call leaves at once when the client has fewer
	// than two batches on their way; otherwise it joins the next batch,
	// which leaves when one comes back, when it is full, after Coalesce
	// (a millisecond or less serves well) while fewer than four are on
	// their way, or once it has waited the longer of Coalesce and a second
	// while fewer than eight are, so that batches that hang do not hold up
	// the calls after them. Results and errors are those of the single
	// calls. Zero sends each call on its own.
	Coalesce time.Duration
	// MaxBatch bounds the operations of one coalesced batch; default, and
	// at most, 1000.
	MaxBatch int
}

// maxIdleConns is how many idle connections to the server the default
// HTTP client keeps for reuse.
const maxIdleConns = 100

// defaultHTTPClient is the HTTP client of every Client built without one:
// one connection pool for the whole program, however many Clients it makes.
var defaultHTTPClient = sync.OnceValue(func() *http.Client {
	c := &http.Client{}
	if dt, ok := http.DefaultTransport.(*http.Transport); ok {
		tr := dt.Clone()
		tr.MaxIdleConns, tr.MaxIdleConnsPerHost = maxIdleConns, maxIdleConns
		c.Transport = tr
	}
	return c
})

// Client calls a holdfast server. It is safe for concurrent use.
type Client struct {
	base     *url.URL
	urls     sync.Map // path → base URL joined with it, for the request line
	http     *http.Client
	coalesce *coalescer // nil unless Config.Coalesce is set
	// The values of the headers every request carries, set into its
	// header as they are: Header.Set would copy and canonicalize each
	// for every request. Requests share them: net/http and RoundTrippers
	// that keep their contract never write into a request's header
	// values, and each slice is full (len == cap), so an Add copies it.
	userAgent, authorization []string
}

var _ holdfast.Service = (*Client)(nil)

// maxResponseBytes bounds what a response may make the client read into
// memory: a full page of 1000 locks is far below it.
const maxResponseBytes = 64 << 20

// New returns a Client for the server at cfg.BaseURL.
func New(cfg Config) (*Client, error) {
	if cfg.BaseURL == "" {
		return nil, errors.New("client: BaseURL is required")
	}
	base, err := url.Parse(cfg.BaseURL)
	if err != nil {
		return nil, fmt.Errorf("client: BaseURL: %w", err)
	}
	if base.Scheme != "http" && base.Scheme != "https" {
		return nil, fmt.Errorf("client: BaseURL %q: scheme must be http or https", cfg.BaseURL)
	}
	if base.Host == "" {
		return nil, fmt.Errorf("client: BaseURL %q has no host", cfg.BaseURL)
	}
	if base.RawQuery != "" || base.Fragment != "" {
		return nil, fmt.Errorf("client: BaseURL %q must not have a query or fragment", cfg.BaseURL)
	}
	c := &Client{base: base, http: cfg.HTTPClient, userAgent: []string{cfg.UserAgent}}
	if c.http == nil {
		c.http = defaultHTTPClient()
	}
	if cfg.UserAgent == "" {
		c.userAgent[0] = "holdfast-go-client"
	}
	if cfg.Token != "" {
		c.authorization = []string{"Bearer " + cfg.Token}
	}
	if cfg.Coalesce > 0 {
		c.coalesce = newCoalescer(c, cfg.Coalesce, cfg.MaxBatch)
	}
	return c, nil
}

// newRequest builds a request for path (relative to the base URL) with an
// encoded JSON body, or none when body is nil.
func (c *Client) newRequest(ctx context.Context, method, path string, query url.Values, body []byte) (*http.Request, error) {
	u := c.url(path)
	if q := query.Encode(); q != "" {
		u += "?" + q
	}
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, r)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header["Content-Type"] = jsonwire.MediaType
	}
	req.Header["Accept"] = jsonwire.MediaType
	req.Header["User-Agent"] = c.userAgent
	if c.authorization != nil {
		req.Header["Authorization"] = c.authorization
	}
	return req, nil
}

// unreachable is the error of a request that got no answer.
func (c *Client) unreachable(err error) error {
	return &UnreachableError{URL: c.base.Redacted(), Err: err}
}

// url is the base URL joined with path, joined once for each of the
// API's few paths.
func (c *Client) url(path string) string {
	if u, ok := c.urls.Load(path); ok {
		return u.(string)
	}
	u := c.base.JoinPath(path).String()
	c.urls.Store(path, u)
	return u
}

// roundTrip sends one request and hands the body of a 200 answer to
// decode, which must not keep it: the buffer serves later answers. Any
// other status becomes the error the server's code stands for.
func (c *Client) roundTrip(ctx context.Context, method, path string, query url.Values, body []byte, decode func(answer []byte) error) error {
	req, err := c.newRequest(ctx, method, path, query, body)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return c.unreachable(err)
	}
	defer resp.Body.Close()
	buf := readAnswer(resp)
	defer buf.release()
	if buf.err != nil {
		return &holdfast.UnavailableError{Err: fmt.Errorf("reading %s response: %w", path, buf.err)}
	}
	if resp.StatusCode != http.StatusOK {
		return responseError(resp.StatusCode, resp.Header, buf.Bytes())
	}
	return decode(buf.Bytes())
}

// answer is a response body read into a buffer that answers recycles: a
// batch's answer is many kilobytes, and allocating one for each was the
// largest part of the coalescing client's garbage.
type answer struct {
	bytes.Buffer
	err error
}

var answers = sync.Pool{New: func() any { return new(answer) }}

// maxPooledAnswer bounds the buffers kept for reuse, so that one large
// listing does not stay in memory.
const maxPooledAnswer = 1 << 20

func (a *answer) release() {
	if a.Cap() <= maxPooledAnswer {
		a.Reset()
		a.err = nil
		answers.Put(a)
	}
}

// readAnswer reads a response body of at most maxResponseBytes. The buffer
// grows at once to the announced length: a batch's answer would otherwise
// be copied through half a dozen growing ones.
func readAnswer(resp *http.Response) *answer {
	a := answers.Get().(*answer)
	if n := resp.ContentLength; n > 0 && n <= maxResponseBytes {
		// The spare MinRead bytes let the read that meets the end go
		// without growing the buffer.
		a.Grow(int(n) + bytes.MinRead)
	}
	_, a.err = a.ReadFrom(io.LimitReader(resp.Body, maxResponseBytes))
	return a
}

// do sends one request and decodes a 200 answer into out (unless nil).
func (c *Client) do(ctx context.Context, method, path string, query url.Values, body []byte, out any) error {
	return c.roundTrip(ctx, method, path, query, body, func(answer []byte) error {
		if out == nil {
			return nil
		}
		if err := decodeResult(answer, out); err != nil {
			return fmt.Errorf("decoding %s response: %w", path, err)
		}
		return nil
	})
}

func (c *Client) post(ctx context.Context, path string, in, out any) error {
	// Room for a typical body, which would otherwise grow four times.
	body, err := appendBody(make([]byte, 0, 256), in)
	if err != nil {
		return fmt.Errorf("encoding %s request: %w", path, err)
	}
	return c.do(ctx, http.MethodPost, path, nil, body, out)
}

func (c *Client) get(ctx context.Context, path string, query url.Values, out any) error {
	return c.do(ctx, http.MethodGet, path, query, nil, out)
}

// Ping reports whether the server is up and its store reachable
// (GET /readyz).
func (c *Client) Ping(ctx context.Context) error {
	return c.get(ctx, "/readyz", nil, nil)
}

// pageQuery adds the paging parameters that every listing shares.
func pageQuery(q url.Values, limit int, after string) url.Values {
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	setIf(q, "after", after)
	return q
}

func setIf(q url.Values, name, value string) {
	if value != "" {
		q.Set(name, value)
	}
}

// describe shortens a body for an error message.
func describe(body []byte) string {
	s := strings.TrimSpace(string(body))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
