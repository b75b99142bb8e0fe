package server

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
)

func TestSentIDsTellEachIDOnce(t *testing.T) {
	var s sentIDs
	add := func(id uint64, want bool) {
		t.Helper()
		if got := s.add(id); got != want {
			t.Fatalf("add(%d) = %v, want %v (since %d, floor %d, top %d)", id, got, want, s.since, s.floor, s.top)
		}
	}
	replayFrom := func(want uint64) {
		t.Helper()
		if got := s.replayFrom(); got != want {
			t.Fatalf("replayFrom() = %d, want %d", got, want)
		}
	}
	add(0, false) // not an audit ID
	// A stream that did not resume begins at its first entry, but one
	// below it that commits later is still sent; catching up does not
	// reach back before the first.
	add(100, true)
	add(99, true)
	add(99, false)
	add(100, false)
	replayFrom(99)
	// Out of order within the window: each once.
	add(110, true)
	add(105, true)
	add(105, false)
	add(101, true)
	// The window moves: what falls below it counts as sent, and the
	// slots it reuses start clear.
	add(100+sentWindow, true)
	add(101, false)
	add(104, true)
	add(100+sentWindow-1, true)
	add(105+sentWindow, true) // reuses the slots of 101 to 105
	add(104, false)
	add(106, true)
	add(110, false)
	add(110+sentWindow, true) // reuses 110's slot
	add(110, false)
	add(110+sentWindow, false)
	add(109+sentWindow, true)
	replayFrom(110)
	// A move of one less than the window keeps the old top's slot.
	add(10*sentWindow-1, true)
	add(11*sentWindow-2, true)
	add(10*sentWindow-1, false)
	// A jump past the whole window clears every slot.
	add(10*sentWindow, true)
	add(10*sentWindow+1, true)
	add(12*sentWindow, true)
	add(11*sentWindow+1, true) // 10*sentWindow+1's slot
	add(11*sentWindow, false)
	replayFrom(11 * sentWindow)

	// Resuming counts everything up to Last-Event-ID as sent.
	s.resume(500)
	replayFrom(500)
	add(500, false)
	add(499, false)
	add(501, true)
	s.resume(0)
	add(1, true)
}

// A replayed entry below what the stream sent live goes out with the
// highest ID sent before it as its cursor, so that a client that resumes
// from it skips nothing it was not sent.
func TestReplayedEntriesCarryTheCursorOfTheirTurn(t *testing.T) {
	rec := httptest.NewRecorder()
	st := &stream{w: rec, rc: http.NewResponseController(rec)}
	entry := func(id uint64) holdfast.AuditEntry {
		return holdfast.AuditEntry{ID: id, At: holdfast.Time(time.Unix(0, 0).UTC()), Event: "acquired"}
	}
	if err := st.send(entry(100)); err != nil {
		t.Fatal(err)
	}
	for _, id := range []uint64{95, 100, 101} {
		st.queue(entry(id))
	}
	if err := st.flushPending(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for ev := range strings.SplitSeq(strings.TrimSpace(rec.Body.String()), "\n\n") {
		lines := strings.Split(ev, "\n")
		id, _ := strings.CutPrefix(lines[0], "id: ")
		_, data, _ := strings.Cut(lines[2], `"id":`)
		entryID, _, _ := strings.Cut(data, ",")
		got = append(got, id+"/"+entryID)
	}
	if strings.Join(got, " ") != "100/100 100/95 101/101" {
		t.Fatalf("cursor/entry of each event = %v, want [100/100 100/95 101/101]", got)
	}
}
