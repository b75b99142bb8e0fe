package client

import (
	"encoding/json"
	"strconv"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/internal/jsonwire"
)

// The bodies of the calls that can be coalesced are written out by hand:
// with 64 callers sharing two cores with the server, the reflection of
// encoding/json was a large part of the client's CPU per operation. Each
// function writes exactly the bytes json.Marshal writes for the same value
// (TestEncodeMatchesEncodingJSON and FuzzEncode compare them).

// appendBody appends the JSON of a request body.
func appendBody(b []byte, in any) ([]byte, error) {
	switch v := in.(type) {
	case holdfast.AcquireRequest:
		return appendAcquire(b, v), nil
	case holdfast.ReleaseRequest:
		return appendRelease(b, v), nil
	case holdfast.RenewRequest:
		return appendRenew(b, v), nil
	case holdfast.VerifyRequest:
		return appendVerify(b, v), nil
	case holdfast.HeartbeatRequest:
		return appendHeartbeat(b, v), nil
	case holdfast.EndSessionRequest:
		return appendEndSession(b, v), nil
	}
	j, err := json.Marshal(in)
	return append(b, j...), err
}

func appendAcquire(b []byte, r holdfast.AcquireRequest) []byte {
	b = append(b, `{"keys":`...)
	b = appendStrings(b, r.Keys)
	if r.Mode != "" {
		b = append(b, `,"mode":`...)
		b = jsonwire.AppendString(b, string(r.Mode))
	}
	if r.Intent != "" {
		b = append(b, `,"intent":`...)
		b = jsonwire.AppendString(b, string(r.Intent))
	}
	b = append(b, `,"owner":{"session":`...)
	b = jsonwire.AppendString(b, r.Owner.Session)
	if r.Owner.User != "" {
		b = append(b, `,"user":`...)
		b = jsonwire.AppendString(b, r.Owner.User)
	}
	if r.Owner.Name != "" {
		b = append(b, `,"name":`...)
		b = jsonwire.AppendString(b, r.Owner.Name)
	}
	b = append(b, '}')
	if r.TTL != 0 {
		b = append(b, `,"ttl_seconds":`...)
		b = appendDuration(b, r.TTL)
	}
	if r.IdleTimeout != 0 {
		b = append(b, `,"idle_timeout_seconds":`...)
		b = appendDuration(b, r.IdleTimeout)
	}
	if r.Takeover {
		b = append(b, `,"takeover":true`...)
	}
	if r.Note != "" {
		b = append(b, `,"note":`...)
		b = jsonwire.AppendString(b, r.Note)
	}
	return append(b, '}')
}

func appendRelease(b []byte, r holdfast.ReleaseRequest) []byte {
	b = append(b, `{"session":`...)
	b = jsonwire.AppendString(b, r.Session)
	b = append(b, `,"keys":`...)
	b = appendStrings(b, r.Keys)
	if r.Token != 0 {
		b = append(b, `,"token":`...)
		b = strconv.AppendUint(b, r.Token, 10)
	}
	return append(b, '}')
}

func appendRenew(b []byte, r holdfast.RenewRequest) []byte {
	b = append(b, `{"session":`...)
	b = jsonwire.AppendString(b, r.Session)
	if len(r.Keys) > 0 {
		b = append(b, `,"keys":`...)
		b = appendStrings(b, r.Keys)
	}
	if r.TTL != 0 {
		b = append(b, `,"ttl_seconds":`...)
		b = appendDuration(b, r.TTL)
	}
	return append(b, '}')
}

func appendVerify(b []byte, r holdfast.VerifyRequest) []byte {
	b = append(b, `{"key":`...)
	b = jsonwire.AppendString(b, r.Key)
	b = append(b, `,"session":`...)
	b = jsonwire.AppendString(b, r.Session)
	if r.Token != 0 {
		b = append(b, `,"token":`...)
		b = strconv.AppendUint(b, r.Token, 10)
	}
	return append(b, '}')
}

func appendHeartbeat(b []byte, r holdfast.HeartbeatRequest) []byte {
	b = append(b, `{"session":`...)
	b = jsonwire.AppendString(b, r.Session)
	if r.IdleTimeout != 0 {
		b = append(b, `,"idle_timeout_seconds":`...)
		b = appendDuration(b, r.IdleTimeout)
	}
	return append(b, '}')
}

func appendEndSession(b []byte, r holdfast.EndSessionRequest) []byte {
	b = append(b, `{"session":`...)
	b = jsonwire.AppendString(b, r.Session)
	return append(b, '}')
}

// appendStrings writes a nil slice as null, as encoding/json does.
func appendStrings(b []byte, ss []string) []byte {
	if ss == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsonwire.AppendString(b, s)
	}
	return append(b, ']')
}

// appendDuration writes seconds as holdfast.Duration.MarshalJSON does.
func appendDuration(b []byte, d holdfast.Duration) []byte {
	j, _ := d.MarshalJSON() // seconds of an int64: never fails
	return append(b, j...)
}

// appendOp writes one operation of a batch.
func appendOp(b []byte, o Op) ([]byte, error) {
	var err error
	b = appendEnvelope(b, o.name, func(b []byte) []byte {
		b, err = appendBody(b, o.body)
		return b
	})
	return b, err
}

// appendEnvelope writes one operation of a batch named name, whose body
// encode appends.
func appendEnvelope(b []byte, name string, encode func([]byte) []byte) []byte {
	b = append(b, `{"op":"`...)
	b = append(b, name...) // a name of ours: nothing to escape
	b = append(b, `","body":`...)
	return append(encode(b), '}')
}
