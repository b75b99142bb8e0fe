package client

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
)

// The hand-written encoding and decoding of encode.go and decode.go must
// agree with encoding/json exactly: these tests compare the two.

// requestBodies are requests whose JSON covers every branch of encode.go.
var requestBodies = []any{
	holdfast.AcquireRequest{},
	holdfast.AcquireRequest{Keys: []string{}, Owner: holdfast.Owner{Session: "s"}},
	holdfast.AcquireRequest{Keys: []string{"policy/1", "policy/2"}, Mode: holdfast.Shared, Intent: holdfast.IntentRead,
		Owner: holdfast.Owner{Session: "s-81", User: "u-7", Name: "Bob Smith"}, TTL: holdfast.Duration(90 * time.Minute),
		IdleTimeout: holdfast.Duration(1500 * time.Millisecond), Takeover: true, Note: "underwriting review"},
	holdfast.AcquireRequest{Keys: []string{"a\"b", "c\\d", "<e>&", "\x00\x1f\x7f", "Zoë", "\u2028", "\xff"},
		Owner: holdfast.Owner{Session: "é", Name: "Ünal <admin>"}, Note: "line\nbreak"},
	holdfast.AcquireRequest{Keys: []string{"k"}, TTL: 1, IdleTimeout: -holdfast.Duration(time.Hour)},
	holdfast.AcquireRequest{Keys: []string{"k"}, TTL: holdfast.Duration(math.MaxInt64), IdleTimeout: 999},
	holdfast.ReleaseRequest{},
	holdfast.ReleaseRequest{Session: "s", Keys: []string{"k"}, Token: math.MaxUint64},
	holdfast.RenewRequest{Session: "s"},
	holdfast.RenewRequest{Session: "s", Keys: []string{"k", "l"}, TTL: holdfast.Duration(time.Second)},
	holdfast.VerifyRequest{Key: "k", Session: "s", Token: 4711},
	holdfast.VerifyRequest{},
	holdfast.HeartbeatRequest{Session: "s", IdleTimeout: holdfast.Duration(30 * time.Second)},
	holdfast.EndSessionRequest{Session: "s\t"},
	holdfast.Aggregate{Root: "policy/1", Member: "claim/1"},
}

func TestEncodeMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, in := range requestBodies {
		compareEncoding(t, in)
	}
}

func compareEncoding(t *testing.T, in any) {
	t.Helper()
	want, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	got, err := appendBody([]byte("prefix"), in)
	if err != nil || !bytes.Equal(got, append([]byte("prefix"), want...)) {
		t.Errorf("%T %+v:\nencoded %s (%v)\nwant    prefix%s", in, in, got, err, want)
	}
	op := Op{name: "acquire", body: in}
	wantOp, _ := json.Marshal(struct {
		Op   string `json:"op"`
		Body any    `json:"body"`
	}{op.name, in})
	if gotOp, err := json.Marshal(op); err != nil || !bytes.Equal(gotOp, wantOp) {
		t.Errorf("op %+v: encoded %s (%v), want %s", op, gotOp, err, wantOp)
	}
}

func FuzzEncode(f *testing.F) {
	f.Add("s-81", "u-7", "policy/1", "note", int64(time.Minute), uint64(7), true)
	f.Add("\"", "<>&", "\u2028\xff", "\x00", int64(1), uint64(0), false)
	f.Fuzz(func(t *testing.T, session, user, key, note string, d int64, token uint64, takeover bool) {
		keys := []string{key, user}
		compareEncoding(t, holdfast.AcquireRequest{Keys: keys, Mode: holdfast.Mode(note), Intent: holdfast.Intent(user),
			Owner: holdfast.Owner{Session: session, User: user, Name: note}, TTL: holdfast.Duration(d),
			IdleTimeout: holdfast.Duration(-d), Takeover: takeover, Note: note})
		compareEncoding(t, holdfast.ReleaseRequest{Session: session, Keys: keys, Token: token})
		compareEncoding(t, holdfast.RenewRequest{Session: session, Keys: keys[:token%3], TTL: holdfast.Duration(d)})
		compareEncoding(t, holdfast.VerifyRequest{Key: key, Session: session, Token: token})
		compareEncoding(t, holdfast.HeartbeatRequest{Session: session, IdleTimeout: holdfast.Duration(d)})
		compareEncoding(t, holdfast.EndSessionRequest{Session: session})
	})
}

const fuzzLock = `{"key":"policy/1","requested_key":"policy/1","mode":"exclusive","owner":{"session":"s-81","user":"s-81","name":"Bob"},` +
	`"token":4711,"note":"review","acquired_at":"2026-11-30T10:47:00.000Z","expires_at":"2026-11-30T12:47:00.000Z"}`

const heartbeatAnswer = `{"session":{"id":"s-81","user":"u-7","name":"Bob","last_seen":"2026-11-30T10:47:00.000Z",` +
	`"idle_timeout_seconds":30,"expires_at":"2026-11-30T10:47:30.000Z","locks":2},` +
	`"lost":[{"lock":` + fuzzLock + `,"reason":"expired","actor":"a","force_reason":"f"}]}`

// resultSeeds are answers as the server writes them, and near misses that
// the reader must leave to encoding/json or decode just as it does.
var resultSeeds = []string{
	`{"locks":[` + fuzzLock + `]}`,
	`{"locks":[` + fuzzLock + `,` + fuzzLock + `],"holders":[]}` + "\n",
	`{"released":[` + fuzzLock + `],"not_held":["a","b"]}`,
	`{"released":[],"not_held":[]}`,
	`{"lock":` + fuzzLock + `}`,
	` { "locks" : [ { "key" : "k" , "mode" : "shared" , "owner" : { "session" : "s" , "user" : "u" } } ] } `,
	`{"locks":[{"key":"k","KEY":"l"}]}`,
	`{"locks":[{"key":"k","key":"l"}]}`,
	`{"locks":[{"key":"k\u00e9"}]}`,
	`{"locks":[{"key":"Zoë","kéy":1,"mode":"exclusive"}]}`,
	`{"locks":[{"token":-1}]}`,
	`{"locks":[{"token":18446744073709551616}]}`,
	`{"locks":[{"token":1.0}]}`,
	`{"locks":[{"token":01}]}`,
	`{"locks":[{"token":null,"note":null,"owner":null,"acquired_at":null}]}`,
	`{"locks":null}`,
	`{"locks":[null]}`,
	`{"locks":[],"locks":null}`,
	`{"locks":[{"acquired_at":"2026-11-30T10:47:00+02:00"}]}`,
	`{"locks":[{"acquired_at":"2026-11-30 10:47:00Z"}]}`,
	`{"locks":[{"extra":{"a":[1,-2.5e+3,true,false,null,"\"\u00e9\n"]}}]}`,
	`{"locks":[{"extra":[[[[[[]]]]]]}]}`,
	`{"locks":[{"extra":01}]}`,
	`{"locks":[{"extra":"\x"}]}`,
	`{"locks":[]} x`,
	`{"locks":[],}`,
	`{"locks":[` + fuzzLock + `]`,
	`null`,
	`{"lock":{"owner":{"session":"s","user":"s","name":"\xff"}}}`,
	heartbeatAnswer,
	`{"session":{"id":"s","user":"s","last_seen":"2026-11-30T10:47:00Z","expires_at":null,"locks":0},"lost":[]}`,
	`{"session":{"id":"s","idle_timeout_seconds":null}}`,
	`{"session":{"id":"s","idle_timeout_seconds":0}}`,
	`{"session":{"id":"s","idle_timeout_seconds":"30"}}`,
	`{"session":{"id":"s","idle_timeout_seconds":1e-3,"IDLE_TIMEOUT_SECONDS":2}}`,
	`{"session":{"last_seen":"2026-11-30T10:47:00.000+01:00","expires_at":"\u0032026-11-30T10:47:00Z"}}`,
	`{"session":{"last_seen":5,"expires_at":{}}}`,
	`{"session":{"last_seen":null,"locks":-3},"lost":[null]}`,
	`{"session":null,"lost":null}`,
}

func FuzzDecodeResult(f *testing.F) {
	for _, s := range resultSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		compareDecoding[holdfast.AcquireResult](t, body)
		compareDecoding[holdfast.ReleaseResult](t, body)
		compareDecoding[holdfast.RenewResult](t, body)
		compareDecoding[holdfast.VerifyResult](t, body)
		compareDecoding[holdfast.EndSessionResult](t, body)
		compareDecoding[holdfast.HeartbeatResult](t, body)
	})
}

// compareDecoding checks that when the reader decodes body, encoding/json
// decodes it too, into the same value.
func compareDecoding[T any](t *testing.T, body []byte) {
	t.Helper()
	var got, want, zero T
	if !readResult(body, &got) {
		if !reflect.DeepEqual(got, zero) {
			t.Fatalf("the reader gave %q up but left %+v", body, got)
		}
		return
	}
	if err := json.Unmarshal(body, &want); err != nil {
		t.Fatalf("the reader took %q, which encoding/json refuses: %v", body, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q:\nreader        %+v\nencoding/json %+v", body, got, want)
	}
}

func TestReaderDecodesServerAnswers(t *testing.T) {
	t.Parallel()
	// The first five seeds are what the server writes: the reader must
	// take them, not leave them to encoding/json.
	for _, s := range resultSeeds[:5] {
		var a holdfast.AcquireResult
		var r holdfast.ReleaseResult
		var v holdfast.VerifyResult
		if !readResult([]byte(s), &a) && !readResult([]byte(s), &r) && !readResult([]byte(s), &v) {
			t.Errorf("the reader left %s to encoding/json", s)
		}
	}
	var h holdfast.HeartbeatResult
	if !readResult([]byte(heartbeatAnswer), &h) {
		t.Fatalf("the reader left %s to encoding/json", heartbeatAnswer)
	}
	if h.Session.ID != "s-81" || h.Session.User != "u-7" || h.Session.Locks != 2 || h.Session.ExpiresAt == nil ||
		h.Session.IdleTimeout != holdfast.Duration(30*time.Second) || len(h.Lost) != 1 ||
		h.Lost[0].Reason != holdfast.LostExpired || h.Lost[0].Lock.Token != 4711 || h.Lost[0].ForceReason != "f" {
		t.Errorf("read %+v", h)
	}
	var a holdfast.AcquireResult
	if !readResult([]byte(resultSeeds[0]), &a) {
		t.Fatal("not read")
	}
	l := a.Locks[0]
	if l.Key != "policy/1" || l.RequestedKey != "policy/1" || l.Mode != holdfast.Exclusive || l.Token != 4711 ||
		l.Owner != (holdfast.Owner{Session: "s-81", User: "s-81", Name: "Bob"}) || l.Note != "review" ||
		!l.AcquiredAt.Equal(time.Date(2026, 11, 30, 10, 47, 0, 0, time.UTC)) ||
		!l.ExpiresAt.Equal(time.Date(2026, 11, 30, 12, 47, 0, 0, time.UTC)) {
		t.Errorf("read %+v", l)
	}
}

// batchSeeds are answers of /v1/batch to an acquire, a release and a
// heartbeat, and near misses.
var batchSeeds = []string{
	`{"results":[{"status":200,"body":{"locks":[` + fuzzLock + `]}},{"status":200,"body":{"released":[],"not_held":["k"]}},` +
		`{"status":200,"body":{"session":{"id":"s","last_seen":"2026-11-30T10:47:00.000Z","expires_at":null,"locks":1},"lost":[]}}]}`,
	`{"results":[{"status":423,"error":{"code":"locked","message":"held","conflicts":[{"requested_key":"k","holders":[` + fuzzLock + `]}]}},` +
		`{"status":409,"error":{"code":"lock_lost","reason":"expired"}},{"status":503,"error":null}]}`,
	`{"results":[{"status":200,"body":{"locks":[]}},{"status":400,"body":{"x":1},"error":{"code":"invalid","field":"keys"}},{"status":500}]}`,
	`{"results":[{"status":200},{"status":200,"body":null},{"status":200,"body":{},"error":{}}]}`,
	`{"results":[{"status":200,"body":{}},{"status":200,"body":{}}]}`,
	`{"results":[{"status":200,"body":{}},{"status":200,"body":{}},{"status":200,"body":{}},{"status":200,"body":{}}]}`,
	`{"results":[{"status":"200","body":{}},{"status":200,"Status":1,"body":{}},{"status":2e2,"body":{}}]}`,
	`{"results":[{"status":404,"error":{"code":1}},{"status":200,"body":{"released":5}},{"status":200,"body":{}}]}`,
	`{"results":null}`,
	`{"Results":[]}`,
}

func FuzzReadBatch(f *testing.F) {
	for _, s := range batchSeeds {
		f.Add([]byte(s))
	}
	// Requests whose strings the seeds' answers repeat, which the reader
	// then hands out in place of copies.
	ops := []Op{
		AcquireOp(holdfast.AcquireRequest{Keys: []string{"policy/1"}, Owner: holdfast.Owner{Session: "s-81", User: "u-7"}}),
		ReleaseOp(holdfast.ReleaseRequest{Session: "s-81", Keys: []string{"k"}}),
		HeartbeatOp(holdfast.HeartbeatRequest{Session: "s"}),
	}
	// The coalescer appends to a reused slice.
	stale := []Result{{Status: 1}, {Status: 2}}
	f.Fuzz(func(t *testing.T, answer []byte) {
		got, ok := readBatch(answer, ops, stale[:0])
		if !ok {
			return
		}
		want, err := decodeBatch(answer, ops)
		if err != nil {
			t.Fatalf("the reader took %q, which decodeBatch refuses: %v", answer, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q:\nreader     %+v\ndecodeBatch %+v", answer, got, want)
		}
	})
}

func TestReadBatchTakesServerAnswers(t *testing.T) {
	t.Parallel()
	for _, s := range batchSeeds[:2] {
		if _, ok := readBatch([]byte(s), []Op{AcquireOp(holdfast.AcquireRequest{}), ReleaseOp(holdfast.ReleaseRequest{}),
			HeartbeatOp(holdfast.HeartbeatRequest{})}, nil); !ok {
			t.Errorf("the reader left %s to encoding/json", s)
		}
	}
}

// fill sets every field of v, recursively, to a value that is not zero,
// so that a field added to a request or result type shows up in
// encoding/json's output and fails the comparisons below until encode.go
// and decode.go know it.
func fill(v reflect.Value) {
	switch v.Type() {
	case reflect.TypeFor[time.Time]():
		v.Set(reflect.ValueOf(time.Date(2026, 11, 30, 10, 47, 0, 0, time.UTC)))
		return
	case reflect.TypeFor[holdfast.Time]():
		v.Set(reflect.ValueOf(holdfast.Time(time.Date(2026, 11, 30, 10, 47, 0, 0, time.UTC))))
		return
	case reflect.TypeFor[holdfast.Duration]():
		v.SetInt(int64(30 * time.Second))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString("x-" + v.Type().Name())
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64:
		v.SetInt(7)
	case reflect.Uint64:
		v.SetUint(4711)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0))
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem())
	case reflect.Struct:
		for i := range v.NumField() {
			fill(v.Field(i))
		}
	default:
		panic("fill: no value for " + v.Type().String())
	}
}

func filled[T any]() T {
	var v T
	fill(reflect.ValueOf(&v).Elem())
	return v
}

func TestEncodeCoversEveryField(t *testing.T) {
	t.Parallel()
	compareEncoding(t, filled[holdfast.AcquireRequest]())
	compareEncoding(t, filled[holdfast.ReleaseRequest]())
	compareEncoding(t, filled[holdfast.RenewRequest]())
	compareEncoding(t, filled[holdfast.VerifyRequest]())
	compareEncoding(t, filled[holdfast.HeartbeatRequest]())
	compareEncoding(t, filled[holdfast.EndSessionRequest]())
}

func TestReaderCoversEveryField(t *testing.T) {
	t.Parallel()
	covers[holdfast.AcquireResult](t)
	covers[holdfast.ReleaseResult](t)
	covers[holdfast.RenewResult](t)
	covers[holdfast.VerifyResult](t)
	covers[holdfast.EndSessionResult](t)
	covers[holdfast.HeartbeatResult](t)
}

// covers checks that the reader takes a result with every field set and
// decodes it as encoding/json does.
func covers[T any](t *testing.T) {
	t.Helper()
	body, err := json.Marshal(filled[T]())
	if err != nil {
		t.Fatal(err)
	}
	var got, want T
	if !readResult(body, &got) {
		t.Fatalf("the reader left %s to encoding/json", body)
	}
	if err := json.Unmarshal(body, &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\nreader        %+v\nencoding/json %+v", body, got, want)
	}
}
