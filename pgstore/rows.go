package pgstore

import (
	"cmp"
	"slices"
	"strings"

	"github.com/holdfast/holdfast/store"
)

// lockRows are the lock rows a transaction knows, nil where it knows a
// row is absent, indexed so that a transaction of many operations finds a
// key's related rows and a session's rows without scanning them all.
type lockRows struct {
	rows      map[lockRef]*store.Lock
	keys      []string            // every key in rows, sorted
	bySession map[string][]string // session → its keys in rows
	byKey     map[string][]string // key → its sessions in rows
}

func (c *lockRows) get(key, session string) (l *store.Lock, ok bool) {
	l, ok = c.rows[lockRef{key, session}]
	return l, ok
}

// put notes the row of key and session, or its absence (l nil).
func (c *lockRows) put(key, session string, l *store.Lock) {
	ref := lockRef{key, session}
	if _, ok := c.rows[ref]; !ok {
		if c.rows == nil {
			c.rows = make(map[lockRef]*store.Lock)
			c.bySession = make(map[string][]string)
			c.byKey = make(map[string][]string)
		}
		if _, ok := c.byKey[key]; !ok {
			i, _ := slices.BinarySearch(c.keys, key)
			c.keys = slices.Insert(c.keys, i, key)
		}
		c.bySession[session] = append(c.bySession[session], key)
		c.byKey[key] = append(c.byKey[key], session)
	}
	c.rows[ref] = l
}

// ofSession returns the rows of session, ordered by key.
func (c *lockRows) ofSession(session string) []store.Lock {
	var out []store.Lock
	for _, k := range c.bySession[session] {
		if l := c.rows[lockRef{k, session}]; l != nil {
			out = append(out, *l)
		}
	}
	slices.SortFunc(out, func(a, b store.Lock) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// related returns the rows on key, on its ancestors and below it, ordered
// by key and session.
func (c *lockRows) related(key string) []store.Lock {
	var out []store.Lock
	add := func(k string) {
		for _, s := range c.byKey[k] {
			if l := c.rows[lockRef{k, s}]; l != nil {
				out = append(out, *l)
			}
		}
	}
	for _, k := range ancestorsAndSelf(key) {
		add(k)
	}
	// Keys below key sort in [key+"/", key+"0"): '0' follows '/'.
	below, end := key+"/", key+"0"
	i, _ := slices.BinarySearch(c.keys, below)
	for ; i < len(c.keys) && c.keys[i] < end; i++ {
		add(c.keys[i])
	}
	slices.SortFunc(out, func(a, b store.Lock) int {
		return cmp.Or(strings.Compare(a.Key, b.Key), strings.Compare(a.Session, b.Session))
	})
	return out
}
