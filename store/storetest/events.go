package storetest

import (
	"time"

	"github.com/holdfast/holdfast"
)

var eventCases = []testCase{
	{"InOrder", testEventsInOrder},
	{"Prefix", testEventsPrefix},
}

// next receives one entry; the deadline only keeps a broken Manager from
// hanging the suite, it is not a timing assertion.
func (e *env) next(ch <-chan holdfast.AuditEntry) holdfast.AuditEntry {
	e.t.Helper()
	select {
	case en, ok := <-ch:
		if !ok {
			e.t.Fatal("subscription closed")
		}
		return en
	case <-time.After(30 * time.Second):
		e.t.Fatal("no event within 30s")
	}
	return holdfast.AuditEntry{}
}

func testEventsInOrder(e *env) {
	ch, cancel := e.m.Subscribe("")
	defer cancel()
	bob := e.grant(exclusive("order/1", owner("bob")))
	carol := e.grant(exclusive("order/2", owner("carol")))
	e.release("s-bob", "order/1")

	var last uint64
	for _, want := range []struct {
		ev   holdfast.Event
		lock holdfast.Lock
	}{{holdfast.EventAcquired, bob}, {holdfast.EventAcquired, carol}, {holdfast.EventReleased, bob}} {
		en := e.next(ch)
		if en.Event != want.ev || en.ID <= last {
			e.t.Fatalf("event %s id %d after id %d, want %s after it", en.Event, en.ID, last, want.ev)
		}
		wantLock(e.t, string(want.ev)+" event's lock", en.Lock, want.lock)
		last = en.ID
	}
	audit := e.audit(holdfast.AuditQuery{})
	if len(audit) != 3 || audit[2].ID != last {
		e.t.Fatalf("audit %q, want the same three entries ending at id %d", auditSigs(audit), last)
	}
}

func testEventsPrefix(e *env) {
	ch, cancel := e.m.Subscribe("order/1")
	e.grant(exclusive("order/10", owner("bob")))
	e.grant(exclusive("order/2", owner("bob")))
	e.grant(exclusive("order/1/line/1", owner("bob")))
	en := e.next(ch)
	if en.Event != holdfast.EventAcquired || en.Lock.Key != "order/1/line/1" {
		e.t.Fatalf("first event under order/1: %s on %s", en.Event, en.Lock.Key)
	}
	cancel()
	for range ch {
		e.t.Fatal("entry after cancel")
	}
}
