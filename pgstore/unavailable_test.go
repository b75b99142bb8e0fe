package pgstore_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast/holdfast/pgstore"
	"github.com/holdfast/holdfast/store"
)

// proxy forwards TCP connections to PostgreSQL until it is stopped, which
// cuts every connection at once, as a crashed or unreachable database
// would; start listens again on the same address.
type proxy struct {
	addr, target string
	mu           sync.Mutex
	ln           net.Listener
	conns        map[net.Conn]bool
	wg           sync.WaitGroup
}

func startProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{addr: ln.Addr().String(), target: target, conns: map[net.Conn]bool{}}
	p.serve(ln)
	t.Cleanup(p.stop)
	return p
}

func (p *proxy) start(t *testing.T) {
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		t.Fatal(err)
	}
	p.serve(ln)
}

func (p *proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns[c], p.conns[up] = true, true
			p.mu.Unlock()
			p.wg.Go(func() { io.Copy(up, c); up.Close() })
			p.wg.Go(func() { io.Copy(c, up); c.Close() })
		}
	})
}

func (p *proxy) stop() {
	p.mu.Lock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
	p.mu.Unlock()
	p.wg.Wait()
}

// When the database cannot be reached, every call fails with
// store.ErrUnavailable, nothing is decided, and the store serves again by
// itself once the database is back.
func TestUnreachableDatabaseIsUnavailable(t *testing.T) {
	t.Parallel()
	pool := testPool(t)
	schema := newSchema(t, pool)

	u, err := url.Parse(os.Getenv("HOLDFAST_TEST_POSTGRES"))
	if err != nil {
		t.Fatal(err)
	}
	p := startProxy(t, u.Host)
	u.Host = p.addr
	cfg, err := pgxpool.ParseConfig(u.String())
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.ConnectTimeout = 2 * time.Second
	viaProxy, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer viaProxy.Close()
	s := open(t, viaProxy, schema, nil)

	write := func() error {
		return s.Update(t.Context(), func(tx store.Tx) error {
			return tx.PutAggregate(store.Aggregate{Member: "asset/9", Root: "lease/3"})
		})
	}
	if err := write(); err != nil {
		t.Fatalf("Update through the proxy: %v", err)
	}

	p.stop()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for name, err := range map[string]error{
		"Ping":   s.Ping(ctx),
		"Update": write(),
		"View":   s.View(ctx, func(tx store.ReadTx) error { _, _, err := tx.Aggregate("asset/9"); return err }),
	} {
		if !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("%s with the database gone = %v, want ErrUnavailable", name, err)
		}
	}
	if _, err := pgstore.New(ctx, viaProxy, pgstore.Config{Schema: schema}); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("New with the database gone = %v, want ErrUnavailable", err)
	}

	p.start(t)
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping once the database is back: %v", err)
	}
	if err := write(); err != nil {
		t.Fatalf("Update once the database is back: %v", err)
	}
}

func TestClosedStoreIsUnavailable(t *testing.T) {
	t.Parallel()
	pool := testPool(t)
	s := open(t, pool, newSchema(t, pool), nil)
	s.Close()
	ctx := t.Context()
	for name, err := range map[string]error{
		"Ping":   s.Ping(ctx),
		"Update": s.Update(ctx, func(store.Tx) error { return nil }),
		"View":   s.View(ctx, func(store.ReadTx) error { return nil }),
	} {
		if !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("%s after Close = %v, want ErrUnavailable", name, err)
		}
	}
}
