package memdb

import (
	"fmt"
	"reflect"
	"testing"
	"time"
	"unsafe"

	"github.com/holdfast/holdfast/store"
)

// TestLoaderCopiesBorrowedStrings restores locks whose strings all point
// into one buffer that is overwritten after every call, as pebblestore's
// in-place decoding does, and checks the engine against one filled by
// transactions.
func TestLoaderCopiesBorrowedStrings(t *testing.T) {
	t.Parallel()
	var locks []store.Lock
	for i := range 3*loadBatch + 17 { // several batches and a partial one
		l := lockOn(fmt.Sprintf("order/%d", i%997), fmt.Sprintf("s-%d", i/997), time.Duration(i%50)*time.Minute)
		l.Name, l.Shared, l.Token = "Bob Smith", i%3 == 0, uint64(i+1)
		if i%5 == 0 {
			l.Note = fmt.Sprintf("note %d", i)
		}
		locks = append(locks, l)
	}
	want := New(fixedClock, Options{})
	putLocks(t, want, locks...)

	got := New(fixedClock, Options{})
	ld := got.Load()
	buf := make([]byte, 0, 256)
	borrow := func(s string) string {
		buf = append(buf, s...)
		return unsafe.String(unsafe.SliceData(buf[len(buf)-len(s):]), len(s))
	}
	for _, l := range locks {
		buf = buf[:0]
		b := l
		b.Key, b.Session, b.User, b.Name, b.Note = borrow(l.Key), borrow(l.Session), borrow(l.User), borrow(l.Name), borrow(l.Note)
		ld.Lock(&b)
		clear(buf[:cap(buf)])
	}
	ld.Close()

	if a, b := takeSnapshot(t, want), takeSnapshot(t, got); !reflect.DeepEqual(a, b) {
		t.Fatalf("loaded state differs from the written one")
	}
	for _, s := range []string{"s-0", "s-3"} {
		var a, b []store.Lock
		view(t, want, func(tx store.ReadTx) (err error) { a, err = tx.SessionLocks(s); return err })
		view(t, got, func(tx store.ReadTx) (err error) { b, err = tx.SessionLocks(s); return err })
		if len(a) == 0 || !reflect.DeepEqual(a, b) {
			t.Fatalf("SessionLocks(%s): loaded %d locks, written %d, or they differ", s, len(b), len(a))
		}
	}
	if n, _, _ := got.Size(); n != len(locks) {
		t.Fatalf("loaded %d locks, want %d", n, len(locks))
	}
}
