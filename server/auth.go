package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/adminui"
)

// Role is what a bearer token may do. Each role includes the ones below it.
type Role int

const (
	// public routes need no token (probes, the OpenAPI document).
	public Role = iota
	// Reader may call GET endpoints and follow events.
	Reader
	// Client may also acquire, release, renew, verify, and manage sessions
	// and aggregates.
	Client
	// Admin may do everything, including force-release and audit.
	Admin
)

func (r Role) String() string {
	switch r {
	case Reader:
		return "reader"
	case Client:
		return "client"
	case Admin:
		return "admin"
	default:
		return "public"
	}
}

// ParseRole parses "reader", "client" or "admin".
func ParseRole(s string) (Role, error) {
	switch s {
	case "reader":
		return Reader, nil
	case "client":
		return Client, nil
	case "admin":
		return Admin, nil
	}
	return 0, fmt.Errorf("unknown role %q (want reader, client or admin)", s)
}

// Token is a bearer token and the role it grants.
type Token struct {
	Role   Role
	Secret string
}

// ParseTokens parses "role:token,role:token", the form of HOLDFAST_TOKENS.
// Errors never include the secrets.
func ParseTokens(s string) ([]Token, error) {
	var tokens []Token
	for i, pair := range strings.Split(s, ",") {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		t, err := ParseToken(pair)
		if err != nil {
			return nil, fmt.Errorf("token %d: %w", i+1, err)
		}
		tokens = append(tokens, t)
	}
	return tokens, nil
}

// ParseToken parses one "role:token" pair, spaces around either part
// ignored ("admin: s3cret"), as they are around a request's token.
func ParseToken(pair string) (Token, error) {
	name, secret, ok := strings.Cut(pair, ":")
	name, secret = strings.TrimSpace(name), strings.TrimSpace(secret)
	if !ok || secret == "" {
		return Token{}, fmt.Errorf("want role:token")
	}
	role, err := ParseRole(name)
	if err != nil {
		return Token{}, err
	}
	return Token{Role: role, Secret: secret}, nil
}

// authenticator finds the role of a request's bearer token.
type authenticator struct {
	// digests of the configured secrets, so every comparison takes the
	// same time whatever the lengths.
	digests   [][sha256.Size]byte
	roles     []Role
	anonymous bool
}

func newAuthenticator(tokens []Token, anonymous bool) *authenticator {
	a := &authenticator{anonymous: anonymous && len(tokens) == 0}
	for _, t := range tokens {
		a.digests = append(a.digests, sha256.Sum256([]byte(t.Secret)))
		a.roles = append(a.roles, t.Role)
	}
	return a
}

// authorize returns nil when r may use a route that needs role need.
func (a *authenticator) authorize(r *http.Request, need Role) error {
	if need == public {
		return nil
	}
	if a.anonymous {
		// A web page can make a browser send requests to loopback; a
		// host name other than loopback's means DNS rebinding.
		if !loopbackHost(r.Host) {
			return &statusError{sentinel: holdfast.ErrForbidden, msg: "without tokens, requests must name a loopback host"}
		}
		return nil
	}
	have, ok := a.role(r)
	if !ok {
		return &statusError{sentinel: holdfast.ErrUnauthenticated, msg: "a valid bearer token is required"}
	}
	if have < need {
		return &statusError{sentinel: holdfast.ErrForbidden, msg: fmt.Sprintf("this needs the %s role; the token has %s", need, have)}
	}
	return nil
}

func (a *authenticator) role(r *http.Request) (Role, bool) {
	scheme, secret, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || secret == "" {
		return 0, false
	}
	return a.roleOf(strings.TrimSpace(secret))
}

// consoleAccess is what a token grants at the console's sign-in: admins
// may force-release, every other role may look.
func (a *authenticator) consoleAccess(secret string) adminui.Access {
	role, ok := a.roleOf(secret)
	switch {
	case !ok:
		return adminui.NoAccess
	case role == Admin:
		return adminui.FullAccess
	default:
		return adminui.ReadOnly
	}
}

func (a *authenticator) roleOf(secret string) (Role, bool) {
	digest := sha256.Sum256([]byte(secret))
	// Compare with every token, not stopping at a match, so the time taken
	// says nothing about which token matched.
	found, role := 0, public
	for i, d := range a.digests {
		match := subtle.ConstantTimeCompare(digest[:], d[:])
		if match == 1 && found == 0 {
			role = a.roles[i]
		}
		found |= match
	}
	return role, found == 1
}

// statusError is an error the server makes itself, matching a sentinel.
type statusError struct {
	sentinel error
	msg      string
}

func (e *statusError) Error() string        { return e.msg }
func (e *statusError) Is(target error) bool { return target == e.sentinel }

// loopbackHost reports whether a Host header names the loopback interface.
func loopbackHost(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = strings.Trim(hostport, "[]")
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
