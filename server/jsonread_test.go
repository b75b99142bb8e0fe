package server

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/holdfast/holdfast"
)

// readerOnly decodes body with jsonReader alone; ok is false when it gave
// up.
func readerOnly[T any](body []byte, field func(*jsonReader, *T, []byte)) (v T, ok bool) {
	r := jsonReader{b: body}
	r.object(func(name []byte) { field(&r, &v, name) })
	return v, r.end()
}

// sameAsJSON checks that whatever jsonReader accepts, encoding/json
// accepts too and decodes to the same value.
func sameAsJSON[T any](t *testing.T, body []byte, field func(*jsonReader, *T, []byte)) (read bool) {
	t.Helper()
	got, ok := readerOnly(body, field)
	if !ok {
		return false
	}
	var want T
	if err := decodeJSON(body, &want); err != nil {
		t.Fatalf("%T %q: the reader accepts what encoding/json refuses: %v", want, body, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%T %q:\nreader  %#v\nencoding/json %#v", want, body, got, want)
	}
	return true
}

// sameBatchAsJSON checks the batch envelope the same way.
func sameBatchAsJSON(t *testing.T, body []byte) (read bool) {
	t.Helper()
	r := jsonReader{b: body}
	var got []batchOp
	r.object(func(name []byte) { batchField(&r, &got, name) })
	if !r.end() {
		return false
	}
	want, err := decodeBatch(body)
	if err != nil {
		t.Fatalf("batch %q: the reader accepts what encoding/json refuses: %v", body, err)
	}
	if len(got) != len(want) {
		t.Fatalf("batch %q: reader has %d ops, encoding/json %d", body, len(got), len(want))
	}
	for i := range got {
		if want[i].err != nil {
			t.Fatalf("batch %q: the reader accepts op %d, which encoding/json refuses: %v", body, i, want[i].err)
		}
		if got[i].Op != want[i].Op || !bytes.Equal(got[i].Body, want[i].Body) {
			t.Fatalf("batch %q: op %d: reader %q %s, encoding/json %q %s", body, i, got[i].Op, got[i].Body, want[i].Op, want[i].Body)
		}
	}
	return true
}

// checkReaders runs every request reader over body.
func checkReaders(t *testing.T, body []byte) (read bool) {
	t.Helper()
	read = sameAsJSON(t, body, acquireField)
	read = sameAsJSON(t, body, releaseField) || read
	read = sameAsJSON(t, body, renewField) || read
	read = sameAsJSON(t, body, verifyField) || read
	read = sameAsJSON(t, body, heartbeatField) || read
	read = sameAsJSON(t, body, endSessionField) || read
	return sameBatchAsJSON(t, body) || read
}

var readerSeeds = []string{
	`{"keys":["policy/1","policy/1/coverage/2"],"mode":"exclusive","owner":{"session":"s-81","user":"u-7","name":"Bob Smith"},"ttl_seconds":7200,"idle_timeout_seconds":300,"takeover":false,"note":"n"}`,
	` { "keys" : [ ] , "intent" : "read" , "owner" : { } , "takeover" : true } `,
	`{"session":"s","keys":["a/1"],"token":4711}`,
	`{"session":"s","keys":["a/1"],"token":18446744073709551615}`,
	`{"session":"s","keys":["a/1"],"token":18446744073709551616}`,
	`{"session":"s","token":0}`, `{"session":"s","token":01}`, `{"session":"s","token":1.0}`, `{"session":"s","token":1e2}`, `{"session":"s","token":-1}`,
	`{"session":"s","ttl_seconds":0.25}`, `{"session":"s","ttl_seconds":1e3}`, `{"session":"s","ttl_seconds":-1}`, `{"session":"s","ttl_seconds":0}`,
	`{"session":"s","ttl_seconds":1e400}`, `{"session":"s","ttl_seconds":1.}`, `{"session":"s","ttl_seconds":.5}`, `{"session":"s","ttl_seconds":null}`,
	`{"key":"a/1","session":"s","token":7}`,
	`{"session":"s","idle_timeout_seconds":300}`,
	`{"session":"Zoë Ångström 日本"}`, `{"session":"bad \xff utf8"}`, `{"session":"esc\"aped"}`, `{"session":"tab	"}`,
	`{"Session":"s"}`, `{"session":"a","session":"b"}`, `{"session":null}`, `{"session":"s"} {}`, `{"session":"s"`, `{}`, ``, `null`, `[]`,
	`{"keys":["a"],"owner":{"session":"s"},"owner":{"user":"u"}}`, `{"keys":["a"],"keys":["b","c"]}`, `{"keys":[,]}`, `{"keys":["a",]}`,
	`{"ops":[{"op":"heartbeat","body":{"session":"s"}},{"op":"acquire","body":{"keys":["a"],"owner":{"session":"s"}}}]}`,
	`{"ops":[{"body":{"session":"s"},"op":"end_session"}]}`,
	`{"ops":[{"op":"verify","body":{"key":"k","x":[1,-2.5e+3,true,false,null,"\u00e9\n\"",{}],"y":{"z":[]}}}]}`,
	`{"ops":[{"op":"heartbeat","body":null}, {"op":"nope"}, {"body":{}}]}`,
	`{"ops":[{"op":"heartbeat","body":"\u12"}]}`, `{"ops":[{"op":"heartbeat","body":tru}]}`, `{"ops":[{"op":"heartbeat","body":{"a":1,}}]}`,
	`{"ops":[{"op":"heartbeat","body":{"session":"s"}},7]}`, `{"ops":[]}`, `{"ops":null}`, `{"ops":[{}]}`, `{"Ops":[]}`,
}

func TestJSONReaderMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, body := range readerSeeds {
		checkReaders(t, []byte(body))
	}
}

// TestJSONReaderReadsClientBodies checks that the reader takes the bodies
// the Go client sends, rather than leaving them all to encoding/json.
func TestJSONReaderReadsClientBodies(t *testing.T) {
	t.Parallel()
	for _, req := range []any{
		holdfast.AcquireRequest{Keys: []string{"order/42", "order/43"}, Owner: holdfast.Owner{Session: "s-1", User: "u", Name: "Zoë"},
			TTL: holdfast.Duration(90e9), IdleTimeout: holdfast.Duration(1.5e9), Intent: holdfast.IntentWrite, Takeover: true, Note: "n"},
		holdfast.ReleaseRequest{Session: "s-1", Keys: []string{"order/42"}, Token: 7},
		holdfast.RenewRequest{Session: "s-1", Keys: []string{"order/42"}, TTL: holdfast.Duration(3e9)},
		holdfast.VerifyRequest{Key: "order/42", Session: "s-1", Token: 1 << 60},
		holdfast.HeartbeatRequest{Session: "s-1", IdleTimeout: holdfast.Duration(300e9)},
		holdfast.EndSessionRequest{Session: "s-1"},
		map[string]any{"ops": []map[string]any{
			{"op": "heartbeat", "body": holdfast.HeartbeatRequest{Session: "s-1"}},
			{"op": "release", "body": holdfast.ReleaseRequest{Session: "s-1", Keys: []string{"a/1"}}},
		}},
	} {
		body, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		if !checkReaders(t, body) {
			t.Errorf("%T %s: the reader gave up", req, body)
		}
	}
}

// TestJSONReaderKnowsEveryField checks that the reader takes a body with
// every field of its request set: a field added to a request type would
// otherwise send every body that has it to encoding/json.
func TestJSONReaderKnowsEveryField(t *testing.T) {
	t.Parallel()
	for _, req := range []any{
		filled[holdfast.AcquireRequest]("s"), filled[holdfast.ReleaseRequest]("s"), filled[holdfast.RenewRequest]("s"),
		filled[holdfast.VerifyRequest]("s"), filled[holdfast.HeartbeatRequest]("s"), filled[holdfast.EndSessionRequest]("s"),
	} {
		body, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		if !checkReaders(t, body) {
			t.Errorf("%T %s: the reader gave up", req, body)
		}
	}
}

func FuzzJSONReader(f *testing.F) {
	for _, body := range readerSeeds {
		f.Add([]byte(body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkReaders(t, body)
	})
}
