package bench

import (
	"os"
	"syscall"
)

// syncData makes f's data durable, as the embedded store's log does.
func syncData(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
