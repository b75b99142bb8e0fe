package holdfast

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestValidateKey(t *testing.T) {
	t.Parallel()
	for key, want := range map[string]string{
		"policy/12345":                       "",
		"policy":                             "",
		"order/42/line/7":                    "",
		"":                                   "empty",
		"/policy":                            "starts with /",
		"policy/":                            "ends with /",
		"policy//1":                          "empty segment",
		"policy/\x01":                        "control character",
		"policy/\xff":                        "not valid UTF-8",
		strings.Repeat("k", 513):             "more than 512",
		"räksmörgås/ü":                       "",
		"policy/" + strings.Repeat("x", 505): "",
	} {
		err := ValidateKey(key)
		switch {
		case want == "" && err != nil:
			t.Errorf("ValidateKey(%.20q) = %v, want nil", key, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("ValidateKey(%.20q) = %v, want an error saying %q", key, err, want)
		}
	}
}

func TestCovers(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"order/42", "order/42", true},
		{"order/42", "order/42/line/7", true},
		{"order", "order/42", true},
		{"order/4", "order/42", false},
		{"order/42/line", "order/42", false},
	} {
		if got := Covers(c.a, c.b); got != c.want {
			t.Errorf("Covers(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

func TestDurationJSON(t *testing.T) {
	t.Parallel()
	var d Duration
	if err := json.Unmarshal([]byte("0.25"), &d); err != nil || time.Duration(d) != 250*time.Millisecond {
		t.Fatalf("0.25 → %v, %v; want 250ms", time.Duration(d), err)
	}
	for _, bad := range []string{"0", "-1", `"2h"`, "-1e400", "1e-400"} {
		if err := json.Unmarshal([]byte(bad), &d); err == nil {
			t.Errorf("%s accepted as a duration", bad)
		} else if bad != `"2h"` && !strings.Contains(err.Error(), "greater than 0") {
			t.Errorf("%s refused with %q, want it said a duration must be greater than 0", bad, err)
		}
	}
	// Longer than a time.Duration holds is as long as it can be (then
	// capped by the type's maximum lifetime), not an error.
	for _, long := range []string{"1e10", "1e300", "1e400"} {
		if err := json.Unmarshal([]byte(long), &d); err != nil || time.Duration(d) != math.MaxInt64 {
			t.Errorf("%s → %v, %v; want the longest duration", long, time.Duration(d), err)
		}
	}
	b, _ := json.Marshal(Duration(90 * time.Second))
	if string(b) != "90" {
		t.Errorf("90s marshals as %s, want 90", b)
	}
}

func TestLockJSONTimes(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 30, 10, 47, 0, 123456789, time.FixedZone("CET", 3600))
	b, err := json.Marshal(Lock{Key: "policy/1", AcquiredAt: at, ExpiresAt: at.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"acquired_at":"2026-11-30T09:47:00.123Z"`, `"expires_at":"2026-11-30T10:47:00.123Z"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("%s lacks %s", b, want)
		}
	}
}

func TestLockedMessage(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 11, 0, 0, 0, time.UTC)
	bob := Lock{Key: "policy/12345", Mode: Exclusive, Owner: Owner{Session: "s-81", Name: "Bob Smith"},
		AcquiredAt: now.Add(-13 * time.Minute), ExpiresAt: now.Add(107 * time.Minute)}
	got := lockedMessage([]Conflict{{Key: "policy/12345", RequestedKey: "policy/12345", Holders: []Lock{bob}}}, now)
	if want := "policy/12345 is being edited by Bob Smith since 10:47 UTC (until 12:47 UTC)"; got != want {
		t.Errorf("message\n got %q\nwant %q", got, want)
	}
	reader := bob
	reader.Key, reader.Mode, reader.Owner = "policy", Shared, Owner{Session: "s-2", User: "u-2"}
	reader.AcquiredAt = now.Add(-26 * time.Hour)
	got = lockedMessage([]Conflict{{Key: "policy/9", RequestedKey: "asset/9", Holders: []Lock{reader}}}, now)
	if want := "asset/9 (locked as policy/9) is covered by policy, being read by u-2 since Nov 29 09:00 UTC (until 12:47 UTC)"; got != want {
		t.Errorf("message\n got %q\nwant %q", got, want)
	}
	// Every holder gets a clause of its own: on the key, and below it.
	part := bob
	part.Key = "policy/12345/coverage/2"
	got = lockedMessage([]Conflict{{Key: "policy/12345", RequestedKey: "policy/12345", Holders: []Lock{bob, part}}}, now)
	if want := "policy/12345 is being edited by Bob Smith since 10:47 UTC (until 12:47 UTC), and contains policy/12345/coverage/2, being edited by Bob Smith since 10:47 UTC (until 12:47 UTC)"; got != want {
		t.Errorf("message\n got %q\nwant %q", got, want)
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	c := Config{Types: map[string]TypePolicy{"policy": {Policy: ReadWrite, MaxTTL: time.Hour}}}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "default ttl") {
		t.Fatalf("default ttl (2h) above max ttl (1h) accepted: %v", err)
	}
	c = Config{Types: map[string]TypePolicy{"policy": {Policy: "exclusive"}}}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "unknown policy") {
		t.Fatalf("unknown policy accepted: %v", err)
	}
	c = Config{Types: map[string]TypePolicy{"policy": {Policy: ReadWrite}}}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if p := c.policy("policy/1"); p.Policy != ReadWrite || p.DefaultTTL != 2*time.Hour || p.MaxTTL != 24*time.Hour {
		t.Errorf("policy/1 gets %+v", p)
	}
	if p := c.policy("order/1"); p.Policy != ExclusiveWrite {
		t.Errorf("order/1 gets %+v, want the default exclusive-write", p)
	}
}

func TestErrorsMatchSentinels(t *testing.T) {
	t.Parallel()
	for err, want := range map[error]error{
		&LockedError{}:      ErrLocked,
		&LockLostError{}:    ErrLockLost,
		&StaleTokenError{}:  ErrStaleToken,
		&InvalidError{}:     ErrInvalid,
		&UnavailableError{}: ErrUnavailable,
	} {
		if !errors.Is(err, want) {
			t.Errorf("%T does not match %v", err, want)
		}
	}
	if got := classify(errors.New("connection refused")); !errors.Is(got, ErrUnavailable) {
		t.Errorf("a store failure classifies as %v, want ErrUnavailable", got)
	}
}

func TestUnderPrefix(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		prefix, key string
		want        bool
	}{
		{"", "policy/1", true},
		{"policy", "policy/1", true},
		{"policy/", "policy/1", true},
		{"policy", "policy", true},
		{"policy", "policyholder/1", false},
		{"policy/", "policyholder/1", false},
		{"order/42", "order/420", false},
	} {
		if got := UnderPrefix(c.prefix, c.key); got != c.want {
			t.Errorf("UnderPrefix(%q, %q) = %v, want %v", c.prefix, c.key, got, c.want)
		}
	}
}

// Validate fills defaults into a copy: one Types map may back several
// configurations (a Manager and a repository registry) at once.
func TestConfigValidateLeavesTypesMapAlone(t *testing.T) {
	t.Parallel()
	types := map[string]TypePolicy{"policy": {Policy: ReadWrite}}
	a, b := Config{Types: types}, Config{Types: types}
	done := make(chan error)
	go func() { done <- a.Validate() }()
	if err := b.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if types["policy"].DefaultTTL != 0 {
		t.Errorf("the caller's map was filled in: %+v", types["policy"])
	}
	if a.Types["policy"].DefaultTTL != 2*time.Hour {
		t.Errorf("the validated config lacks defaults: %+v", a.Types["policy"])
	}
}
