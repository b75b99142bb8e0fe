//go:build unix

package pebblestore

import "github.com/holdfast/holdfast/internal/dirlock"

// lockDir is dirlock's flock where there is one; elsewhere Pebble's own
// lock is kept (lock_other.go), as dirlock's fallback would leave a file
// behind after a crash.
var lockDir = dirlock.Lock
