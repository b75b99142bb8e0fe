package pebblestore_test

import (
	"testing"

	"github.com/holdfast/holdfast/internal/embeddedtest"
	"github.com/holdfast/holdfast/pebblestore"
)

// Memory counts what the store keeps in the heap, reports Pebble's
// memtable (it holds the writes just made), and still answers after Close.
func TestMemoryCountsRecordsAndPebble(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir(), embeddedtest.Fixed)
	embeddedtest.PutForMemory(t, s)
	m := s.Memory()
	want := pebblestore.Memory{Locks: 1, Sessions: 2, Lost: 2}
	if m.Locks != want.Locks || m.Sessions != want.Sessions || m.Lost != want.Lost {
		t.Errorf("records %+v, want %+v", m, want)
	}
	if m.MemTables == 0 {
		t.Errorf("no memtable bytes reported after a write: %+v", m)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if after := s.Memory(); after != want {
		t.Errorf("after Close %+v, want the counts only: %+v", after, want)
	}
}
