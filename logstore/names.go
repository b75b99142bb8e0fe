package logstore

import (
	"hash/maphash"

	"github.com/holdfast/holdfast/store"
)

// names is a Bloom filter of what an audit listing can filter on, in one
// stretch of a segment: the key of each entry and every key above it,
// its session and its user. A listing filtered by any of them skips the
// stretches that cannot hold a match, where it would otherwise read and
// decode every entry of the log: the console's page of a lock lists that
// key's latest entries, and a key seldom locked has few among many.
// It lives in memory only; a segment read without one is read whole.
type names [namesWords]uint64

const (
	// namesWords is its size: 512 bytes for a stretch of about
	// tuning.markBytes (64 KiB), which holds a few hundred entries; with
	// namesProbes bits a name, that many distinct names leave about one
	// stretch in a hundred read for nothing. A stretch of one large
	// frame fills its filter and is read, as without one.
	namesWords  = 64
	namesProbes = 4
)

// name is a hashed name, kept apart by its kind.
type name uint64

const (
	nameKey byte = iota + 1
	nameSession
	nameUser
)

// nameSeed hashes names; filters are never written, so any seed serves.
var nameSeed = maphash.MakeSeed()

func hashName(kind byte, v string) name {
	return name(maphash.String(nameSeed, v) ^ uint64(kind)*0x9e3779b97f4a7c15)
}

// probe returns the word and bit of h's probe i of namesProbes, by double
// hashing.
func (h name) probe(i uint32) (word int, bit uint64) {
	p := (uint32(h) + i*(uint32(h>>32)|1)) % (namesWords * 64)
	return int(p / 64), 1 << (p % 64)
}

func (n *names) add(h name) {
	for i := range uint32(namesProbes) {
		w, bit := h.probe(i)
		n[w] |= bit
	}
}

// mayHold reports whether the stretch may hold an entry with every one of
// want; a stretch without a filter (nil) may hold anything.
func (n *names) mayHold(want []name) bool {
	if n == nil {
		return true
	}
	for _, h := range want {
		for i := range uint32(namesProbes) {
			if w, bit := h.probe(i); n[w]&bit == 0 {
				return false
			}
		}
	}
	return true
}

// auditNames appends the names of e to out: its key and each key above it
// (a listing of a key lists the keys below it too), its session, its user.
func auditNames(out []name, e *store.AuditEntry) []name {
	key := e.Lock.Key
	if key != "" {
		for i := range len(key) {
			if key[i] == '/' {
				out = append(out, hashName(nameKey, key[:i]))
			}
		}
		out = append(out, hashName(nameKey, key))
	}
	if e.Lock.Session != "" {
		out = append(out, hashName(nameSession, e.Lock.Session))
	}
	if e.Lock.User != "" {
		out = append(out, hashName(nameUser, e.Lock.User))
	}
	return out
}

// queryNames returns the names an entry must have to match q, as far as
// a filter can tell (memdb.AuditMatches has the rest).
func queryNames(q store.AuditQuery) []name {
	var want []name
	if q.Key != "" {
		want = append(want, hashName(nameKey, q.Key))
	}
	if q.Session != "" {
		want = append(want, hashName(nameSession, q.Session))
	}
	if q.User != "" {
		want = append(want, hashName(nameUser, q.User))
	}
	return want
}
