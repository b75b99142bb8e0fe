package holdfast_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/holdfast/holdfast"
	"github.com/holdfast/holdfast/internal/histcheck"
	"github.com/holdfast/holdfast/memstore"
)

// FuzzKeys checks that ValidateKey accepts exactly the keys API.md
// describes, and that the hierarchy functions agree with the definition of
// an ancestor on every pair of valid keys.
func FuzzKeys(f *testing.F) {
	for _, seed := range [][2]string{
		{"policy/12345", "policy/12345/coverage/2"}, {"order", "order/42"}, {"order/4", "order/42"},
		{"a/b", "a/b"}, {"/a", "a/"}, {"a//b", "a"}, {"a/\x7f", "ä/ö"}, {"a\u0085b", "a"},
		{"\xff", "a"}, {strings.Repeat("k", 512), strings.Repeat("k", 513)},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		err := holdfast.ValidateKey(a)
		valid := len(a) >= 1 && len(a) <= holdfast.MaxKeyBytes && utf8.ValidString(a) &&
			!strings.HasPrefix(a, "/") && !strings.HasSuffix(a, "/") && !strings.Contains(a, "//") &&
			!strings.ContainsFunc(a, func(r rune) bool { return r < 0x20 || (r >= 0x7f && r < 0xa0) })
		if (err == nil) != valid {
			t.Fatalf("ValidateKey(%q) = %v, but the key is valid=%v by API.md", a, err, valid)
		}
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("ValidateKey(%q) refused without saying why", a)
			}
			return
		}
		typ := holdfast.KeyType(a)
		if typ == "" || strings.Contains(typ, "/") || !holdfast.Covers(typ, a) || !holdfast.Covers(a, a) {
			t.Fatalf("key %q: type %q does not cover it, or the key does not cover itself", a, typ)
		}
		if holdfast.ValidateKey(b) != nil {
			return
		}
		ancestor := a == b || strings.HasPrefix(b, a+"/")
		if holdfast.Covers(a, b) != ancestor {
			t.Fatalf("Covers(%q, %q) = %v, want %v", a, b, holdfast.Covers(a, b), ancestor)
		}
		if holdfast.UnderPrefix(a, b) != ancestor || holdfast.UnderPrefix(a+"/", b) != ancestor {
			t.Fatalf("UnderPrefix(%q, %q) disagrees with Covers", a, b)
		}
	})
}

// fuzzKeys is one key family: a root, children and a grandchild.
var fuzzKeys = []string{"f", "f/a", "f/a/x", "f/b"}

var fuzzSessions = []struct{ id, user string }{{"s0", "ann"}, {"s1", "ann"}, {"s2", ""}}

// decodeOps turns fuzz bytes into lock operations, three bytes each: the
// kind, the session and first key, and the second key and flags.
func decodeOps(data []byte) []histcheck.Input {
	var ops []histcheck.Input
	for len(data) >= 3 {
		kind, a, b := data[0], data[1], data[2]
		data = data[3:]
		s := fuzzSessions[int(a>>4)%len(fuzzSessions)]
		in := histcheck.Input{Family: "f", Session: s.id, User: s.user, Keys: []string{fuzzKeys[int(a)%len(fuzzKeys)]}}
		if b&1 == 1 {
			in.Keys = append(in.Keys, fuzzKeys[int(b>>1)%len(fuzzKeys)])
			if in.Keys[1] == in.Keys[0] {
				in.Keys = in.Keys[:1]
			}
		}
		switch kind % 9 {
		case 0, 1:
			in.Kind, in.Shared, in.Takeover = histcheck.Acquire, b&2 == 2, b&4 == 4
		case 2:
			in.Kind = histcheck.Release
			if len(in.Keys) == 1 {
				in.Token = uint64(b >> 4)
			}
		case 3:
			in.Kind = histcheck.Renew
		case 4:
			in.Kind, in.Keys, in.Token = histcheck.Verify, in.Keys[:1], uint64(b>>4)
		case 5:
			in.Kind, in.Session, in.User, in.Keys = histcheck.Holders, "", "", in.Keys[:1]
		case 6:
			in.Kind, in.Session, in.User = histcheck.ForceRelease, "", ""
		case 7:
			in.Kind, in.Keys = histcheck.EndSession, nil
		case 8:
			in.Kind, in.Keys = histcheck.Heartbeat, nil
		}
		ops = append(ops, in)
	}
	return ops
}

// fuzzClock is the store's clock; the fuzzer moves it between operations
// by less than any lock's lifetime.
type fuzzClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fuzzClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// FuzzOperations runs a random sequence of lock operations against a
// Manager on the in-memory store and checks every answer against the
// model of the lock semantics (package histcheck), and after every
// operation that no two live locks conflict and tokens never repeat.
func FuzzOperations(f *testing.F) {
	f.Add([]byte{0, 0x00, 0, 0, 0x10, 0, 5, 0, 0})                  // two sessions race for f
	f.Add([]byte{0, 0x01, 2, 0, 0x00, 0, 2, 0x01, 0x10})            // shared, then upgrade, release by token
	f.Add([]byte{0, 0x02, 0, 0, 0x11, 4, 4, 0x02, 0x10, 7, 0x0, 0}) // takeover by the same user, verify, end
	f.Add([]byte{0, 0x22, 0, 6, 0x02, 1, 0, 0x21, 3, 5, 0x00, 0})   // force release, then a new holder
	f.Add([]byte{0, 0x00, 0, 6, 0x00, 0, 8, 0x00, 0, 8, 0x00, 0})   // force release told once by heartbeats
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	f.Fuzz(func(t *testing.T, data []byte) {
		ops := decodeOps(data)
		if len(ops) > 200 {
			ops = ops[:200]
		}
		clock := &fuzzClock{now: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)}
		st := memstore.New(memstore.Config{Now: clock.Now})
		defer st.Close()
		m, err := holdfast.New(st, holdfast.Config{SweepInterval: -1, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		ctx := context.Background()
		rec := histcheck.NewRecorder(time.Hour)
		tokens := map[uint64]string{}
		for i, in := range ops {
			out := rec.Do(ctx, m, 0, in)
			if out.Outcome == histcheck.Failed || out.Outcome == histcheck.Unknown {
				t.Fatalf("operation %d (%+v): %s", i, in, out.Err)
			}
			clock.mu.Lock()
			clock.now = clock.now.Add(time.Second)
			clock.mu.Unlock()

			page, err := m.Locks(ctx, holdfast.LockQuery{Limit: 1000})
			if err != nil {
				t.Fatal(err)
			}
			for j, a := range page.Locks {
				if id := a.Key + "@" + a.Owner.Session; tokens[a.Token] != "" && tokens[a.Token] != id {
					t.Fatalf("after operation %d: token %d names both %s and %s", i, a.Token, tokens[a.Token], id)
				} else {
					tokens[a.Token] = id
				}
				for _, b := range page.Locks[j+1:] {
					if a.Owner.Session != b.Owner.Session && (holdfast.Covers(a.Key, b.Key) || holdfast.Covers(b.Key, a.Key)) &&
						(a.Mode == holdfast.Exclusive || b.Mode == holdfast.Exclusive) {
						t.Fatalf("after operation %d (%+v): conflicting holders %+v and %+v", i, in, a, b)
					}
				}
			}
		}
		if err := histcheck.Check(rec.History(), histcheck.CheckConfig{}); err != nil {
			t.Fatal(err)
		}
	})
}
