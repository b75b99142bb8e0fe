// Package jsonwire holds the small pieces of JSON on the wire that the
// root package, the server and the client share: hand-written encodings,
// each writing exactly the bytes encoding/json writes for the same value,
// and the media type.
package jsonwire

import "encoding/json"

// AppendString appends s as encoding/json writes it: plain printable
// ASCII as is, anything else (escapes, HTML characters, non-ASCII) by
// encoding/json itself.
func AppendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// MediaType is the header value of a JSON body (Content-Type, and the
// client's Accept), one slice that every such header shares so that
// setting it allocates nothing. Nothing writes into it, and it is full
// (len == cap), so an Add copies it.
var MediaType = []string{"application/json"}
