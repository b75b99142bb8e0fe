package server_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/holdfast/holdfast"
)

var wireTime = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)

func TestAcquireAndRelease(t *testing.T) {
	t.Parallel()
	h := newHarness(t, options{})
	req := acquireBody("s-81", "policy/12345")
	req["ttl_seconds"] = 7200
	req["note"] = "underwriting review"
	got := h.post("/v1/locks/acquire", req, 200)

	locks := list(t, got, "locks")
	if len(locks) != 1 {
		t.Fatalf("locks = %v", locks)
	}
	l := locks[0].(map[string]any)
	for field, want := range map[string]any{
		"key": "policy/12345", "requested_key": "policy/12345", "mode": "exclusive", "note": "underwriting review",
		"acquired_at": "2026-11-30T10:47:00.000Z", "expires_at": "2026-11-30T12:47:00.000Z",
	} {
		if l[field] != want {
			t.Errorf("lock.%s = %v, want %v", field, l[field], want)
		}
	}
	if o := at(t, l, "owner").(map[string]any); o["session"] != "s-81" || o["user"] != "u-s-81" || o["name"] != "User s-81" {
		t.Errorf("owner = %v", o)
	}
	token, _ := l["token"].(float64)
	if token < 1 {
		t.Errorf("token = %v, want a positive number", l["token"])
	}
	if _, ok := got["holders"]; ok {
		t.Errorf("holders sent for an exclusive acquire: %v", got)
	}

	// The same session again is re-entrant and keeps the token.
	again := h.post("/v1/locks/acquire", acquireBody("s-81", "policy/12345"), 200)
	if at(t, again, "locks", 0, "token") != token {
		t.Errorf("re-entrant acquire changed the token: %v", again)
	}

	rel := h.post("/v1/locks/release", map[string]any{"session": "s-81", "keys": []string{"policy/12345", "policy/999"}}, 200)
	if r := list(t, rel, "released"); len(r) != 1 || at(t, r, 0, "key") != "policy/12345" {
		t.Errorf("released = %v", r)
	}
	if n := list(t, rel, "not_held"); len(n) != 1 || n[0] != "policy/999" {
		t.Errorf("not_held = %v", n)
	}
	empty := h.post("/v1/locks/release", map[string]any{"session": "s-81", "keys": []string{"policy/12345"}}, 200)
	if r := list(t, empty, "released"); len(r) != 0 {
		t.Errorf("released twice: %v", r)
	}
}

func TestLockedNamesEveryHolder(t *testing.T) {
	t.Parallel()
	h := newHarness(t, options{})
	h.post("/v1/locks/acquire", acquireBody("bob", "policy/1"), 200)
	blocked := acquireBody("alice", "policy/1/coverage/2", "policy/7")
	e := wantError(t, h.call("POST", "/v1/locks/acquire", clientToken, blocked), 423, "locked", "")
	conflicts := list(t, e, "conflicts")
	if len(conflicts) != 1 || at(t, conflicts, 0, "requested_key") != "policy/1/coverage/2" {
		t.Fatalf("conflicts = %v", conflicts)
	}
	holder := at(t, conflicts, 0, "holders", 0).(map[string]any)
	if holder["key"] != "policy/1" || at(t, holder, "owner", "name") != "User bob" {
		t.Errorf("holder = %v", holder)
	}
	if msg := e["message"].(string); !strings.Contains(msg, "User bob") {
		t.Errorf("message %q does not name the holder", msg)
	}
	// All or nothing: policy/7 was not taken.
	page := h.get("/v1/locks?prefix=policy/7", 200)
	if l := list(t, page, "locks"); len(l) != 0 {
		t.Errorf("a refused acquire left %v", l)
	}
}

func TestIntentThroughPolicy(t *testing.T) {
	t.Parallel()
	h := newHarness(t, options{types: map[string]holdfast.TypePolicy{"doc": {Policy: holdfast.ReadWrite}}})

	// exclusive-write (default): a read takes nothing and shows holders,
	// as [] when there are none.
	read := acquireBody("r1", "policy/1")
	read["intent"] = "read"
	got := h.post("/v1/locks/acquire", read, 200)
	if l := list(t, got, "locks"); len(l) != 0 {
		t.Errorf("read under exclusive-write took %v", l)
	}
	if hs := list(t, got, "holders"); len(hs) != 0 {
		t.Errorf("holders = %v, want []", hs)
	}
	write := acquireBody("w1", "policy/1")
	write["intent"] = "write"
	h.post("/v1/locks/acquire", write, 200)
	got = h.post("/v1/locks/acquire", read, 200)
	if hs := list(t, got, "holders"); len(hs) != 1 || at(t, hs, 0, "owner", "session") != "w1" {
		t.Errorf("holders = %v, want the writer", hs)
	}

	// read-write: readers share.
	docRead := acquireBody("r1", "doc/1")
	docRead["intent"] = "read"
	got = h.post("/v1/locks/acquire", docRead, 200)
	if at(t, got, "locks", 0, "mode") != "shared" {
		t.Errorf("read under read-write = %v, want shared", got)
	}
	docRead["owner"] = map[string]any{"session": "r2"}
	h.post("/v1/locks/acquire", docRead, 200)
}

func TestRenewVerifyAndExpiry(t *testing.T) {
	t.Parallel()
	h := newHarness(t, options{})
	got := h.post("/v1/locks/acquire", acquireBody("s1", "order/42"), 200)
	token := at(t, got, "locks", 0, "token")

	h.clock.Advance(time.Hour)
	renewed := h.post("/v1/locks/renew", map[string]any{"session": "s1", "ttl_seconds": 0.25}, 200)
	if at(t, renewed, "locks", 0, "expires_at") != "2026-11-30T11:47:00.250Z" {
		t.Errorf("renewed = %v", renewed)
	}
	// A lifetime longer than a Go duration holds is capped like any other.
	long := h.post("/v1/locks/renew", map[string]any{"session": "s1", "ttl_seconds": 1e10}, 200)
	if at(t, long, "locks", 0, "expires_at") != "2026-12-01T11:47:00.000Z" {
		t.Errorf("renewed for 1e10 s = %v, want 24 hours, the maximum", long)
	}
	h.post("/v1/locks/renew", map[string]any{"session": "s1", "ttl_seconds": 0.25}, 200)

	ok := h.post("/v1/locks/verify", map[string]any{"key": "order/42", "session": "s1", "token": token}, 200)
	if at(t, ok, "lock", "token") != token {
		t.Errorf("verify = %v", ok)
	}
	stale := wantError(t, h.call("POST", "/v1/locks/verify", clientToken,
		map[string]any{"key": "order/42", "session": "s1", "token": token.(float64) + 100}), 409, "stale_token", "")
	if at(t, stale, "lock", "token") != token {
		t.Errorf("stale_token lock = %v, want the current grant", stale["lock"])
	}
	if msg := at(t, stale, "message").(string); strings.Contains(msg, "newer") || !strings.Contains(msg, "is held under token 1, not 101") {
		t.Errorf("stale_token for a token above the grant's says %q", msg)
	}
	wantError(t, h.call("POST", "/v1/locks/release", clientToken,
		map[string]any{"session": "s1", "keys": []string{"order/42"}, "token": token.(float64) + 100}), 409, "stale_token", "")

	h.clock.Advance(time.Second)
	lost := wantError(t, h.call("POST", "/v1/locks/verify", clientToken,
		map[string]any{"key": "order/42", "session": "s1", "token": token}), 409, "lock_lost", "")
	if lost["reason"] != "expired" {
		t.Errorf("reason = %v, want expired", lost["reason"])
	}
	lost = wantError(t, h.call("POST", "/v1/locks/renew", clientToken,
		map[string]any{"session": "s1", "keys": []string{"order/42"}}), 409, "lock_lost", "")
	if lost["reason"] != "expired" {
		t.Errorf("renew reason = %v, want expired", lost["reason"])
	}
	never := wantError(t, h.call("POST", "/v1/locks/verify", clientToken,
		map[string]any{"key": "order/43", "session": "s1"}), 409, "lock_lost", "")
	if never["reason"] != "never_held" {
		t.Errorf("reason = %v, want never_held", never["reason"])
	}
}

func TestListLocksPaginates(t *testing.T) {
	t.Parallel()
	h := newHarness(t, options{})
	for i := range 5 {
		h.post("/v1/locks/acquire", acquireBody(fmt.Sprintf("s%d", i), fmt.Sprintf("item/%d", i)), 200)
	}
	h.post("/v1/locks/acquire", acquireBody("s9", "other/1"), 200)

	var keys []string
	next := ""
	for range 10 {
		path := "/v1/locks?prefix=item&limit=2"
		if next != "" {
			path += "&after=" + next
		}
		page := h.call("GET", path, readerToken, nil)
		body := h.want(page, 200)
		for _, l := range list(t, body, "locks") {
			keys = append(keys, l.(map[string]any)["key"].(string))
		}
		n, present := body["next"]
		if !present {
			t.Fatalf("next missing: %s", page.raw)
		}
		if n == nil {
			break
		}
		next = n.(string)
	}
	if strings.Join(keys, " ") != "item/0 item/1 item/2 item/3 item/4" {
		t.Errorf("keys = %v", keys)
	}

	bySession := h.get("/v1/locks?session=s9", 200)
	if l := list(t, bySession, "locks"); len(l) != 1 || at(t, l, 0, "key") != "other/1" {
		t.Errorf("session=s9: %v", l)
	}
	byKey := h.get("/v1/locks?key=item/3/part/1", 200)
	if l := list(t, byKey, "locks"); len(l) != 1 || at(t, l, 0, "key") != "item/3" {
		t.Errorf("key=item/3/part/1: %v", l)
	}
	wantError(t, h.call("GET", "/v1/locks?limit=ten", readerToken, nil), 400, "invalid", "limit")
	wantError(t, h.call("GET", "/v1/locks?prefx=item", readerToken, nil), 400, "invalid", "prefx")
	// A query string that does not parse is refused, not read in part:
	// here the limit and the filter would both be dropped.
	wantError(t, h.call("GET", "/v1/locks?session=s%zz9&limit=1", readerToken, nil), 400, "invalid", "query")
	wantError(t, h.call("GET", "/v1/locks?session=s9;limit=1", readerToken, nil), 400, "invalid", "query")
	wantError(t, h.call("GET", "/v1/events?prefix=%zz", readerToken, nil), 400, "invalid", "query")
	// A prefix is a point in the key hierarchy: one no key can be under
	// is a mistake, as in an event stream's.
	wantError(t, h.call("GET", "/v1/locks?prefix=item//1", readerToken, nil), 400, "invalid", "prefix")
	wantError(t, h.call("GET", "/v1/locks?prefix=/", readerToken, nil), 400, "invalid", "prefix")
	if l := list(t, h.get("/v1/locks?prefix=item/", 200), "locks"); len(l) != 5 {
		t.Errorf("prefix=item/ (a trailing / is allowed): %v", l)
	}
}

func TestSessions(t *testing.T) {
	t.Parallel()
	h := newHarness(t, options{})
	req := acquireBody("s1", "policy/1", "policy/2")
	req["idle_timeout_seconds"] = 300
	h.post("/v1/locks/acquire", req, 200)

	h.clock.Advance(time.Minute)
	hb := h.post("/v1/sessions/heartbeat", map[string]any{"session": "s1"}, 200)
	s := at(t, hb, "session").(map[string]any)
	for field, want := range map[string]any{
		"id": "s1", "user": "u-s1", "name": "User s1", "last_seen": "2026-11-30T10:48:00.000Z",
		"idle_timeout_seconds": 300.0, "expires_at": "2026-11-30T10:53:00.000Z", "locks": 2.0,
	} {
		if s[field] != want {
			t.Errorf("session.%s = %v, want %v", field, s[field], want)
		}
	}
	if l := list(t, hb, "lost"); len(l) != 0 {
		t.Errorf("lost = %v", l)
	}

	page := h.call("GET", "/v1/sessions?user=u-s1", readerToken, nil)
	if ss := list(t, h.want(page, 200), "sessions"); len(ss) != 1 || at(t, ss, 0, "id") != "s1" {
		t.Errorf("sessions = %s", page.raw)
	}

	ended := h.post("/v1/sessions/end", map[string]any{"session": "s1"}, 200)
	if r := list(t, ended, "released"); len(r) != 2 {
		t.Errorf("released = %v", r)
	}
	again := h.post("/v1/sessions/end", map[string]any{"session": "s1"}, 200)
	if r := list(t, again, "released"); len(r) != 0 {
		t.Errorf("ending twice released %v", r)
	}
	e := wantError(t, h.call("POST", "/v1/sessions/heartbeat", clientToken, map[string]any{"session": "s1"}), 409, "lock_lost", "")
	if e["reason"] != "session_ended" {
		t.Errorf("reason = %v, want session_ended", e["reason"])
	}
	list(t, e, "released")
	// A session that held nothing when it ended still says what it lost:
	// nothing, as [] (API.md lists released for every ended session).
	h.post("/v1/sessions/heartbeat", map[string]any{"session": "s-empty"}, 200)
	h.post("/v1/sessions/end", map[string]any{"session": "s-empty"}, 200)
	for _, path := range []string{"/v1/sessions/heartbeat", "/v1/locks/renew"} {
		r := h.call("POST", path, clientToken, map[string]any{"session": "s-empty"})
		if e := wantError(t, r, 409, "lock_lost", ""); e["released"] == nil {
			t.Errorf("%s of an ended session that held nothing: released missing", path)
		} else if l := list(t, e, "released"); len(l) != 0 {
			t.Errorf("%s of an ended session that held nothing: released %v", path, l)
		}
	}
}

func TestIdleSessionEnds(t *testing.T) {
	t.Parallel()
	h := newHarness(t, options{})
	req := acquireBody("tab", "policy/1")
	req["idle_timeout_seconds"] = 60
	h.post("/v1/locks/acquire", req, 200)
	h.clock.Advance(61 * time.Second)
	// Another session gets the lock at once, sweep or not.
	h.post("/v1/locks/acquire", acquireBody("other", "policy/1"), 200)
	e := wantError(t, h.call("POST", "/v1/sessions/heartbeat", clientToken, map[string]any{"session": "tab"}), 409, "lock_lost", "")
	if e["reason"] != "session_expired" {
		t.Errorf("reason = %v, want session_expired", e["reason"])
	}
}

func TestTakeoverOwnLock(t *testing.T) {
	t.Parallel()
	h := newHarness(t, options{})
	tab1 := map[string]any{"keys": []string{"policy/1"}, "owner": map[string]any{"session": "tab1", "user": "bob"}}
	h.post("/v1/locks/acquire", tab1, 200)
	tab2 := map[string]any{"keys": []string{"policy/1"}, "owner": map[string]any{"session": "tab2", "user": "bob"}, "takeover": true}
	h.post("/v1/locks/acquire", tab2, 200)
	hb := h.post("/v1/sessions/heartbeat", map[string]any{"session": "tab1"}, 200)
	if lost := list(t, hb, "lost"); len(lost) != 1 || at(t, lost, 0, "reason") != "taken_over" {
		t.Errorf("lost = %v", lost)
	}
	mallory := map[string]any{"keys": []string{"policy/1"}, "owner": map[string]any{"session": "m", "user": "mallory"}, "takeover": true}
	wantError(t, h.call("POST", "/v1/locks/acquire", clientToken, mallory), 423, "locked", "")
}

func TestAggregates(t *testing.T) {
	t.Parallel()
	h := newHarness(t, options{})
	got := h.post("/v1/aggregates", map[string]any{"member": "asset/9", "root": "lease/3"}, 200)
	if got["member"] != "asset/9" || got["root"] != "lease/3" {
		t.Errorf("set = %v", got)
	}
	lst := h.get("/v1/aggregates?root=lease/3", 200)
	if a := list(t, lst, "aggregates"); len(a) != 1 || at(t, a, 0, "member") != "asset/9" {
		t.Errorf("aggregates = %v", a)
	}
	acq := h.post("/v1/locks/acquire", acquireBody("s1", "asset/9/part/1"), 200)
	l := at(t, acq, "locks", 0).(map[string]any)
	if l["key"] != "lease/3/part/1" || l["requested_key"] != "asset/9/part/1" {
		t.Errorf("lock through aggregate = %v", l)
	}
	e := wantError(t, h.call("POST", "/v1/aggregates", clientToken, map[string]any{"member": "lease/3", "root": "asset/9"}), 400, "invalid", "")
	_ = e

	h.post("/v1/aggregates/remove", map[string]any{"member": "asset/9"}, 200)
	lst = h.get("/v1/aggregates", 200)
	if a := list(t, lst, "aggregates"); len(a) != 0 {
		t.Errorf("after remove: %v", a)
	}
}

func TestForceReleaseAndAudit(t *testing.T) {
	t.Parallel()
	h := newHarness(t, options{})
	got := h.post("/v1/locks/acquire", acquireBody("bob", "policy/1"), 200)
	token := at(t, got, "locks", 0, "token")

	wantError(t, h.call("POST", "/v1/admin/force-release", adminToken, map[string]any{"keys": []string{"policy/1"}}), 400, "invalid", "reason")
	fr := h.want(h.call("POST", "/v1/admin/force-release", adminToken,
		map[string]any{"keys": []string{"policy/1"}, "reason": "Bob is on leave", "actor": "alice"}), 200)
	if r := list(t, fr, "released"); len(r) != 1 || at(t, r, 0, "owner", "session") != "bob" {
		t.Errorf("released = %v", r)
	}

	e := wantError(t, h.call("POST", "/v1/locks/verify", clientToken, map[string]any{"key": "policy/1", "session": "bob", "token": token}), 409, "lock_lost", "")
	if e["reason"] != "force_released" || e["actor"] != "alice" || e["force_reason"] != "Bob is on leave" || at(t, e, "lock", "token") != token {
		t.Errorf("lock_lost = %v", e)
	}
	hb := h.post("/v1/sessions/heartbeat", map[string]any{"session": "bob"}, 200)
	lost := list(t, hb, "lost")
	if len(lost) != 1 || at(t, lost, 0, "reason") != "force_released" || at(t, lost, 0, "actor") != "alice" || at(t, lost, 0, "force_reason") != "Bob is on leave" {
		t.Errorf("lost = %v", lost)
	}

	audit := h.get("/v1/admin/audit?key=policy/1", 200)
	entries := list(t, audit, "entries")
	var events []string
	for _, en := range entries {
		m := en.(map[string]any)
		events = append(events, m["event"].(string))
		if !wireTime.MatchString(m["at"].(string)) {
			t.Errorf("at = %v", m["at"])
		}
	}
	if strings.Join(events, ",") != "acquired,force_released" {
		t.Fatalf("events = %v", events)
	}
	if fr := entries[1].(map[string]any); fr["actor"] != "alice" || fr["reason"] != "Bob is on leave" {
		t.Errorf("force_released entry = %v", fr)
	}
	// key= follows the key hierarchy, like a listing's prefix=.
	for _, key := range []string{"policy", "policy/"} {
		if under := list(t, h.get("/v1/admin/audit?key="+key, 200), "entries"); len(under) != len(entries) {
			t.Errorf("key=%s: %d entries, want the %d of policy/1", key, len(under), len(entries))
		}
	}
	wantError(t, h.call("GET", "/v1/admin/audit?key=policy//1", adminToken, nil), 400, "invalid", "key")
	wantError(t, h.call("GET", "/v1/admin/audit?event=bogus", adminToken, nil), 400, "invalid", "event")
	if forced := list(t, h.get("/v1/admin/audit?event=force_released", 200), "entries"); len(forced) != 1 {
		t.Errorf("event=force_released: %v, want the one entry", forced)
	}
	page := h.get("/v1/admin/audit?limit=1", 200)
	if n, _ := page["next"].(string); n == "" {
		t.Fatalf("next = %v with more entries to come", page["next"])
	}
	rest := h.get("/v1/admin/audit?limit=10&after="+page["next"].(string), 200)
	if len(list(t, rest, "entries")) != 1 || rest["next"] != nil {
		t.Errorf("second page = %v", rest)
	}
	newest := list(t, h.get("/v1/admin/audit?key=policy/1&order=newest&limit=1", 200), "entries")
	if len(newest) != 1 || at(t, newest, 0, "event") != "force_released" {
		t.Errorf("order=newest, limit 1: %v, want the force_released entry", newest)
	}
	wantError(t, h.call("GET", "/v1/admin/audit?order=latest", adminToken, nil), 400, "invalid", "order")
	wantError(t, h.call("GET", "/v1/admin/audit?since=yesterday", adminToken, nil), 400, "invalid", "since")
	since := h.get("/v1/admin/audit?since=2026-11-30T11:00:00Z", 200)
	if len(list(t, since, "entries")) != 0 {
		t.Errorf("since after everything = %v", since)
	}
}
