// Package soak holds the soak test of holdfast: ten thousand sessions
// heartbeating, acquiring and releasing, and pages coming and going,
// against a real server on the embedded store holdfast serve opens
// (logstore), in rounds. The store's clock gains 12 hours a round, so
// retention (24 hours) passes every two rounds. Between rounds the heap,
// which holds all of logstore's records, the store's record counts and
// the goroutines are sampled; after the first third of the run none may
// grow. It has no code of its own; run it with
//
//	HOLDFAST_SOAK=10m go test -run TestSoak -v -timeout 0 ./internal/soak/
//
// Without HOLDFAST_SOAK it runs ten rounds (ten seconds or so), as in CI.
// HOLDFAST_SOAK_PROFILE=dir writes a heap profile at every sample, for
//
//	go tool pprof -sample_index=inuse_space -diff_base dir/heap-round00004.pprof dir/heap-round00010.pprof
package soak
