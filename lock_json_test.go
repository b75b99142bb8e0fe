package holdfast

import (
	"encoding/json"
	"testing"
	"time"
)

// referenceLockJSON is what encoding/json writes for a Lock by reflection,
// the output the hand-written MarshalJSON must keep byte for byte.
func referenceLockJSON(t *testing.T, l Lock) string {
	t.Helper()
	type plain Lock
	b, err := json.Marshal(struct {
		plain
		AcquiredAt Time `json:"acquired_at"`
		ExpiresAt  Time `json:"expires_at"`
	}{plain(l), Time(l.AcquiredAt), Time(l.ExpiresAt)})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestLockJSONMatchesReflection(t *testing.T) {
	at := time.Date(2026, 11, 30, 9, 5, 1, 123456789, time.FixedZone("x", 3600))
	strs := []string{"", "policy/12345", "Bob Smith", `quote " and \ back`, "<b>&amp;</b>",
		"tab\tnew\nline\x01", "Zoë Ångström 日本", "bad utf8 \xff\xfe", "line\u2028sep", "del\x7f"}
	for i, s := range strs {
		for _, l := range []Lock{
			{Key: s, RequestedKey: s, Mode: Exclusive, Owner: Owner{Session: s}, AcquiredAt: at, ExpiresAt: at.Add(time.Hour), Token: uint64(i)},
			{Key: "k", Mode: Shared, Owner: Owner{Session: "s", User: s, Name: s}, Note: s, Token: 1 << 63},
		} {
			got, err := json.Marshal(l)
			if err != nil {
				t.Fatal(err)
			}
			if want := referenceLockJSON(t, l); string(got) != want {
				t.Errorf("lock %d:\n got %s\nwant %s", i, got, want)
			}
		}
	}
}

func FuzzLockJSON(f *testing.F) {
	f.Add("policy/1", "Bob", "note", uint64(7))
	f.Fuzz(func(t *testing.T, key, name, note string, token uint64) {
		l := Lock{Key: key, RequestedKey: key, Mode: Exclusive, Owner: Owner{Session: name, Name: name, User: note}, Note: note, Token: token,
			AcquiredAt: time.UnixMilli(int64(token % (1 << 40)))}
		got, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		if want := referenceLockJSON(t, l); string(got) != want {
			t.Fatalf("got %s\nwant %s", got, want)
		}
	})
}
