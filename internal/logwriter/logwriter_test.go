package logwriter

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// gate is an io.Writer whose writes wait until it is opened, and which
// counts them.
type gate struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	writes int
	open   chan struct{}
	in     chan struct{} // receives once a write has begun
}

func newGate() *gate { return &gate{open: make(chan struct{}), in: make(chan struct{}, 1)} }

func (g *gate) Write(p []byte) (int, error) {
	select {
	case g.in <- struct{}{}:
	default:
	}
	<-g.open
	g.mu.Lock()
	defer g.mu.Unlock()
	g.writes++
	return g.buf.Write(p)
}

func (g *gate) String() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.buf.String()
}

// Every line written by many goroutines comes out once, whole, and in
// each goroutine's order.
func TestEveryLineInOrder(t *testing.T) {
	g := newGate()
	close(g.open)
	w := New(g)
	const writers, lines = 16, 500
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			for j := range lines {
				fmt.Fprintf(w, "writer=%d line=%d %s\n", i, j, strings.Repeat("x", j%97))
			}
		})
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	next := make([]int, writers)
	out := strings.Split(strings.TrimSuffix(g.String(), "\n"), "\n")
	if len(out) != writers*lines {
		t.Fatalf("%d lines, want %d", len(out), writers*lines)
	}
	for _, line := range out {
		var i, j int
		var xs string
		if _, err := fmt.Sscanf(line, "writer=%d line=%d %s", &i, &j, &xs); err != nil && j%97 != 0 {
			t.Fatalf("a torn line %q: %v", line, err)
		}
		if j != next[i] || len(xs) != j%97 {
			t.Fatalf("writer %d: line %q, want line %d", i, line, next[i])
		}
		next[i]++
	}
}

// Lines logged while a write is under way go out together in the next
// write, not one write each.
func TestLinesShareAWrite(t *testing.T) {
	g := newGate()
	w := New(g)
	fmt.Fprintln(w, "first")
	<-g.in // the first write is under way, and waits
	for i := range 100 {
		fmt.Fprintln(w, "meanwhile", i)
	}
	close(g.open)
	w.Close()
	if g.writes != 2 {
		t.Fatalf("%d writes for 101 lines, want 2 (the first, then the 100 that came while it was under way)", g.writes)
	}
	if got := strings.Count(g.String(), "\n"); got != 101 {
		t.Fatalf("%d lines out, want 101", got)
	}
}

// When the underlying writer falls behind by maxPending bytes, Write
// waits for it rather than grow without bound or drop lines.
func TestWaitsWhenBehind(t *testing.T) {
	g := newGate()
	w := New(g)
	fmt.Fprintln(w, "first")
	<-g.in
	line := strings.Repeat("y", 1023) + "\n"
	for range maxPending / len(line) {
		w.Write([]byte(line))
	}
	blocked := make(chan struct{})
	go func() {
		w.Write([]byte(line))
		close(blocked)
	}()
	select {
	case <-blocked:
		t.Fatal("a Write with maxPending bytes waiting returned before the writer caught up")
	case <-time.After(50 * time.Millisecond):
	}
	close(g.open)
	<-blocked
	w.Close()
	if got, want := len(g.String()), len("first\n")+(maxPending/len(line)+1)*len(line); got != want {
		t.Fatalf("%d bytes out, want %d", got, want)
	}
}

// After Close, a Write goes straight to the underlying writer.
func TestWriteAfterClose(t *testing.T) {
	var buf bytes.Buffer
	w := New(&buf)
	fmt.Fprintln(w, "before")
	w.Close()
	fmt.Fprintln(w, "after")
	if got := buf.String(); got != "before\nafter\n" {
		t.Fatalf("got %q", got)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkRequestLog logs a request line like the server's from 64
// goroutines to a file, straight and through a Writer.
func BenchmarkRequestLog(b *testing.B) {
	for _, coalesce := range []bool{false, true} {
		name := "Direct"
		if coalesce {
			name = "Coalesced"
		}
		b.Run(name, func(b *testing.B) {
			f, err := os.Create(filepath.Join(b.TempDir(), "log"))
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			var out io.Writer = f
			if coalesce {
				w := New(f)
				defer w.Close()
				out = w
			}
			log := slog.New(slog.NewTextHandler(out, nil))
			b.SetParallelism(32)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					log.LogAttrs(context.Background(), slog.LevelInfo, "request",
						slog.String("method", "POST"), slog.String("route", "/v1/locks/acquire"),
						slog.String("path", "/v1/locks/acquire"), slog.Int("status", 200),
						slog.Duration("duration", 5*time.Millisecond), slog.String("remote", "127.0.0.1:52150"))
				}
			})
		})
	}
}
