package memdb

import (
	"fmt"
	"reflect"
	"testing"
	"time"
	"unsafe"

	"github.com/holdfast/holdfast/store"
)

// TestLoaderCopiesBorrowedStrings restores locks and lost records whose
// strings all point into one buffer that is overwritten after every call,
// as pebblestore's in-place decoding does, and checks the engine against
// one filled by transactions.
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
	var losts []store.Lost
	for i := range 300 {
		losts = append(losts, store.Lost{Lock: lockOn(fmt.Sprintf("gone/%d", i), fmt.Sprintf("s-%d", i%7), time.Minute),
			Reason: "released", Actor: "u-s-1", ForceReason: fmt.Sprint("why ", i), At: t0.Add(time.Duration(i%13) * time.Second), Reported: i%2 == 0})
	}
	want := New(fixedClock, Options{})
	putLocks(t, want, locks...)
	mustUpdate(t, want, func(tx store.Tx) error {
		for _, l := range losts {
			tx.PutLost(l)
		}
		return nil
	})

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
	for _, l := range losts {
		buf = buf[:0]
		b := l
		b.Lock.Key, b.Lock.Session, b.Lock.User = borrow(l.Lock.Key), borrow(l.Lock.Session), borrow(l.Lock.User)
		b.Reason, b.Actor, b.ForceReason = borrow(l.Reason), borrow(l.Actor), borrow(l.ForceReason)
		ld.Lost(&b)
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
		q := store.LockQuery{User: "u-" + s}
		view(t, want, func(tx store.ReadTx) (err error) { a, err = tx.Locks(q); return err })
		view(t, got, func(tx store.ReadTx) (err error) { b, err = tx.Locks(q); return err })
		if len(a) == 0 || !reflect.DeepEqual(a, b) {
			t.Fatalf("Locks(%+v): loaded %d locks, written %d, or they differ", q, len(b), len(a))
		}
	}
	if n, _, _ := got.Size(); n != len(locks) {
		t.Fatalf("loaded %d locks, want %d", n, len(locks))
	}
}
