package storetest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/holdfast/holdfast"
)

var keyCases = []testCase{
	{"InvalidKeysRefused", testInvalidKeysRefused},
	{"LongestAndUnicodeKeys", testLongestAndUnicodeKeys},
	{"KeyCount", testKeyCount},
	{"SessionRequired", testSessionRequired},
	{"InvalidKeysInOtherRequests", testInvalidKeysInOtherRequests},
}

var invalidKeys = []struct{ name, key string }{
	{"Empty", ""},
	{"TooLong", "order/" + strings.Repeat("x", holdfast.MaxKeyBytes-len("order/")+1)},
	{"LeadingSlash", "/order/1"},
	{"TrailingSlash", "order/1/"},
	{"EmptySegment", "order//1"},
	{"ControlChar", "order/1\x01"},
	{"Newline", "order/1\nline"},
	{"Delete", "order/\x7f"},
	{"InvalidUTF8", "order/\xff\xfe"},
}

// Field names are the JSON path of the bad value ("keys[1]"), the one
// reading of API.md's "field" that lets a client point at the input.
func testInvalidKeysRefused(e *env) {
	for _, c := range invalidKeys {
		e.t.Run(c.name, func(t *testing.T) {
			e := e.sub(t)
			_, err := e.m.Acquire(t.Context(), holdfast.AcquireRequest{Keys: keys("order/1", c.key), Owner: owner("bob")})
			e.wantInvalid(fmt.Sprintf("acquire %q", c.key), err, "keys[1]")
			if got := e.locks(holdfast.LockQuery{Session: "s-bob"}); len(got) != 0 {
				t.Fatalf("a refused request left locks %s", fmtLocks(got))
			}
		})
	}
}

func testLongestAndUnicodeKeys(e *env) {
	longest := "order/" + strings.Repeat("x", holdfast.MaxKeyBytes-len("order/"))
	for _, k := range []string{longest, "order/ünïcödé/☃", "order/with space/and-dash_and.dot"} {
		l := e.grant(exclusive(k, owner("bob")))
		if l.Key != k || l.RequestedKey != k {
			e.t.Fatalf("grant on %q: %s", k, fmtLock(l))
		}
	}
}

func testKeyCount(e *env) {
	many := make([]string, holdfast.MaxKeys+1)
	for i := range many {
		many[i] = fmt.Sprintf("order/%d", i)
	}
	_, err := e.m.Acquire(e.t.Context(), holdfast.AcquireRequest{Keys: many, Owner: owner("bob")})
	e.wantInvalid("1001 keys", err, "keys")
	_, err = e.m.Acquire(e.t.Context(), holdfast.AcquireRequest{Owner: owner("bob")})
	e.wantInvalid("no keys", err, "keys")

	res := e.acquire(holdfast.AcquireRequest{Keys: many[:holdfast.MaxKeys], Owner: owner("bob")})
	if len(res.Locks) != holdfast.MaxKeys {
		e.t.Fatalf("1000 keys: %d locks, want 1000", len(res.Locks))
	}
	if got := e.locks(holdfast.LockQuery{Session: "s-bob"}); len(got) != holdfast.MaxKeys {
		e.t.Fatalf("1000 keys: %d listed, want 1000", len(got))
	}
}

func testSessionRequired(e *env) {
	ctx := e.t.Context()
	_, err := e.m.Acquire(ctx, holdfast.AcquireRequest{Keys: keys("order/1"), Owner: holdfast.Owner{User: "u-bob"}})
	e.wantInvalid("acquire without a session", err, "owner.session")
	_, err = e.m.Acquire(ctx, holdfast.AcquireRequest{Keys: keys("order/1"), Owner: holdfast.Owner{Session: strings.Repeat("s", holdfast.MaxSessionBytes+1)}})
	e.wantInvalid("acquire with a 257-byte session", err, "owner.session")
	_, err = e.m.Release(ctx, holdfast.ReleaseRequest{Keys: keys("order/1")})
	e.wantInvalid("release without a session", err, "session")
	_, err = e.m.Renew(ctx, holdfast.RenewRequest{})
	e.wantInvalid("renew without a session", err, "session")
	_, err = e.m.Verify(ctx, holdfast.VerifyRequest{Key: "order/1", Token: 1})
	e.wantInvalid("verify without a session", err, "session")
	_, err = e.m.Heartbeat(ctx, holdfast.HeartbeatRequest{})
	e.wantInvalid("heartbeat without a session", err, "session")
	_, err = e.m.EndSession(ctx, holdfast.EndSessionRequest{})
	e.wantInvalid("end without a session", err, "session")
	if got := e.locks(holdfast.LockQuery{Key: "order/1"}); len(got) != 0 {
		e.t.Fatalf("refused requests left locks %s", fmtLocks(got))
	}
}

func testInvalidKeysInOtherRequests(e *env) {
	ctx := e.t.Context()
	_, err := e.m.Release(ctx, holdfast.ReleaseRequest{Session: "s-bob", Keys: keys("order//1")})
	e.wantInvalid("release", err, "keys[0]")
	_, err = e.m.Renew(ctx, holdfast.RenewRequest{Session: "s-bob", Keys: keys("order/1", "/x")})
	e.wantInvalid("renew", err, "keys[1]")
	_, err = e.m.Verify(ctx, holdfast.VerifyRequest{Key: "order/1/", Session: "s-bob", Token: 1})
	e.wantInvalid("verify", err, "key")
	_, err = e.m.ForceRelease(ctx, holdfast.ForceReleaseRequest{Keys: keys(""), Reason: "r"})
	e.wantInvalid("force release", err, "keys[0]")
	_, err = e.m.SetAggregate(ctx, holdfast.Aggregate{Member: "asset//9", Root: "lease/3"})
	e.wantInvalid("aggregate member", err, "member")
	_, err = e.m.SetAggregate(ctx, holdfast.Aggregate{Member: "asset/9", Root: ""})
	e.wantInvalid("aggregate root", err, "root")
}
