//go:build !unix

package dirlock

import "os"

// Lock creates path exclusively where flock is not available; a crash
// leaves it behind, to be removed by hand.
func Lock(path string) (func() error, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	return func() error {
		f.Close()
		return os.Remove(path)
	}, nil
}
