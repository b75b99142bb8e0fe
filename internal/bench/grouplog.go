package bench

import (
	"errors"
	"os"
	"sync"
	"time"
)

// groupLogSize is the region a groupLog writes round and round: written
// once at the start, so that no sync waits for the file to grow or for
// blocks to be allocated.
const groupLogSize = 16 << 20

// maxLogGroup bounds how many bodies share one write and one sync.
const maxLogGroup = 1024

// groupLog makes request bodies durable with the simplest group commit:
// one goroutine takes every body that is waiting, writes them with one
// pwrite over the file's written region, makes them durable with one
// fdatasync and answers them all. The durable trivial handler waits for
// it before answering, so that its row shows what durability costs on the
// machine without a lock, a transaction or an index.
//
// Without a file it writes nothing and sleeps for wait instead of the
// write and the sync: a disk that syncs in that time at no cost in CPU.
type groupLog struct {
	f      *os.File
	size   int64 // of the region
	wait   time.Duration
	writes chan logWrite
	done   chan struct{}
	once   sync.Once
}

type logWrite struct {
	body []byte
	done chan error
}

var errLogClosed = errors.New("bench: the durable trivial handler's log is closed")

// openGroupLog creates the log at path, writes and syncs its region of
// size bytes, and starts its writer.
func openGroupLog(path string, size int64) (*groupLog, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	if err := writeRegion(f, size); err != nil {
		f.Close()
		return nil, err
	}
	return startGroupLog(&groupLog{f: f, size: size}), nil
}

// waitingGroupLog starts a log that keeps nothing and answers each group
// after wait.
func waitingGroupLog(wait time.Duration) *groupLog {
	return startGroupLog(&groupLog{wait: wait})
}

func startGroupLog(l *groupLog) *groupLog {
	l.writes, l.done = make(chan logWrite, maxLogGroup), make(chan struct{})
	go l.run()
	return l
}

// append returns once body is durable, or with why it is not.
func (l *groupLog) append(body []byte) error {
	w := logWrite{body: body, done: make(chan error, 1)}
	select {
	case l.writes <- w:
	case <-l.done:
		return errLogClosed
	}
	select {
	case err := <-w.done:
		return err
	case <-l.done:
		return errLogClosed
	}
}

// Close stops the writer and closes the file. Appends after it, or
// waiting when it comes, fail.
func (l *groupLog) Close() error {
	l.once.Do(func() { close(l.done) })
	if l.f == nil {
		return nil
	}
	return l.f.Close()
}

func (l *groupLog) run() {
	var (
		group []logWrite
		buf   []byte
		off   int64
	)
	for {
		select {
		case w := <-l.writes:
			group = append(group[:0], w)
		case <-l.done:
			return
		}
	fill:
		for len(group) < maxLogGroup {
			select {
			case w := <-l.writes:
				group = append(group, w)
			default:
				break fill
			}
		}
		var err error
		if l.f == nil {
			time.Sleep(l.wait)
		} else {
			buf = buf[:0]
			for _, w := range group {
				buf = append(buf, w.body...)
			}
			if off+int64(len(buf)) > l.size {
				off = 0
			}
			_, err = l.f.WriteAt(buf, off)
			off += int64(len(buf))
			if err == nil {
				err = syncData(l.f)
			}
		}
		for _, w := range group {
			w.done <- err
		}
		clear(group) // pin no bodies
	}
}
