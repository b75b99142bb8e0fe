// Package soak holds the soak test of holdfast: ten thousand sessions
// heartbeating, acquiring and releasing against a real server on the
// embedded store for a bounded time, with memory and goroutine counts
// reported and required to stay flat. It has no code of its own; run it
// with
//
//	HOLDFAST_SOAK=10m go test -run TestSoak -v -timeout 0 ./internal/soak/
//
// Without HOLDFAST_SOAK it runs three rounds of every session (a few
// seconds), as in CI.
package soak
