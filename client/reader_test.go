package client

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/memstore"
	"github.com/holdfast/holdfast/server"
)

// The reader must take the real server's answers itself: were they left
// to encoding/json, the results would be the same but the speed gone.
func TestReaderTakesTheServersAnswers(t *testing.T) {
	t.Parallel()
	st := memstore.New(memstore.Config{})
	discard := slog.New(slog.NewTextHandler(io.Discard, nil))
	mgr, err := holdfast.New(st, holdfast.Config{SweepInterval: -1, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Manager: mgr, Logger: discard, Anonymous: true})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		hs.Close()
		mgr.Close()
		st.Close()
	})
	c, err := New(Config{BaseURL: hs.URL})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	owner := holdfast.Owner{Session: "s-81", User: "u-7", Name: "Bob Smith"}
	ttl := holdfast.Duration(time.Hour)

	// answer posts body to path and returns the server's answer as is.
	answer := func(path string, in any) []byte {
		t.Helper()
		body, err := appendBody(nil, in)
		if err != nil {
			t.Fatal(err)
		}
		var out []byte
		if err := c.roundTrip(ctx, http.MethodPost, path, nil, body, func(a []byte) error {
			out = bytes.Clone(a)
			return nil
		}); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		return out
	}
	takes := func(body []byte, out any) {
		t.Helper()
		if !readResult(body, out) {
			t.Errorf("the reader left %s to encoding/json", body)
		}
	}
	takes(answer("/v1/locks/acquire", holdfast.AcquireRequest{Keys: []string{"policy/1", "policy/2"}, Owner: owner,
		TTL: ttl, IdleTimeout: holdfast.Duration(time.Minute), Note: "review"}), new(holdfast.AcquireResult))
	takes(answer("/v1/locks/renew", holdfast.RenewRequest{Session: owner.Session, TTL: ttl}), new(holdfast.RenewResult))
	takes(answer("/v1/locks/verify", holdfast.VerifyRequest{Key: "policy/1", Session: owner.Session}), new(holdfast.VerifyResult))
	takes(answer("/v1/sessions/heartbeat", holdfast.HeartbeatRequest{Session: owner.Session}), new(holdfast.HeartbeatResult))
	takes(answer("/v1/locks/release", holdfast.ReleaseRequest{Session: owner.Session, Keys: []string{"policy/1", "policy/9"}}),
		new(holdfast.ReleaseResult))
	takes(answer("/v1/sessions/end", holdfast.EndSessionRequest{Session: owner.Session}), new(holdfast.EndSessionResult))

	ops := []Op{
		AcquireOp(holdfast.AcquireRequest{Keys: []string{"policy/3"}, Owner: owner, TTL: ttl}),
		AcquireOp(holdfast.AcquireRequest{Keys: []string{"policy/3"}, Owner: holdfast.Owner{Session: "s-90"}}),
		RenewOp(holdfast.RenewRequest{Session: owner.Session}),
		VerifyOp(holdfast.VerifyRequest{Key: "policy/3", Session: owner.Session}),
		HeartbeatOp(holdfast.HeartbeatRequest{Session: owner.Session}),
		ReleaseOp(holdfast.ReleaseRequest{Session: owner.Session, Keys: []string{"policy/3"}}),
		EndSessionOp(holdfast.EndSessionRequest{Session: owner.Session}),
	}
	request, err := batchBody(ops)
	if err != nil {
		t.Fatal(err)
	}
	var body []byte
	if err := c.roundTrip(ctx, http.MethodPost, "/v1/batch", nil, request, func(a []byte) error {
		body = bytes.Clone(a)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, ok := readBatch(body, ops, nil); !ok {
		t.Errorf("the reader left %s to decodeBatch", body)
	}
}
