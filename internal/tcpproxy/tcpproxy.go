// Package tcpproxy is a TCP forwarder that tests put between holdfast and a
// database, to take the database away and bring it back without stopping
// the real server (which other tests use at the same time).
package tcpproxy

import (
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
	// open is closed while bytes pass; Stall replaces it with one that is
	// not, and the connections hold what they read until it is.
	open chan struct{}
	// stranded are the connections Strand held for good; Cut closes them.
	stranded map[net.Conn]bool
	never    chan struct{}
	wg       sync.WaitGroup
}

// New listens on a free loopback port and forwards to target (host:port).
// It stops when the test ends.
func New(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]bool{}, open: make(chan struct{}),
		stranded: map[net.Conn]bool{}, never: make(chan struct{})}
	close(p.open)
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
		p.wg.Go(func() { p.forward(up, c); up.Close() })
		p.wg.Go(func() { p.forward(c, up); c.Close() })
	}
}

// forward copies from src to dst, holding what it read while stalled, a
// close included.
func (p *Proxy) forward(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		p.mu.Lock()
		open := p.open
		if p.stranded[src] {
			open = p.never
		}
		p.mu.Unlock()
		<-open
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
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
	clear(p.stranded)
	p.openLocked() // what was held goes nowhere now
	close(p.never)
	p.never = make(chan struct{})
}

// Strand holds every byte of the connections open now, for good, while
// new connections pass: as their clients see it, a database that hangs
// on those connections (the proxy's kernel still acknowledges what they
// send, as a live host's does) while new ones are served. Only Cut ends
// them.
func (p *Proxy) Strand() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		p.stranded[c] = true
	}
}

// Stall stops passing bytes either way until Restore, and holds new
// connections too, without closing any: a database behind a network
// partition, or on a hung host, as its clients see it.
func (p *Proxy) Stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open:
		p.open = make(chan struct{})
	default: // stalled already
	}
}

// Restore accepts connections again, and passes what a Stall held.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
	p.openLocked()
}

func (p *Proxy) openLocked() {
	select {
	case <-p.open:
	default:
		close(p.open)
	}
}
