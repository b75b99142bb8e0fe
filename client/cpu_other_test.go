//go:build !unix

package client_test

import "time"

// processCPU is unknown here; the benchmark then reports no CPU time.
func processCPU() time.Duration { return 0 }
