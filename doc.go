// Package holdfast is a pessimistic offline lock manager for business
// records: when a person opens a record to edit it for minutes or hours,
// holdfast checks it out to them, and everyone else learns at once who
// holds it, since when and until when, before they waste any work.
//
// # The pieces
//
// A [Manager] holds the semantics of every lock operation and keeps its
// records in a store (package store): the embedded durable store by
// default, an in-memory one for tests. The same [Service] interface is
// implemented by the HTTP client (package client), so an application
// switches between an embedded lock manager and a shared holdfast server by
// changing one constructor. Operations that arrive together share one store
// transaction, and so one durable commit; each answers exactly as it would
// alone.
//
// # Locks
//
// A lock is taken on a key such as "policy/12345"; the first segment is the
// record type, whose [TypePolicy] decides which [Mode] an [Intent] takes
// ([ExclusiveWrite], [ExclusiveRead], [ReadWrite]) and how long a lock
// lives. Keys are hierarchical: a lock on "order/42" covers
// "order/42/line/7". An [Aggregate] maps a member key onto a root key, so
// locking any member locks the whole aggregate.
//
// Every lock belongs to an [Owner]'s session, the business transaction:
// the same session acquiring again is re-entrant and keeps its fencing
// token. Acquire never waits: it grants every key or none, and a refusal is
// a [*LockedError] naming each holder:
//
//	policy/12345 is being edited by Bob Smith since 10:47 UTC (until 12:47 UTC)
//
// # Releasing
//
// Locks end in three ways: Release on save or cancel; the end of their
// session (EndSession on logout, or no heartbeat within the session's idle
// timeout, which is how a closed browser tab is noticed); and their
// absolute expiry. An expired lock is free to others at once; a background
// sweep only tidies up. A holder that lost its lock learns why at its next
// Renew, Verify or Heartbeat ([*LockLostError] with a [LostReason]).
//
// # Fencing
//
// Every grant carries a token greater than every token the store issued
// before. Pass it along with a write and check it (Verify, or the store's
// own guard) so that a holder who lost its lock cannot land a late write.
package holdfast
