package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// process is a server the bench measures: one it started, or one it found
// listening on a peer's port.
type process struct {
	name string
	url  string
	pid  int
	cmd  *exec.Cmd     // nil when not started by the bench
	done chan struct{} // closed when a started process has exited
	logs strings.Builder
	// also is a process whose CPU counts as this one's: the PostgreSQL
	// that a holdfast server over PostgreSQL does its work in.
	also *process
}

// startProcess runs exe with "--listen ADDR" appended, on a free loopback
// port, and waits until it answers GET /readyz.
func startProcess(ctx context.Context, name, exe string, args ...string) (*process, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, append(args, "--listen", addr)...)
	cmd.Env = append(os.Environ(), "HOLDFAST_CONFIG=", "HOLDFAST_LISTEN=", "HOLDFAST_STORE=", "HOLDFAST_TOKENS=")
	cmd.SysProcAttr = serverAttr()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, url: "http://" + addr, pid: cmd.Process.Pid, cmd: cmd, done: make(chan struct{})}
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
		io.Copy(io.Discard, stderr)
		cmd.Wait()
		close(p.done)
	}()
	readyCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	ready := make(chan error, 1)
	go func() { ready <- waitReady(readyCtx, p.url) }()
	select {
	case err := <-ready:
		if err != nil {
			p.stop()
			return nil, fmt.Errorf("%s was not ready: %w: %s", name, err, drain(lines))
		}
		return p, nil
	case <-p.done:
		return nil, fmt.Errorf("%s exited before it was ready: %s", name, drain(lines))
	}
}

// freeAddr returns a loopback address with a port that was free a moment
// ago.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func drain(lines chan string) string {
	var out []string
	for {
		select {
		case l := <-lines:
			out = append(out, l)
		default:
			return strings.Join(out, "\n")
		}
	}
}

// stop ends a started process gracefully (SIGTERM), then for good.
func (p *process) stop() error {
	if p == nil || p.cmd == nil {
		return nil
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
	return nil
}

// attach finds the process that listens on the host:port of addr (a URL
// or host:port), to measure it, when that is a loopback address.
func attach(addr string) (*process, bool) {
	if u, err := url.Parse(addr); err == nil && u.Host != "" {
		addr = u.Host
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, false
	}
	// The listener is found by its port alone: a process of this machine
	// is the one meant only when the address is this machine's loopback.
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, false
	}
	pid, ok := listenerPID(addr)
	if !ok {
		return nil, false
	}
	return &process{name: addr, pid: pid}, true
}

// cpu is the process's CPU time so far, with its descendants' and that
// of the process it works through, if any.
func (p *process) cpu() (time.Duration, bool) {
	if p == nil {
		return 0, false
	}
	total, ok := procCPU(p.pid)
	if p.also != nil {
		also, alsoOK := p.also.cpu()
		total, ok = total+also, ok && alsoOK
	}
	return total, ok
}

// pgAddr is the host:port a PostgreSQL DSN names.
func pgAddr(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.Host == "" {
		return ""
	}
	if u.Port() == "" {
		return net.JoinHostPort(u.Hostname(), "5432")
	}
	return u.Host
}

func numCPU() int { return runtime.NumCPU() }
