package storetest

import (
	"slices"
	"time"

	"github.com/holdfast/holdfast"
)

var auditCases = []testCase{
	{"EveryEvent", testAuditEveryEvent},
	{"Filters", testAuditFilters},
	{"Pagination", testAuditPagination},
	{"NewestFirst", testAuditNewestFirst},
}

// auditStory makes one of every audit event and returns the time just
// before the last group of them (erin's and frank's) began.
func (e *env) auditStory() (since time.Time) {
	e.t.Helper()
	e.grant(exclusive("policy/1", owner("bob")))
	e.advance(time.Minute)
	e.renew("s-bob", time.Hour, "policy/1")
	e.advance(time.Minute)
	e.release("s-bob", "policy/1")

	req := exclusive("ticket/2", owner("carol"))
	req.TTL = holdfast.Duration(time.Minute)
	e.grant(req)
	e.advance(2 * time.Minute)
	e.sweep()

	e.idleAcquire("order/3", owner("dave"))
	e.advance(idle + time.Second)
	e.sweep()

	e.advance(time.Minute)
	since = e.now().Add(-30 * time.Second)
	e.grant(exclusive("order/4", owner("erin")))
	e.forceRelease(holdfast.ForceReleaseRequest{Keys: keys("order/4"), Reason: "stuck", Actor: "alice"})
	e.grant(exclusive("order/5", tab("u-frank", "s-tab1")))
	req = exclusive("order/5", tab("u-frank", "s-tab2"))
	req.Takeover = true
	e.grant(req)
	return since
}

// auditSig is what the suite checks of an entry: the event and whose lock.
func auditSig(en holdfast.AuditEntry) string {
	return string(en.Event) + " " + en.Lock.Key + " " + en.Lock.Owner.Session
}

func auditSigs(entries []holdfast.AuditEntry) []string {
	out := make([]string, len(entries))
	for i, en := range entries {
		out[i] = auditSig(en)
	}
	return out
}

func (e *env) wantAuditOrdered(what string, entries []holdfast.AuditEntry) {
	e.t.Helper()
	for i := 1; i < len(entries); i++ {
		if entries[i].ID <= entries[i-1].ID {
			e.t.Fatalf("%s: entry IDs not increasing: %d after %d", what, entries[i].ID, entries[i-1].ID)
		}
	}
}

// wantAudit requires entries to be exactly these signatures, in any order
// (events of one transaction, like a takeover's, have no defined order).
func (e *env) wantAudit(what string, entries []holdfast.AuditEntry, want ...string) {
	e.t.Helper()
	e.wantAuditOrdered(what, entries)
	got := auditSigs(entries)
	slices.Sort(got)
	want = slices.Clone(want)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		e.t.Fatalf("%s:\n got  %q\n want %q", what, got, want)
	}
}

func testAuditEveryEvent(e *env) {
	bob := e.grant(exclusive("policy/1", owner("bob")))
	acquiredAt := e.now()
	e.advance(time.Minute)
	renewed := e.renew("s-bob", time.Hour, "policy/1")[0]
	renewedAt := e.now()
	e.advance(time.Minute)
	e.release("s-bob", "policy/1")
	releasedAt := e.now()

	req := exclusive("ticket/2", owner("carol"))
	req.TTL = holdfast.Duration(time.Minute)
	carol := e.grant(req)
	e.advance(2 * time.Minute)
	e.sweep()

	dave := e.idleAcquire("order/3", owner("dave"))
	e.advance(idle + time.Second)
	e.sweep()

	erin := e.grant(exclusive("order/4", owner("erin")))
	e.forceRelease(holdfast.ForceReleaseRequest{Keys: keys("order/4"), Reason: "stuck", Actor: "alice"})
	tab1 := e.grant(exclusive("order/5", tab("u-frank", "s-tab1")))
	req = exclusive("order/5", tab("u-frank", "s-tab2"))
	req.Takeover = true
	tab2 := e.grant(req)
	lastAt := e.now()

	one := func(ev holdfast.Event, lock holdfast.Lock, at time.Time) holdfast.AuditEntry {
		e.t.Helper()
		got := e.audit(holdfast.AuditQuery{Event: ev})
		if len(got) != 1 {
			e.t.Fatalf("%s entries: %q, want one", ev, auditSigs(got))
		}
		wantLock(e.t, string(ev)+" entry's lock", got[0].Lock, lock)
		if !at.IsZero() && !time.Time(got[0].At).Equal(at) {
			e.t.Fatalf("%s entry at %s, want %s", ev, fmtTime(time.Time(got[0].At)), fmtTime(at))
		}
		return got[0]
	}
	one(holdfast.EventRenewed, renewed, renewedAt)
	one(holdfast.EventReleased, renewed, releasedAt)
	one(holdfast.EventExpired, carol, time.Time{})
	one(holdfast.EventSessionExpired, dave, time.Time{})
	force := one(holdfast.EventForceReleased, erin, lastAt)
	if force.Actor != "alice" || force.Reason != "stuck" {
		e.t.Fatalf("force_released entry: actor %q reason %q", force.Actor, force.Reason)
	}
	one(holdfast.EventTakenOver, tab1, lastAt)

	acquired := e.audit(holdfast.AuditQuery{Event: holdfast.EventAcquired})
	wantGrants := []holdfast.Lock{bob, carol, dave, erin, tab1, tab2}
	if len(acquired) != len(wantGrants) {
		e.t.Fatalf("acquired entries: %q", auditSigs(acquired))
	}
	e.wantAuditOrdered("acquired", acquired)
	for i, l := range wantGrants {
		wantLock(e.t, "acquired entry's lock", acquired[i].Lock, l)
	}
	if !time.Time(acquired[0].At).Equal(acquiredAt) {
		e.t.Fatalf("acquired entry at %s, want %s", fmtTime(time.Time(acquired[0].At)), fmtTime(acquiredAt))
	}

	all := e.audit(holdfast.AuditQuery{})
	e.wantAuditOrdered("all entries", all)
	if len(all) < 12 {
		e.t.Fatalf("only %d entries in all: %q", len(all), auditSigs(all))
	}
}

func testAuditFilters(e *env) {
	since := e.auditStory()
	e.wantAudit("key policy/1", e.audit(holdfast.AuditQuery{Key: "policy/1"}),
		"acquired policy/1 s-bob", "renewed policy/1 s-bob", "released policy/1 s-bob")
	e.wantAudit("session s-carol", e.audit(holdfast.AuditQuery{Session: "s-carol"}),
		"acquired ticket/2 s-carol", "expired ticket/2 s-carol")
	e.wantAudit("user u-frank", e.audit(holdfast.AuditQuery{User: "u-frank"}),
		"acquired order/5 s-tab1", "taken_over order/5 s-tab1", "acquired order/5 s-tab2")
	e.wantAudit("event force_released", e.audit(holdfast.AuditQuery{Event: holdfast.EventForceReleased}),
		"force_released order/4 s-erin")
	e.wantAudit("since", e.audit(holdfast.AuditQuery{Since: since}),
		"acquired order/4 s-erin", "force_released order/4 s-erin",
		"acquired order/5 s-tab1", "taken_over order/5 s-tab1", "acquired order/5 s-tab2")
	e.wantAudit("key and event", e.audit(holdfast.AuditQuery{Key: "order/5", Event: holdfast.EventAcquired}),
		"acquired order/5 s-tab1", "acquired order/5 s-tab2")
}

func testAuditPagination(e *env) {
	e.auditStory()
	all := e.audit(holdfast.AuditQuery{})
	var paged []holdfast.AuditEntry
	q := holdfast.AuditQuery{Limit: 2}
	for {
		page, err := e.m.Audit(e.t.Context(), q)
		if err != nil {
			e.t.Fatal(err)
		}
		if len(page.Entries) > 2 {
			e.t.Fatalf("page of %d entries with limit 2", len(page.Entries))
		}
		paged = append(paged, page.Entries...)
		if page.Next == nil {
			break
		}
		if len(paged) > len(all) {
			e.t.Fatalf("pages run past the %d entries", len(all))
		}
		q.After = *page.Next
	}
	if !slices.Equal(auditSigs(paged), auditSigs(all)) {
		e.t.Fatalf("pages:\n %q\nall:\n %q", auditSigs(paged), auditSigs(all))
	}
	for i := range all {
		if paged[i].ID != all[i].ID {
			e.t.Fatalf("entry %d: id %d in pages, %d in all", i, paged[i].ID, all[i].ID)
		}
	}
}

// Newest first, paged: the same entries as oldest first, reversed, with
// filters applied the same way.
func testAuditNewestFirst(e *env) {
	e.auditStory()
	for _, filter := range []holdfast.AuditQuery{{}, {Key: "order/5"}} {
		all := e.audit(filter)
		var paged []holdfast.AuditEntry
		q := filter
		q.Newest, q.Limit = true, 2
		for {
			page, err := e.m.Audit(e.t.Context(), q)
			if err != nil {
				e.t.Fatal(err)
			}
			paged = append(paged, page.Entries...)
			if page.Next == nil {
				break
			}
			if len(paged) > len(all) {
				e.t.Fatalf("pages run past the %d entries", len(all))
			}
			q.After = *page.Next
		}
		slices.Reverse(all)
		if len(all) < 2 || !slices.Equal(auditSigs(paged), auditSigs(all)) {
			e.t.Fatalf("newest first (filter %+v):\n %q\nall, reversed:\n %q", filter, auditSigs(paged), auditSigs(all))
		}
		for i := 1; i < len(paged); i++ {
			if paged[i].ID >= paged[i-1].ID {
				e.t.Fatalf("entry %d has id %d after %d: not newest first", i, paged[i].ID, paged[i-1].ID)
			}
		}
	}
}
