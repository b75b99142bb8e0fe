package bench

import (
	"fmt"
	"os"
	"time"
)

// diskSyncs is how many writes the disk probe times.
const diskSyncs = 500

// diskBlock is the size of each timed write.
const diskBlock = 512

// probeDisk times the least a durable commit costs the disk under dir:
// n writes of diskBlock bytes over blocks the file already has, each
// followed by fdatasync, as `dd oflag=dsync conv=notrunc` does and as the
// embedded store's log is written. A single client's acquire is one such
// commit plus one HTTP round trip, so the table sets its latency beside
// this one (printLatency).
func probeDisk(dir string, n int) (row, error) {
	f, err := os.CreateTemp(dir, "holdfast-bench-disk-*")
	if err != nil {
		return row{}, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if err := writeRegion(f, int64(n*diskBlock)); err != nil {
		return row{}, err
	}
	block := make([]byte, diskBlock)
	took := make([]time.Duration, 0, n)
	start := time.Now()
	for i := range n {
		t := time.Now()
		if _, err := f.WriteAt(block, int64(i*diskBlock)); err != nil {
			return row{}, err
		}
		if err := syncData(f); err != nil {
			return row{}, err
		}
		took = append(took, time.Since(t))
	}
	elapsed := time.Since(start)
	var l latencies
	l.add(took)
	return row{ops: int64(n), elapsed: elapsed, p50: l.percentile(50), p99: l.percentile(99), unit: "syncs/s",
		note: fmt.Sprintf("%d writes of %d B in %s", n, diskBlock, dir)}, nil
}

// writeRegion writes size zero bytes to f and syncs them, so that writes
// over them later change no size and allocate no blocks: fdatasync then
// flushes data alone.
func writeRegion(f *os.File, size int64) error {
	if _, err := f.Write(make([]byte, size)); err != nil {
		return err
	}
	return syncData(f)
}
