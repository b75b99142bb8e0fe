package soak_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/logstore"
)

// BenchmarkRecordHeap measures what the embedded store holdfast serve
// opens (logstore) holds in the heap per record, for sizing
// (docs/GUARANTEES.md): a live session, a lock, and the lost-lock record
// a release leaves for the retention (24 hours).
//
//	go test -run '^$' -bench RecordHeap -benchtime 1x ./internal/soak/
func BenchmarkRecordHeap(b *testing.B) {
	const n = 20_000
	for b.Loop() {
		b.StopTimer()
		quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
		st, err := logstore.Open(filepath.Join(b.TempDir(), "data"), logstore.Config{Logger: quiet})
		if err != nil {
			b.Fatal(err)
		}
		m, err := holdfast.New(st, holdfast.Config{Logger: quiet, SweepInterval: -1})
		if err != nil {
			b.Fatal(err)
		}
		session := func(i int) string { return fmt.Sprintf("soak-%d-%d", i%workers, i) }
		key := func(i int) string { return fmt.Sprintf("soak/%d", i) }
		// Each step runs on every record, from workers goroutines so that
		// they share fsyncs.
		each := func(do func(ctx context.Context, i int) error) uint64 {
			var wg sync.WaitGroup
			for w := range workers {
				wg.Go(func() {
					for i := w; i < n; i += workers {
						if err := do(b.Context(), i); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			return ms.HeapAlloc
		}
		before := each(func(context.Context, int) error { return nil })
		sessions := each(func(ctx context.Context, i int) error {
			_, err := m.Heartbeat(ctx, holdfast.HeartbeatRequest{Session: session(i), IdleTimeout: holdfast.Duration(time.Hour)})
			return err
		})
		locks := each(func(ctx context.Context, i int) error {
			_, err := m.Acquire(ctx, holdfast.AcquireRequest{Keys: []string{key(i)}, Owner: holdfast.Owner{Session: session(i), Name: session(i)}})
			return err
		})
		released := each(func(ctx context.Context, i int) error {
			_, err := m.Release(ctx, holdfast.ReleaseRequest{Session: session(i), Keys: []string{key(i)}})
			return err
		})
		if mem := st.Memory(); mem.Sessions != n || mem.Locks != 0 || mem.Lost != n {
			b.Fatalf("records %+v, want %d sessions and lost records and no lock", mem, n)
		}
		b.ReportMetric(perRecord(sessions, before, n), "B/session")
		b.ReportMetric(perRecord(locks, sessions, n), "B/lock")
		b.ReportMetric(perRecord(released, sessions, n), "B/lost")
		m.Close()
		if err := st.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

func perRecord(after, before uint64, n int) float64 {
	return (float64(after) - float64(before)) / float64(n)
}
