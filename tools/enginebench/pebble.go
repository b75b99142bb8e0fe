package main

import (
	"log"

	"github.com/cockroachdb/pebble/v2"
)

type pebbleEngine struct{ db *pebble.DB }

func openPebble(dir string) (engine, error) {
	db, err := pebble.Open(dir, &pebble.Options{Logger: quietLogger{}})
	if err != nil {
		return nil, err
	}
	return &pebbleEngine{db: db}, nil
}

// Keys are prefixed with the bucket byte, so each record kind is one range.
func (e *pebbleEngine) commit(ops []op) error {
	b := e.db.NewBatch()
	defer b.Close()
	for _, o := range ops {
		key := append([]byte{o.bucket}, o.key...)
		var err error
		if o.value == nil {
			err = b.Delete(key, nil)
		} else {
			err = b.Set(key, o.value, nil)
		}
		if err != nil {
			return err
		}
	}
	return b.Commit(pebble.Sync)
}

func (e *pebbleEngine) scanLocks(fn func(k, v []byte)) (int, error) {
	it, err := e.db.NewIter(&pebble.IterOptions{LowerBound: []byte{'l'}, UpperBound: []byte{'l' + 1}})
	if err != nil {
		return 0, err
	}
	n := 0
	for it.First(); it.Valid(); it.Next() {
		fn(it.Key(), it.Value())
		n++
	}
	if err := it.Close(); err != nil {
		return n, err
	}
	return n, nil
}

func (e *pebbleEngine) close() error { return e.db.Close() }

// quietLogger drops Pebble's informational lines so the figures stay readable.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any)           {}
func (quietLogger) Errorf(format string, a ...any) { log.Printf(format, a...) }
func (quietLogger) Fatalf(format string, a ...any) { log.Fatalf(format, a...) }
