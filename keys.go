package holdfast

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Limits of the API.
const (
	MaxKeyBytes     = 512
	MaxKeys         = 1000
	MaxSessionBytes = 256
	MaxNameBytes    = 200
	MaxNoteBytes    = 1000
)

// ValidateKey reports what is wrong with key, or nil. A key is 1–512 bytes
// of UTF-8 made of non-empty "/"-separated segments without control
// characters.
func ValidateKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("key is empty")
	case len(key) > MaxKeyBytes:
		return fmt.Errorf("key is %d bytes, more than %d", len(key), MaxKeyBytes)
	case !utf8.ValidString(key):
		return fmt.Errorf("key %q is not valid UTF-8", key)
	case key[0] == '/':
		return fmt.Errorf("key %q starts with /", key)
	case key[len(key)-1] == '/':
		return fmt.Errorf("key %q ends with /", key)
	case strings.Contains(key, "//"):
		return fmt.Errorf("key %q has an empty segment", key)
	}
	for _, r := range key {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return fmt.Errorf("key %q contains a control character", key)
		}
	}
	return nil
}

// KeyType is the first segment of key: the record type whose policy applies.
func KeyType(key string) string {
	if i := strings.IndexByte(key, '/'); i >= 0 {
		return key[:i]
	}
	return key
}

// Covers reports whether a lock on a covers b: a equals b or is an ancestor.
func Covers(a, b string) bool {
	return a == b || (len(b) > len(a) && b[len(a)] == '/' && b[:len(a)] == a)
}

func validateKeys(field string, keys []string, required bool) error {
	if required && len(keys) == 0 {
		return invalid(field, "%s: at least one key is required", field)
	}
	if len(keys) > MaxKeys {
		return invalid(field, "%s: %d keys, more than %d", field, len(keys), MaxKeys)
	}
	for i, k := range keys {
		if err := ValidateKey(k); err != nil {
			return invalid(fmt.Sprintf("%s[%d]", field, i), "%s[%d]: %v", field, i, err)
		}
	}
	return nil
}

func validateSession(field, s string) error {
	switch {
	case s == "":
		return invalid(field, "%s is required", field)
	case len(s) > MaxSessionBytes:
		return invalid(field, "%s is %d bytes, more than %d", field, len(s), MaxSessionBytes)
	case !utf8.ValidString(s):
		return invalid(field, "%s is not valid UTF-8", field)
	}
	return nil
}

// UnderPrefix reports whether key is prefix or below it in the key
// hierarchy; a trailing "/" on prefix is ignored and "" matches every key.
// Listings and event streams filter with it, so "policy" never matches
// "policyholder/1".
func UnderPrefix(prefix, key string) bool {
	if prefix == "" {
		return true
	}
	if len(prefix) > 1 && prefix[len(prefix)-1] == '/' {
		prefix = prefix[:len(prefix)-1]
	}
	return Covers(prefix, key)
}
