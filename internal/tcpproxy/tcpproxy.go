// Package tcpproxy is a TCP forwarder that tests put between holdfast and a
// database, to take the database away and bring it back without stopping
// the real server (which other tests use at the same time).
package tcpproxy

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Proxy forwards every connection to its target until Cut.
type Proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	down  bool
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

// New listens on a free loopback port and forwards to target (host:port).
// It stops when the test ends.
func New(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	p.wg.Go(p.serve)
	t.Cleanup(func() {
		ln.Close()
		p.Cut()
		p.wg.Wait()
	})
	return p
}

// Addr is the host:port to connect to instead of the target.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

func (p *Proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.isDown() {
			c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		// Asked again as the pair is registered, under the lock Cut
		// holds: a Cut that lands while the target is being dialled must
		// not miss this connection.
		p.mu.Lock()
		down := p.down
		if !down {
			p.conns[c], p.conns[up] = true, true
		}
		p.mu.Unlock()
		if down {
			c.Close()
			up.Close()
			continue
		}
		p.wg.Go(func() { io.Copy(up, c); up.Close() })
		p.wg.Go(func() { io.Copy(c, up); c.Close() })
	}
}

func (p *Proxy) isDown() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.down
}

// Cut drops every open connection and refuses new ones until Restore, as a
// database that went away looks to its clients.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// Restore accepts connections again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}
