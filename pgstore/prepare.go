package pgstore

import (
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/holdfast/holdfast/store"
)

var _ store.Preparer = (*tx)(nil)

// Prepare reads ahead for a transaction of several operations, or of one
// on several keys (see store.Preparer). In one round trip it takes every
// advisory lock that operations on keys and sessions take (one
// take_locks, in ascending order, like any other), reads under them into
// the transaction's caches the lock rows related to each key, the
// sessions' records and locks and the lost records of the reporting
// sessions, and draws a token and an audit id per key. The operations
// then read from the caches, so that a group of them costs a constant
// number of round trips. Called first, Prepare opens the transaction in
// the same round trip.
//
// Lost records are read only for the sessions that report them
// (heartbeats): acquires and releases never read them, and a statement
// less, with its rows, is what a prepared transaction costs most of. An
// operation that reads them unannounced (a failed verify or renew) costs
// a round trip.
//
// Keys come as callers gave them, and aggregates may map them onto
// others. Where the transaction does not know yet whether any aggregate
// is mapped, it reads ahead for the keys as given and reads their
// mappings too; where some are mapped, a second round trip reads ahead
// for the keys they resolve to.
func (t *tx) Prepare(keys, sessions, reporting []string) error {
	if !t.write || t.err != nil {
		return t.err
	}
	if !t.begun {
		if err := t.readAhead(keys, sessions, reporting, t.unknownAggregates(keys)); err != nil || t.noAggregates {
			return err
		}
	}
	keys, unknownAggregates, err := t.resolveHint(keys)
	if err != nil {
		return err
	}
	return t.readAhead(keys, sessions, reporting, unknownAggregates)
}

// readAhead takes the locks and reads the records of keys (resolved) and
// sessions, the lost records of reporting and the mappings of
// unknownAggregates, in one round trip, if it knows not all of them yet.
func (t *tx) readAhead(keys, sessions, reporting, unknownAggregates []string) error {
	var read, readSessions, readLost []string // not all known yet
	listed := make(map[string]bool, 2*len(keys))
	for _, k := range keys {
		t.lockKey(k)
		if !t.relatedKnown(k) && !listed[k] {
			listed[k] = true
			read = append(read, k)
		}
	}
	for _, id := range sessions {
		t.lockSession(id)
		if _, known := t.sessions[id]; !known || !t.fullSessions[id] {
			readSessions = append(readSessions, id)
		}
	}
	for _, id := range reporting {
		t.lockSession(id)
		// A session twice is read once all the same (= ANY), so no search.
		if _, known := t.lost[id]; !known {
			readLost = append(readLost, id)
		}
	}
	// Drawn after the keys' locks, in the same round trip: good for their
	// grants (see tx.tokens).
	tokens, auditIDs := len(keys)-len(t.tokens), len(keys)-len(t.auditIDs)
	if len(read) == 0 && len(readSessions) == 0 && len(readLost) == 0 && len(unknownAggregates) == 0 && tokens <= 0 && auditIDs <= 0 &&
		len(t.locks.pending) == 0 {
		return nil
	}
	var (
		exact, low, high []string
		found            []store.Lock
		holders          map[string]versionedSession
		foundSessions    []store.Session
		foundLost        []store.Lost
	)
	clear(listed)
	for _, k := range read {
		for _, a := range ancestorsAndSelf(k) {
			if !listed[a] {
				listed[a] = true
				exact = append(exact, a)
			}
		}
		low, high = append(low, k+"/"), append(high, k+"0")
	}
	err := t.exchange(func(b *pgx.Batch) {
		if len(unknownAggregates) > 0 {
			t.queueAggregates(b, unknownAggregates)
		}
		if len(read) > 0 || len(readSessions) > 0 {
			b.Queue(t.q.locksAhead, exact, low, high, readSessions).Query(func(rows pgx.Rows) (err error) {
				found, holders, err = scanLocksAndHolders(rows)
				return err
			})
		}
		if len(readSessions) > 0 {
			b.Queue(t.q.sessionsByID, readSessions).Query(func(rows pgx.Rows) (err error) {
				foundSessions, err = scanSessions(rows)
				return err
			})
		}
		if len(readLost) > 0 {
			b.Queue(t.q.sessionsLost, readLost).Query(func(rows pgx.Rows) error {
				for rows.Next() {
					l, err := scanLost(rows)
					if err != nil {
						return err
					}
					foundLost = append(foundLost, l)
				}
				return rows.Err()
			})
		}
		t.drawAhead(tokens, auditIDs)
	})
	if err != nil {
		return err
	}
	t.remember(found...)
	t.addHolders(holders)
	for _, k := range exact {
		t.fullKeys[k] = true
	}
	for _, k := range read {
		t.fullTrees[k] = true
	}
	if t.lost == nil && len(readLost) > 0 {
		t.lost = make(map[string][]store.Lost, len(readLost))
	}
	for _, id := range readSessions {
		t.rememberSession(store.Session{}, id, false)
		t.fullSessions[id] = true
	}
	for _, id := range readLost {
		t.lost[id] = nil
	}
	for _, s := range foundSessions {
		t.rememberSession(s, s.ID, true)
	}
	for _, l := range foundLost {
		t.lost[l.Lock.Session] = append(t.lost[l.Lock.Session], l)
	}
	return nil
}

// resolveHint maps the hinted keys through aggregates the way the lock
// manager does (while some ancestor-or-self is a member, replace it by its
// root, the longest member first), reading the mappings of the keys and
// their ancestors first if it does not know them. It returns the names
// of the keys it resolved to whose mappings it does not know: only a
// chain of aggregates maps those, so Prepare reads them with the rest,
// and the operations resolve further themselves if one does.
func (t *tx) resolveHint(keys []string) (resolved, unknown []string, err error) {
	if t.noAggregates {
		return keys, nil, nil
	}
	if unknown := t.unknownAggregates(keys); len(unknown) > 0 {
		if err := t.readAggregates(unknown); err != nil {
			return nil, nil, err
		}
	}
	resolved = make([]string, len(keys))
	for i, k := range keys {
		resolved[i] = t.resolveKnown(k)
	}
	return resolved, t.unknownAggregates(resolved), nil
}

// unknownAggregates lists, sorted, the keys and ancestors whose mappings
// t.aggs does not hold. Sorted and compacted, not searched as the list
// grows: a group of batches names thousands of keys, and the search took
// a third of the server's CPU under the aggregate workload.
func (t *tx) unknownAggregates(keys []string) []string {
	var out []string
	for _, k := range keys {
		for _, a := range ancestorsAndSelf(k) {
			if _, known := t.aggs[a]; !known {
				out = append(out, a)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// resolveKnown maps key through the mappings t.aggs holds, as far as they
// decide it.
func (t *tx) resolveKnown(key string) string {
	for range maxAggregateDepth {
		mapped := false
		for _, a := range ancestorsAndSelf(key) {
			root, known := t.aggs[a]
			if !known {
				return key
			}
			if root != nil {
				key, mapped = *root+key[len(a):], true
				break
			}
		}
		if !mapped {
			return key
		}
	}
	return key
}

// maxAggregateDepth bounds resolveKnown as the lock manager bounds its own
// resolution; a deeper chain is the operation's error to report.
const maxAggregateDepth = 32

// relatedKnown reports whether the rows cache holds every lock Related
// would return for key: those on key and its ancestors, and those below
// key.
func (t *tx) relatedKnown(key string) bool {
	if !t.fullTrees[key] && !t.treeAbove(key) {
		return false
	}
	for k := key; ; {
		if !t.fullKeys[k] && !t.treeAbove(k) {
			return false
		}
		i := strings.LastIndexByte(k, '/')
		if i <= 0 {
			return true
		}
		k = k[:i]
	}
}

// treeAbove reports whether every row below some ancestor of key is known.
func (t *tx) treeAbove(key string) bool {
	for i := len(key) - 1; i > 0; i-- {
		if key[i] == '/' && t.fullTrees[key[:i]] {
			return true
		}
	}
	return false
}

// addHolders keeps the records of holders that a statement read with
// their lock rows (see tx.holders).
func (t *tx) addHolders(holders map[string]versionedSession) {
	if t.holders == nil {
		t.holders = holders
	} else {
		maps.Copy(t.holders, holders)
	}
}

// scanLocksAndHolders reads rows of lock columns followed by a holder's
// record (locksAhead, relatedHolders, a read's listing of locks): the
// locks, and the records of the sessions holding them that the
// transaction does not read under their locks.
func scanLocksAndHolders(rows pgx.Rows) ([]store.Lock, map[string]versionedSession, error) {
	var (
		out     []store.Lock
		holders map[string]versionedSession
		// NULL where the row has no session record here; reused, as
		// Scan sets each of them for every row.
		version, id, user, name, reason *string
		lastSeen, ended                 *time.Time
		idle                            *int64
	)
	for rows.Next() {
		l, err := scanLock(rows, &version, &id, &user, &name, &lastSeen, &idle, &ended, &reason)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, l)
		if id == nil {
			// One of the transaction's own sessions, which it reads
			// under their locks (locksAhead), or one with no record,
			// which Session reads in a round trip of its own.
			continue
		}
		if holders == nil {
			holders = make(map[string]versionedSession)
		}
		s := store.Session{ID: *id, User: *user, Name: *name, LastSeen: lastSeen.UTC(), IdleTimeout: time.Duration(*idle), EndReason: *reason}
		if ended != nil {
			s.EndedAt = ended.UTC()
		}
		holders[l.Session] = versionedSession{s, *version}
	}
	return out, holders, rows.Err()
}
