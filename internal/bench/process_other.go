//go:build !linux

package bench

import "syscall"

func serverAttr() *syscall.SysProcAttr { return nil }
