//go:build !linux

package bench

import "os"

func syncData(f *os.File) error { return f.Sync() }
