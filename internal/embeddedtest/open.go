package embeddedtest

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/holdfast/holdfast/store"
)

// BenchmarkOpenMillionLocks measures restart-to-ready with 1,000,000 locks
// held by 10,000 sessions, and the heap they take once loaded.
func BenchmarkOpenMillionLocks(b *testing.B, open Open) {
	const locks, perSession = 1_000_000, 100
	dir := b.TempDir()
	s := open.MustOpen(b, dir, nil)
	now := time.Now().UTC()
	for batch := 0; batch < locks; batch += 10_000 {
		err := s.Update(context.Background(), func(tx store.Tx) error {
			for i := batch; i < batch+10_000; i++ {
				tok, _ := tx.NextToken()
				session := fmt.Sprintf("session-%05d", i/perSession)
				if i%perSession == 0 {
					tx.PutSession(store.Session{ID: session, User: "u-7", Name: "Bob Smith", LastSeen: now, IdleTimeout: 5 * time.Minute})
				}
				tx.PutLock(store.Lock{Key: fmt.Sprintf("policy/%07d", i), Session: session, User: "u-7", Name: "Bob Smith",
					Token: tok, AcquiredAt: now, ExpiresAt: now.Add(2 * time.Hour), Note: "underwriting review"})
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	s.Close()

	b.ResetTimer()
	for b.Loop() {
		s := open.MustOpen(b, dir, nil)
		b.StopTimer()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		b.ReportMetric(float64(m.HeapAlloc)/(1<<20), "MiB-heap")
		s.Close()
		b.StartTimer()
	}
}
