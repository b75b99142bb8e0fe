package pebblestore

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/holdfast/holdfast/internal/codec"
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
	if err := rs.writeSorted(b); err != nil {
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
			if err := codec.DecodeLockBorrowed(value, &l); err != nil {
				t.Fatal(err)
			}
			got = append(got, fmt.Sprintf("lock %s token %d", l.Key, l.Token))
		case key[0] == prefixSession:
			s, err := codec.DecodeSession(value)
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

// A group's batch is allocated at its exact size.
func TestRecordsReprSizeIsExact(t *testing.T) {
	t.Parallel()
	var rs records
	rs.add(memdb.Change{Kind: memdb.KindLock, Lock: &store.Lock{Key: strings.Repeat("k", 200), Session: "s", Note: strings.Repeat("n", 300)}})
	rs.add(memdb.Change{Kind: memdb.KindLock, Lock: &store.Lock{Key: "gone", Session: "s"}, Delete: true})
	rs.add(memdb.Change{Kind: memdb.KindCounter, Counter: memdb.CounterToken, Value: 7})
	b := new(pebble.Batch)
	if err := rs.writeSorted(b); err != nil {
		t.Fatal(err)
	}
	if got, want := len(b.Repr()), rs.reprSize(); got != want {
		t.Fatalf("batch of %d bytes, reprSize %d", got, want)
	}
}

// A transaction bigger than sortedLimit goes into its batch as it comes,
// and every record, the last write of each key, survives a reopen.
func TestBigGroupIsWrittenInCommitOrder(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	cfg := Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	s, err := Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	const n = 2000
	note := strings.Repeat("n", 200) // n locks of 200+ bytes: past sortedLimit
	err = s.Update(ctx, func(tx store.Tx) error {
		for i := range n {
			tx.PutLock(store.Lock{Key: fmt.Sprintf("order/%d", i), Session: "s", Token: 1, Note: note})
		}
		for i := range n {
			tx.PutLock(store.Lock{Key: fmt.Sprintf("order/%d", i), Session: "s", Token: 2, Note: note})
		}
		return tx.DeleteLock("order/0", "s")
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(dir, cfg); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var locks []store.Lock
	if err := s.View(ctx, func(tx store.ReadTx) (err error) { locks, err = tx.Locks(store.LockQuery{}); return err }); err != nil {
		t.Fatal(err)
	}
	if len(locks) != n-1 {
		t.Fatalf("%d locks after reopen, want %d", len(locks), n-1)
	}
	for _, l := range locks {
		if l.Token != 2 || l.Key == "order/0" {
			t.Fatalf("lock %s with token %d after reopen, want the last write", l.Key, l.Token)
		}
	}
}
