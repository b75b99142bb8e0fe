package pebblestore

import (
	"fmt"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/holdfast/holdfast/internal/memdb"
	"github.com/holdfast/holdfast/store"
)

// A group's batch holds the last write of each key, in key order.
func TestGroupBatchKeepsTheLastWriteOfEachKeyInOrder(t *testing.T) {
	t.Parallel()
	lock := func(key string, token uint64) *store.Lock { return &store.Lock{Key: key, Session: "s", Token: token} }
	var rs records
	for _, c := range []memdb.Change{
		{Kind: memdb.KindLock, Lock: lock("order/2", 1)},
		{Kind: memdb.KindAudit, Audit: &store.AuditEntry{ID: 7, Event: "acquired"}},
		{Kind: memdb.KindLock, Lock: lock("order/1", 2)},
		{Kind: memdb.KindLock, Lock: lock("order/2", 1), Delete: true}, // released in the same group
		{Kind: memdb.KindSession, Session: &store.Session{ID: "s", Name: "first"}},
		{Kind: memdb.KindLock, Lock: lock("order/1", 3)},
		{Kind: memdb.KindSession, Session: &store.Session{ID: "s", Name: "last"}},
	} {
		if err := rs.add(c); err != nil {
			t.Fatal(err)
		}
	}
	b := new(pebble.Batch)
	if err := rs.writeTo(b); err != nil {
		t.Fatal(err)
	}
	var got []string
	r := b.Reader()
	for {
		kind, key, value, ok, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		switch {
		case kind == pebble.InternalKeyKindDelete:
			got = append(got, fmt.Sprintf("delete %q", key))
		case key[0] == prefixLock:
			var l store.Lock
			if err := decodeLockBorrowed(value, &l); err != nil {
				t.Fatal(err)
			}
			got = append(got, fmt.Sprintf("lock %s token %d", l.Key, l.Token))
		case key[0] == prefixSession:
			s, err := decodeSession(value)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, "session "+s.Name)
		default:
			got = append(got, fmt.Sprintf("%c", key[0]))
		}
	}
	want := []string{"a", "lock order/1 token 3", fmt.Sprintf("delete %q", lockKey(nil, "order/2", "s")), "session last"}
	if !slices.Equal(got, want) {
		t.Fatalf("batch:\n%q\nwant\n%q", got, want)
	}
}
