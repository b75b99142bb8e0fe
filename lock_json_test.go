package holdfast

import (
	"encoding/json"
	"math"
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

// The hand-written Duration.MarshalJSON writes what encoding/json writes
// for the seconds.
func TestDurationJSONMatchesFloat(t *testing.T) {
	for _, d := range []time.Duration{0, 1, 999, 1000, 1500, time.Microsecond, time.Millisecond, 1234567 * time.Nanosecond,
		time.Second, 90 * time.Second, 5 * time.Minute, 36 * time.Hour, -time.Second, -1, math.MaxInt64, math.MinInt64} {
		checkDurationJSON(t, d)
	}
}

func FuzzDurationJSON(f *testing.F) {
	f.Add(int64(time.Minute))
	f.Add(int64(7))
	f.Fuzz(func(t *testing.T, n int64) { checkDurationJSON(t, time.Duration(n)) })
}

func checkDurationJSON(t *testing.T, d time.Duration) {
	t.Helper()
	got, err := Duration(d).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	want, err := json.Marshal(d.Seconds())
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("Duration(%d): got %s, want %s", d, got, want)
	}
}

// Time.UnmarshalJSON decodes what encoding/json decodes the string to, and
// fails where that fails.
func TestTimeUnmarshalMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{`null`, `"2026-11-30T09:05:01.123Z"`, `"2026-11-30T10:05:01.123456789+01:00"`,
		`"2026-11-30T09:05:01Z"`, `"2026-11-30T09:05:01.123\u005a"`, `"2026-11-30T09:05:01.123Z`, `2026`, `""`, `"`,
		` "2026-11-30T09:05:01.123Z"`, `"2026-11-30 09:05:01Z"`, `"bad\x01"`, `"Zoë"`, `"\xff"`, `{}`, `"a"b"`} {
		checkTimeUnmarshal(t, []byte(s))
	}
}

func FuzzTimeUnmarshal(f *testing.F) {
	f.Add([]byte(`"2026-11-30T09:05:01.123Z"`))
	f.Add([]byte(`"2026-11-30T09:05:01.123\u005a"`))
	f.Fuzz(checkTimeUnmarshal)
}

// checkTimeUnmarshal compares with unquoting by encoding/json, then
// parsing, as Time.UnmarshalJSON did before it had a fast path.
func checkTimeUnmarshal(t *testing.T, b []byte) {
	t.Helper()
	var got Time
	gotErr := got.UnmarshalJSON(b)
	var want time.Time
	var s string
	wantErr := json.Unmarshal(b, &s)
	if string(b) == "null" {
		wantErr = nil
	} else if wantErr == nil {
		want, wantErr = time.Parse(time.RFC3339Nano, s)
	}
	if (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != wantErr.Error() {
		t.Fatalf("%q: error %v, want %v", b, gotErr, wantErr)
	}
	if !time.Time(got).Equal(want) || time.Time(got).String() != want.String() {
		t.Fatalf("%q: %v, want %v", b, time.Time(got), want)
	}
}

// Time's hand-written digits are what AppendFormat writes with timeLayout.
func TestTimeJSONMatchesAppendFormat(t *testing.T) {
	for _, at := range []time.Time{
		time.Date(2026, 11, 30, 9, 5, 1, 123456789, time.FixedZone("x", 3600)),
		time.Date(1999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(0, 1, 1, 0, 0, 0, 1e6, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999e6, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-1, 6, 15, 12, 0, 0, 0, time.UTC),
		time.Date(1, 1, 1, 0, 0, 0, 0, time.FixedZone("y", -7200)), // year 0 in UTC
		time.Unix(0, 0),
	} {
		checkTimeJSON(t, at)
	}
}

func FuzzTimeJSON(f *testing.F) {
	f.Add(int64(1764493501123), int64(456789), 3600)
	f.Fuzz(func(t *testing.T, ms, ns int64, offset int) {
		checkTimeJSON(t, time.UnixMilli(ms).Add(time.Duration(ns)).In(time.FixedZone("z", offset%86400)))
	})
}

func checkTimeJSON(t *testing.T, at time.Time) {
	t.Helper()
	want := "null"
	if !at.IsZero() {
		want = `"` + at.UTC().Format(timeLayout) + `"`
	}
	if got := string(Time(at).appendJSON([]byte("x"))); got != "x"+want {
		t.Errorf("%v: got %s, want x%s", at, got, want)
	}
}
