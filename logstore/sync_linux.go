package logstore

import (
	"os"
	"syscall"
)

// fdatasync makes a file's data durable; the log needs no timestamps.
func fdatasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
