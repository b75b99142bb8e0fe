package main

import (
	"os"
	"path/filepath"

	bolt "go.etcd.io/bbolt"
)

type boltEngine struct{ db *bolt.DB }

var boltBuckets = map[byte][]byte{'l': []byte("locks"), 'a': []byte("audit"), 'm': []byte("meta")}

func openBolt(dir string) (engine, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	db, err := bolt.Open(filepath.Join(dir, "bolt.db"), 0o600, &bolt.Options{
		NoFreelistSync: true,
		FreelistType:   bolt.FreelistMapType,
	})
	if err != nil {
		return nil, err
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, name := range boltBuckets {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		return nil
	})
	return &boltEngine{db: db}, err
}

func (e *boltEngine) commit(ops []op) error {
	return e.db.Update(func(tx *bolt.Tx) error {
		for _, o := range ops {
			b := tx.Bucket(boltBuckets[o.bucket])
			if o.bucket == 'a' {
				b.FillPercent = 1 // appended in key order
			}
			var err error
			if o.value == nil {
				err = b.Delete(o.key)
			} else {
				err = b.Put(o.key, o.value)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
}

func (e *boltEngine) scanLocks(fn func(k, v []byte)) (int, error) {
	n := 0
	err := e.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(boltBuckets['l']).ForEach(func(k, v []byte) error {
			fn(k, v)
			n++
			return nil
		})
	})
	return n, err
}

func (e *boltEngine) close() error { return e.db.Close() }
