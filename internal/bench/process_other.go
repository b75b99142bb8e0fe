//go:build !linux

package bench

import "syscall"

// serverAttr is nothing here: only Linux can end a server with the
// bench that started it.
func serverAttr() *syscall.SysProcAttr { return nil }
