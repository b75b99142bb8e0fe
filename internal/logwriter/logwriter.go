// Package logwriter gives the server's log a writer that does not make
// every request pay a system call: the lines logged while one write is
// under way go out together in the next.
package logwriter

import (
	"io"
	"sync"
)

// maxPending bounds the bytes waiting for a write: past it, callers wait
// for the writer to catch up rather than grow memory or drop lines.
const maxPending = 1 << 20

// Writer passes what it is given to an underlying writer, in order and
// whole, from a goroutine of its own: each Write only copies, and the
// goroutine writes whatever has come since its last write in one call.
// With nothing under way a line goes out at once; under load many share
// a write. Each Write to it should be one whole record, as slog's
// handlers make.
type Writer struct {
	out   io.Writer
	outMu sync.Mutex // held across taking what is pending and writing it, so writes keep their order

	mu      sync.Mutex
	drained sync.Cond // broadcast after each write, and at Close
	pending []byte
	spare   []byte // the last buffer written, for reuse
	closed  bool
	wake    chan struct{} // closed by Close, under mu

	done chan struct{}
}

// New starts a Writer to out; Close stops it.
func New(out io.Writer) *Writer {
	w := &Writer{out: out, wake: make(chan struct{}, 1), done: make(chan struct{})}
	w.drained.L = &w.mu
	go w.run()
	return w
}

// Write copies p to be written and returns at once, unless maxPending
// bytes are already waiting. It never fails: a log line that cannot be
// written has nowhere to be reported. After Close it writes p itself.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	for len(w.pending) >= maxPending && !w.closed {
		w.drained.Wait()
	}
	first := len(w.pending) == 0
	w.pending = append(w.pending, p...)
	closed := w.closed
	if first && !closed {
		// Lines already pending were signalled by the first of them, and
		// the goroutine takes them all at once.
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
	w.mu.Unlock()
	if closed {
		w.flush()
	}
	return len(p), nil
}

func (w *Writer) run() {
	defer close(w.done)
	for range w.wake {
		w.flush()
	}
}

// flush writes everything pending in one call.
func (w *Writer) flush() {
	w.outMu.Lock()
	defer w.outMu.Unlock()
	w.mu.Lock()
	buf := w.pending
	w.pending, w.spare = w.spare[:0], nil
	w.mu.Unlock()
	if len(buf) > 0 {
		w.out.Write(buf)
	}
	w.mu.Lock()
	if cap(buf) <= 2*maxPending {
		w.spare = buf[:0]
	}
	w.drained.Broadcast()
	w.mu.Unlock()
}

// Close writes what is pending and stops the goroutine; later writes go
// straight to the underlying writer.
func (w *Writer) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	close(w.wake)
	w.drained.Broadcast()
	w.mu.Unlock()
	<-w.done
	w.flush()
	return nil
}
