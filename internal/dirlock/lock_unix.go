//go:build unix

package dirlock

import (
	"os"
	"syscall"
)

// Lock takes an exclusive lock on path, held until the returned
// function runs. flock belongs to the open file, so a second Open in the
// same process is refused too.
func Lock(path string) (unlock func() error, err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, err
	}
	return f.Close, nil
}
