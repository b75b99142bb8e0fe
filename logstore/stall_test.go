package logstore

import (
	"os"
	"testing"
	"time"

	"github.com/holdfast/holdfast/internal/embeddedtest"
	"github.com/holdfast/holdfast/internal/keep"
	"github.com/holdfast/holdfast/store"
)

func openQuiet(dir string, now func() time.Time) (store.Store, error) {
	return Open(dir, Config{Now: now, Logger: quietLog})
}

func TestStalledDiskFailsClosedUntilItCompletes(t *testing.T) {
	embeddedtest.StalledDiskFailsClosedUntilItCompletes(t, openQuiet,
		func(dir string) (store.Store, error) {
			return Open(dir, Config{Logger: quietLog, Timeout: time.Second})
		},
		beforeSync)
}

func TestCallerWhoLeavesIsAnsweredWithTheCommit(t *testing.T) {
	embeddedtest.CallerWhoLeavesIsAnsweredWithTheCommit(t, openQuiet, beforeSync)
}

// beforeSync makes every later fdatasync of s call hook first.
func beforeSync(s store.Store, hook func()) {
	s.(*Store).syncFile = func(f *os.File) error {
		hook()
		return fdatasync(f)
	}
}

// A group bigger than maxSpare leaves its buffer to the next groups while
// such groups keep coming, and keep.For groups after the last of them
// the buffer goes, so that one bulk acquire does not pin it.
func TestBigGroupsKeepTheirBuffer(t *testing.T) {
	s := &Store{}
	big := make([]byte, maxSpare+1)
	s.keepSpare(big)
	if cap(s.spare) != cap(big) {
		t.Fatalf("after a group of %d bytes the spare holds %d, want its buffer kept", len(big), cap(s.spare))
	}
	for i := range keep.For {
		s.spare = nil // the next group took it
		s.keepSpare(big[:frameLen])
		if kept := s.spare != nil; kept != (i < keep.For-1) {
			t.Fatalf("small group %d after the big one: spare kept %t", i+1, kept)
		}
	}
}
