package logstore_test

import (
	"testing"

	"github.com/holdfast/holdfast/internal/embeddedtest"
	"github.com/holdfast/holdfast/logstore"
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
