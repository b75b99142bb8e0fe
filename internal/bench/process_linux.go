package bench

import "syscall"

// serverAttr has the kernel send a started server SIGTERM once the bench
// is gone, so that a bench killed before it could stop its servers
// (SIGKILL, or SIGPIPE from a closed stdout) leaves none holding a port.
// Linux sends it when the thread that started the server exits, and Go
// ends a thread only when a goroutine locked to it ends, which the bench
// does not do.
func serverAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
