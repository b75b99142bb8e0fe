// Package jsonwire holds the small pieces of hand-written JSON that the
// root package, the server and the client share: each writes exactly the
// bytes encoding/json writes for the same value.
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
