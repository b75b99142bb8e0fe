package storetest

import (
	"time"
)

// Heartbeats record activity lazily where a store can (store.Toucher), but
// a store that is closed cleanly keeps every one of them.
var activityCases = []testCase{
	{"HeartbeatSurvivesReopen", testHeartbeatSurvivesReopen},
	{"HeartbeatKeepsIdleTimeoutAcrossReopen", testHeartbeatKeepsIdleTimeoutAcrossReopen},
}

func testHeartbeatSurvivesReopen(e *env) {
	e.needReopen()
	bob := e.idleAcquire("order/1", owner("bob"))
	e.advance(idle - time.Minute)
	seen := e.now()
	e.heartbeat("s-bob")

	e.reopen()

	s := e.session("s-bob")
	if !time.Time(s.LastSeen).Equal(seen) || s.ExpiresAt == nil || !time.Time(*s.ExpiresAt).Equal(seen.Add(idle)) {
		e.t.Fatalf("session after a heartbeat and reopen: %+v, want last_seen %s", s, fmtTime(seen))
	}
	// The heartbeat, not the acquire, decides the idle deadline.
	e.advance(idle - time.Second)
	e.wantLive("kept alive by the heartbeat across reopen", bob)
}

func testHeartbeatKeepsIdleTimeoutAcrossReopen(e *env) {
	e.needReopen()
	e.idleAcquire("order/1", owner("bob"))
	e.heartbeat("s-bob")
	e.heartbeat("s-bob")

	e.reopen()

	if s := e.session("s-bob"); time.Duration(s.IdleTimeout) != idle {
		e.t.Fatalf("idle timeout after heartbeats and reopen: %v, want %v", time.Duration(s.IdleTimeout), idle)
	}
}
