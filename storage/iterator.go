package storage

import (
	"bytes"
	"sync"

	"github.com/linxGnu/grocksdb"
)

// IterOptions bound an iterator. Lower is inclusive, Upper exclusive; nil means
// unbounded. Snapshot, when set, pins the view; otherwise the iterator sees the state
// at its creation.
type IterOptions struct {
	Lower, Upper []byte
	Snapshot     *Snapshot
}

// Iterator walks one family's keys in ascending order within its bounds. Key and Value
// return copies owned by the caller. It is not safe for concurrent use; Close it when
// done (Close of the database closes it too).
//
// Invariant: it and ro are valid while closed is false; they are freed under mu's
// write lock.
type Iterator struct {
	db           *DB
	mu           sync.Mutex
	closed       bool
	it           *grocksdb.Iterator
	ro           *grocksdb.ReadOptions
	lower, upper []byte
}

// NewIterator opens an iterator on f. Position it with First or Seek before reading.
// It fails as Get does for a dropped family; an iterator opened before the family was
// dropped keeps reading it until closed, whatever happens to the handle (RocksDB's
// iterator holds the family's data itself).
func (db *DB) NewIterator(f *Family, o IterOptions) (*Iterator, error) {
	if err := db.check(f); err != nil {
		return nil, err
	}
	if err := db.enter(); err != nil {
		return nil, err
	}
	defer db.leave()
	h, err := f.pin("iterate")
	if err != nil {
		return nil, err
	}
	defer f.unpin()
	ro := grocksdb.NewDefaultReadOptions()
	if o.Snapshot != nil {
		// Hold the snapshot until the native iterator has read it.
		if _, err := db.readOptions(o.Snapshot); err != nil {
			ro.Destroy()
			return nil, err
		}
		if o.Snapshot.snap != nil { // a secondary's snapshots pin nothing (see NewSnapshot)
			ro.SetSnapshot(o.Snapshot.snap)
		}
	}
	it := &Iterator{db: db, ro: ro, lower: bytes.Clone(o.Lower), upper: bytes.Clone(o.Upper)}
	if it.lower != nil {
		ro.SetIterateLowerBound(it.lower)
	}
	if it.upper != nil {
		ro.SetIterateUpperBound(it.upper)
	}
	it.it = db.native.NewIteratorCF(ro, h)
	o.Snapshot.endRead()
	db.track(it)
	return it, nil
}

// do runs fn on the native iterator if both the database and the iterator are open.
func (it *Iterator) do(fn func(*grocksdb.Iterator)) bool {
	if it.db.enter() != nil {
		return false
	}
	defer it.db.leave()
	it.mu.Lock()
	defer it.mu.Unlock()
	if it.closed {
		return false
	}
	fn(it.it)
	return true
}

// First moves to the first key within the bounds.
func (it *Iterator) First() { it.do(func(n *grocksdb.Iterator) { n.SeekToFirst() }) }

// Last moves to the last key within the bounds.
func (it *Iterator) Last() { it.do(func(n *grocksdb.Iterator) { n.SeekToLast() }) }

// Prev moves to the previous key.
func (it *Iterator) Prev() { it.do(func(n *grocksdb.Iterator) { n.Prev() }) }

// Seek moves to the first key at or after key.
func (it *Iterator) Seek(key []byte) { it.do(func(n *grocksdb.Iterator) { n.Seek(key) }) }

// Next moves to the next key.
func (it *Iterator) Next() { it.do(func(n *grocksdb.Iterator) { n.Next() }) }

// Valid reports whether the iterator is at a key. It is false after Close.
func (it *Iterator) Valid() bool {
	var ok bool
	it.do(func(n *grocksdb.Iterator) { ok = n.Valid() })
	return ok
}

// Key returns a copy of the current key, or nil when not Valid.
func (it *Iterator) Key() []byte {
	var k []byte
	it.do(func(n *grocksdb.Iterator) {
		if n.Valid() {
			s := n.Key()
			k = bytes.Clone(s.Data())
			s.Free()
		}
	})
	return k
}

// Value returns a copy of the current value, or nil when not Valid.
func (it *Iterator) Value() []byte {
	var v []byte
	it.do(func(n *grocksdb.Iterator) {
		if n.Valid() {
			s := n.Value()
			v = append(make([]byte, 0, s.Size()), s.Data()...)
			s.Free()
		}
	})
	return v
}

// Item returns copies of the current key and value, read together. Unlike Key and
// Value, which return nil once the database closes, it tells a closed iterator from
// an empty one: it fails with ErrClosed after the database's Close began, with
// ErrReleased after the iterator's Close, and with the iterator's error (or
// ErrNotFound) when it is not at a key. Decoders of stored keys and values use it, so
// a read racing Close reports ErrClosed rather than corrupt data.
func (it *Iterator) Item() (key, value []byte, err error) {
	ok := it.do(func(n *grocksdb.Iterator) {
		if !n.Valid() {
			if err = mapError("iterate", n.Err()); err == nil {
				err = ErrNotFound
			}
			return
		}
		k, v := n.Key(), n.Value()
		key = bytes.Clone(k.Data())
		value = append(make([]byte, 0, v.Size()), v.Data()...)
		k.Free()
		v.Free()
	})
	if !ok {
		return nil, nil, it.Err()
	}
	return key, value, err
}

// Err returns the iterator's error: ErrClosed or ErrReleased once closed, or a RocksDB
// read error.
func (it *Iterator) Err() error {
	var err error
	if !it.do(func(n *grocksdb.Iterator) { err = mapError("iterate", n.Err()) }) {
		if it.db.enter() != nil {
			return ErrClosed
		}
		it.db.leave()
		return ErrReleased
	}
	return err
}

// Close frees the iterator. It is idempotent and safe after the database closed.
func (it *Iterator) Close() {
	if it.db.enter() != nil {
		return
	}
	defer it.db.leave()
	it.db.untrack(it)
	it.releaseLocked()
}

func (it *Iterator) releaseLocked() {
	it.mu.Lock()
	defer it.mu.Unlock()
	if it.closed {
		return
	}
	it.closed = true
	it.it.Close()
	it.ro.Destroy()
}
