package logstore_test

import (
	"fmt"
	"testing"

	"github.com/holdfast/holdfast/internal/embeddedtest"
	"github.com/holdfast/holdfast/logstore"
	"github.com/holdfast/holdfast/store"
)

// Memory counts what the store keeps in the heap, and still answers after
// Close.
func TestMemoryCountsRecords(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir(), embeddedtest.Fixed)
	embeddedtest.PutForMemory(t, s)
	want := logstore.Memory{Locks: 1, Sessions: 2, Lost: 2}
	if m := s.Memory(); m != want {
		t.Errorf("records %+v, want %+v", m, want)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if after := s.Memory(); after != want {
		t.Errorf("after Close %+v, want %+v", after, want)
	}
}

// Each commit that waits for the disk is made durable by an fdatasync,
// which Syncs counts: commits one after another cannot share one.
func TestSyncsCountsTheLogsSyncs(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir(), embeddedtest.Fixed)
	defer s.Close()
	before := s.Syncs()
	const n = 5
	for i := range n {
		err := s.Update(t.Context(), func(tx store.Tx) error {
			return tx.PutSession(store.Session{ID: fmt.Sprintf("s-%d", i), User: "u"})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	after := s.Syncs()
	if got := after.Syncs - before.Syncs; got != n {
		t.Errorf("%d syncs for %d commits one after another, want %d", got, n, n)
	}
	if after.Time <= before.Time {
		t.Errorf("sync time %v after %v: the syncs took no time", after.Time, before.Time)
	}
}
