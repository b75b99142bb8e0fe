package memdb

import (
	"reflect"
	"testing"
	"time"
	"unsafe"

	"github.com/holdfast/holdfast/store"
)

// TestLockRecordKeepsEveryField stores locks in the compact record and
// reads them back unchanged, times in UTC to the nanosecond, the zero time
// as zero.
func TestLockRecordKeepsEveryField(t *testing.T) {
	t.Parallel()
	local := time.FixedZone("CET", 3600)
	for _, l := range []store.Lock{
		{Key: "order/1", Session: "s", User: "u", Name: "Bob Smith", Shared: true, Token: 1<<64 - 1,
			AcquiredAt: time.Date(2026, 11, 30, 10, 47, 0, 123456789, local), ExpiresAt: time.Date(2026, 11, 30, 11, 0, 0, 1, local), Note: "review"},
		{Key: "order/2", Session: "s\x00odd"}, // zero times
		{Key: "far", Session: "s", ExpiresAt: time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)},
		{Key: "early", Session: "s", AcquiredAt: time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC)},
	} {
		got := newLockRec(&l).lock()
		want := l
		want.AcquiredAt, want.ExpiresAt = l.AcquiredAt.UTC(), l.ExpiresAt.UTC()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("round trip:\n got %+v\nwant %+v", got, want)
		}
	}
}

// TestSessionRecordKeepsEveryField stores sessions in the compact record
// and reads them back unchanged, times in UTC.
func TestSessionRecordKeepsEveryField(t *testing.T) {
	t.Parallel()
	local := time.FixedZone("CET", 3600)
	for _, s := range []store.Session{
		{ID: "s-81", User: "u-7", Name: "Bob Smith", LastSeen: time.Date(2026, 11, 30, 10, 47, 0, 123456789, local),
			IdleTimeout: 5 * time.Minute, EndedAt: time.Date(2026, 11, 30, 11, 0, 0, 1, local), EndReason: "session_ended"},
		{ID: "s\x00odd"}, // zero times: live
		{ID: "epoch", EndedAt: time.Unix(0, 0)},
	} {
		r := newSessRec(&s)
		got := r.session()
		want := s
		want.LastSeen, want.EndedAt = s.LastSeen.UTC(), s.EndedAt.UTC()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("round trip:\n got %+v\nwant %+v", got, want)
		}
		if r.ended() != s.Ended() {
			t.Errorf("%s: ended() = %v, want %v", s.ID, r.ended(), s.Ended())
		}
	}
}

// TestExpiryOrderBeyondNanoseconds checks that expiries the index cannot
// hold in int64 nanoseconds still sort and expire by their exact time.
func TestExpiryOrderBeyondNanoseconds(t *testing.T) {
	t.Parallel()
	e := New(fixedClock, Options{})
	far := time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)
	putLocks(t, e,
		store.Lock{Key: "c", Session: "s", ExpiresAt: far.Add(time.Second)},
		store.Lock{Key: "a", Session: "s", ExpiresAt: far.Add(time.Nanosecond)},
		store.Lock{Key: "b", Session: "s", ExpiresAt: far},
		store.Lock{Key: "d", Session: "s", ExpiresAt: t0},
		store.Lock{Key: "z", Session: "s"}, // zero: expired since forever
	)
	for _, c := range []struct {
		now  time.Time
		want []string
	}{
		{t0.Add(-time.Second), []string{"z@s"}},
		{t0, []string{"z@s", "d@s"}},
		{far, []string{"z@s", "d@s", "b@s"}},
		{far.Add(time.Nanosecond), []string{"z@s", "d@s", "b@s", "a@s"}},
		{far.Add(time.Hour), []string{"z@s", "d@s", "b@s", "a@s", "c@s"}},
	} {
		var got []store.Lock
		view(t, e, func(tx store.ReadTx) (err error) { got, err = tx.ExpiredLocks(c.now, 0); return err })
		if g := keysOf(got); !reflect.DeepEqual(g, c.want) {
			t.Errorf("ExpiredLocks(%v) = %v, want %v", c.now, g, c.want)
		}
	}
}

// TestRecordSizes keeps the records in their size classes: a field more
// costs every held lock, session or lost record 16 bytes.
func TestRecordSizes(t *testing.T) {
	t.Parallel()
	if n := unsafe.Sizeof(lockRec{}); n != 112 {
		t.Errorf("lockRec is %d bytes, want 112", n)
	}
	if n := unsafe.Sizeof(lostRec{}); n > 176 {
		t.Errorf("lostRec is %d bytes, want 176 at most", n)
	}
	if n := unsafe.Sizeof(sessRec{}); n != 96 {
		t.Errorf("sessRec is %d bytes, want 96", n)
	}
}

// TestLocksShareTheSessionsStrings checks that a lock keeps the bytes of
// its session's record, not the caller's copies, for equal strings.
func TestLocksShareTheSessionsStrings(t *testing.T) {
	t.Parallel()
	e := New(fixedClock, Options{})
	mustUpdate(t, e, func(tx store.Tx) error {
		return tx.PutSession(store.Session{ID: "s-81", User: "u-7", Name: "Bob Smith", LastSeen: t0})
	})
	copyOf := func(s string) string { return string([]byte(s)) }
	putLocks(t, e, store.Lock{Key: "order/1", Session: copyOf("s-81"), User: copyOf("u-7"), Name: copyOf("Bob Smith")},
		store.Lock{Key: "order/2", Session: copyOf("s-81"), User: "u-other", Name: copyOf("Bob Smith")})
	sess := e.sessions["s-81"]
	for _, key := range []string{"order/1", "order/2"} {
		r := e.getLock(key, "s-81")
		if unsafe.StringData(r.session) != unsafe.StringData(sess.id) || unsafe.StringData(r.name) != unsafe.StringData(sess.name) {
			t.Errorf("%s keeps its own session or name bytes", key)
		}
	}
	if r := e.getLock("order/1", "s-81"); unsafe.StringData(r.user) != unsafe.StringData(sess.user) {
		t.Errorf("order/1 keeps its own user bytes")
	}
	if r := e.getLock("order/2", "s-81"); r.user != "u-other" {
		t.Errorf("order/2's user = %q, want u-other", r.user)
	}
}
