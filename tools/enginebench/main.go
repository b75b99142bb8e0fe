// Command enginebench measures the embedded engines holdfast could keep its
// durable copy in (bbolt and Pebble) under holdfast's write pattern: many
// callers, each waiting until its write is fsync'd, sharing fsyncs through
// group commit. It also measures loading a large lock table on open and
// the bytes it takes on disk. The figures and the decision are in
// docs/STORAGE.md.
package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"io/fs"
	"log"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// engine is the little that the benchmark needs from a store.
type engine interface {
	// commit writes ops in one transaction or batch and fsyncs it.
	commit(ops []op) error
	// scanLocks visits every lock record and returns how many there were.
	scanLocks(fn func(k, v []byte)) (int, error)
	close() error
}

type op struct {
	bucket byte // 'l' lock, 'a' audit, 'm' counter
	key    []byte
	value  []byte // nil: delete
}

type opener func(dir string) (engine, error)

var engines = map[string]opener{"bbolt": openBolt, "pebble": openPebble}

func main() {
	workers := flag.Int("workers", 64, "concurrent callers")
	duration := flag.Duration("duration", 10*time.Second, "how long each engine runs the acquire/release load")
	loadLocks := flag.Int("locks", 1_000_000, "lock records written, then loaded on reopen")
	dir := flag.String("dir", os.TempDir(), "where the engines' directories are made")
	only := flag.String("engine", "", "run only this engine (bbolt or pebble)")
	flag.Parse()

	names := []string{"bbolt", "pebble"}
	if *only != "" {
		names = []string{*only}
	}
	for _, name := range names {
		open := engines[name]
		if open == nil {
			log.Fatalf("unknown engine %q", name)
		}
		if err := run(name, open, *dir, *workers, *duration, *loadLocks); err != nil {
			log.Fatalf("%s: %v", name, err)
		}
	}
}

func run(name string, open opener, parent string, workers int, d time.Duration, n int) error {
	dir, err := os.MkdirTemp(parent, "enginebench-"+name+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	e, err := open(filepath.Join(dir, "load"))
	if err != nil {
		return err
	}
	ops, lat, groups, err := acquireRelease(e, workers, d)
	if err != nil {
		return err
	}
	if err := e.close(); err != nil {
		return err
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	fmt.Printf("%-6s acquire+release: %d pairs in %s = %.0f pairs/s (%d ops/s), %d groups (%.1f ops/group), latency p50 %s p99 %s\n",
		name, ops, d, float64(ops)/d.Seconds(), int(2*float64(ops)/d.Seconds()), groups, 2*float64(ops)/float64(groups),
		lat[len(lat)/2].Round(time.Microsecond), lat[len(lat)*99/100].Round(time.Microsecond))

	tableDir := filepath.Join(dir, "table")
	e, err = open(tableDir)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := writeLocks(e, n); err != nil {
		return err
	}
	written := time.Since(start)
	if err := e.close(); err != nil {
		return err
	}
	size := du(tableDir)
	start = time.Now()
	e, err = open(tableDir)
	if err != nil {
		return err
	}
	var bytes int
	count, err := e.scanLocks(func(k, v []byte) { bytes += len(k) + len(v) })
	if err != nil {
		return err
	}
	loaded := time.Since(start)
	if err := e.close(); err != nil {
		return err
	}
	if count != n {
		return fmt.Errorf("loaded %d locks, wrote %d", count, n)
	}
	fmt.Printf("%-6s %d locks: written in %s, open+scan %s (%.0f MB of records), %.0f MB on disk\n",
		name, n, written.Round(time.Millisecond), loaded.Round(time.Millisecond), float64(bytes)/1e6, float64(size)/1e6)
	return nil
}

// acquireRelease runs workers callers for d; each one acquires (puts a lock,
// moves the token counter, appends an audit record) and releases (deletes
// the lock, appends an audit record), each waiting for its fsync.
func acquireRelease(e engine, workers int, d time.Duration) (pairs int64, lat []time.Duration, groups int64, err error) {
	gc := newGroupCommitter(e)
	defer gc.stop()
	var (
		done     atomic.Bool
		count    atomic.Int64
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
	)
	lats := make([][]time.Duration, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lockKey := fmt.Appendf(nil, "order/%d\x00session-%d", w, w)
			for i := 0; !done.Load(); i++ {
				t0 := time.Now()
				token := gc.nextSeq()
				acquire := []op{
					{bucket: 'l', key: lockKey, value: record(150, token)},
					{bucket: 'm', key: []byte("token"), value: binary.BigEndian.AppendUint64(nil, token)},
					{bucket: 'a', key: binary.BigEndian.AppendUint64(nil, gc.nextSeq()), value: record(200, token)},
				}
				release := []op{
					{bucket: 'l', key: lockKey},
					{bucket: 'a', key: binary.BigEndian.AppendUint64(nil, gc.nextSeq()), value: record(200, token)},
				}
				if err := gc.write(acquire); err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
					return
				}
				t1 := time.Now()
				if err := gc.write(release); err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
					return
				}
				lats[w] = append(lats[w], t1.Sub(t0), time.Since(t1))
				count.Add(1)
			}
		}()
	}
	time.Sleep(d)
	done.Store(true)
	wg.Wait()
	for _, l := range lats {
		lat = append(lat, l...)
	}
	return count.Load(), lat, gc.groups.Load(), firstErr
}

// groupCommitter writes whatever is pending in one commit while the next
// group fills: no timer, so a lone caller pays one commit and no wait.
type groupCommitter struct {
	e      engine
	seq    atomic.Uint64
	groups atomic.Int64

	mu      sync.Mutex
	pending []op
	waiters []chan error
	wake    chan struct{}
	quit    chan struct{}
	stopped chan struct{}
}

func newGroupCommitter(e engine) *groupCommitter {
	g := &groupCommitter{e: e, wake: make(chan struct{}, 1), quit: make(chan struct{}), stopped: make(chan struct{})}
	go g.loop()
	return g
}

func (g *groupCommitter) nextSeq() uint64 { return g.seq.Add(1) }

func (g *groupCommitter) write(ops []op) error {
	ch := make(chan error, 1)
	g.mu.Lock()
	g.pending = append(g.pending, ops...)
	g.waiters = append(g.waiters, ch)
	g.mu.Unlock()
	select {
	case g.wake <- struct{}{}:
	default:
	}
	return <-ch
}

func (g *groupCommitter) loop() {
	defer close(g.stopped)
	for {
		select {
		case <-g.quit:
			return
		case <-g.wake:
		}
		for {
			g.mu.Lock()
			ops, waiters := g.pending, g.waiters
			g.pending, g.waiters = nil, nil
			g.mu.Unlock()
			if len(waiters) == 0 {
				break
			}
			err := g.e.commit(ops)
			g.groups.Add(1)
			for _, w := range waiters {
				w <- err
			}
		}
	}
}

func (g *groupCommitter) stop() {
	close(g.quit)
	<-g.stopped
}

// writeLocks fills the lock table with n records of about 150 bytes, in
// batches of 10,000.
func writeLocks(e engine, n int) error {
	const batch = 10_000
	ops := make([]op, 0, batch)
	for i := range n {
		ops = append(ops, op{bucket: 'l', key: fmt.Appendf(nil, "policy/%08d\x00session-%d", i, i%5000), value: record(150, uint64(i))})
		if len(ops) == batch || i == n-1 {
			if err := e.commit(ops); err != nil {
				return err
			}
			ops = ops[:0]
		}
	}
	return nil
}

// record is a value of size bytes that does not compress to nothing.
func record(size int, seed uint64) []byte {
	b := make([]byte, size)
	x := seed*0x9e3779b97f4a7c15 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = 'a' + byte(x%26)
	}
	return b
}

func du(dir string) int64 {
	var total int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				total += info.Size()
			}
		}
		return nil
	})
	return total
}
