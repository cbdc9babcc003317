package pipeline

import (
	"bytes"
	"slices"

	"github.com/rockline/rockline/storage"
)

// IterOptions bound a transaction iterator: Lower inclusive, Upper exclusive, nil for
// unbounded.
type IterOptions struct {
	Lower, Upper []byte
}

// Iterator walks one family in ascending key order as the transaction sees it: the
// transaction's snapshot merged with its own buffered writes (a buffered delete hides
// the key). Every key it yields is tracked for conflicts, like Get. Writes buffered
// after the iterator was opened are not seen by it. Close it when done.
type Iterator struct {
	txn   *Txn
	f     *storage.Family
	base  *storage.Iterator
	own   []ownEntry // the transaction's writes in this family within bounds, sorted
	oi    int
	key   []byte
	value []byte
	valid bool
	err   error
}

type ownEntry struct {
	key, value []byte
	del        bool
}

// NewIterator opens an iterator on cf. Position it with First or Seek.
func (t *Txn) NewIterator(cf *ColumnFamily, o IterOptions) (*Iterator, error) {
	if err := t.usable(); err != nil {
		return nil, err
	}
	f, err := t.db.checkFamily("Txn.NewIterator", cf)
	if err != nil {
		return nil, err
	}
	base, err := t.db.store.NewIterator(f, storage.IterOptions{Lower: o.Lower, Upper: o.Upper, Snapshot: t.snap})
	if err != nil {
		return nil, closedErr(err)
	}
	t.noteRead(f) // the keys it returns are tracked reads
	latest := make(map[string]int)
	var own []ownEntry
	for _, op := range t.ops {
		if op.Family != f || (o.Lower != nil && bytes.Compare(op.Key, o.Lower) < 0) || (o.Upper != nil && bytes.Compare(op.Key, o.Upper) >= 0) {
			continue
		}
		e := ownEntry{key: op.Key, value: op.Value, del: op.Delete}
		if i, ok := latest[string(op.Key)]; ok {
			own[i] = e
			continue
		}
		latest[string(op.Key)] = len(own)
		own = append(own, e)
	}
	slices.SortFunc(own, func(a, b ownEntry) int { return bytes.Compare(a.key, b.key) })
	return &Iterator{txn: t, f: f, base: base, own: own}, nil
}

// First moves to the first key.
func (it *Iterator) First() {
	it.base.First()
	it.oi = 0
	it.settle()
}

// Seek moves to the first key at or after key.
func (it *Iterator) Seek(key []byte) {
	it.base.Seek(key)
	it.oi, _ = slices.BinarySearchFunc(it.own, key, func(e ownEntry, k []byte) int { return bytes.Compare(e.key, k) })
	it.settle()
}

// Next moves to the next key.
func (it *Iterator) Next() {
	if !it.valid {
		return
	}
	cur := it.key
	if it.base.Valid() && bytes.Equal(it.base.Key(), cur) {
		it.base.Next()
	}
	if it.oi < len(it.own) && bytes.Equal(it.own[it.oi].key, cur) {
		it.oi++
	}
	it.settle()
}

// settle positions on the smaller of the two sources' current keys, skipping keys the
// transaction deleted.
func (it *Iterator) settle() {
	if it.txn.done {
		it.valid, it.key, it.value, it.err = false, nil, nil, ErrTxnDone
		return
	}
	for {
		var bk, bv []byte
		if it.base.Valid() {
			k, v, err := it.base.Item() // ErrClosed, not an empty key, when Close races
			if err != nil {
				it.valid, it.key, it.value, it.err = false, nil, nil, closedErr(err)
				return
			}
			bk, bv = k, v
		}
		var oe *ownEntry
		if it.oi < len(it.own) {
			oe = &it.own[it.oi]
		}
		switch {
		case bk == nil && oe == nil:
			it.valid, it.key, it.value = false, nil, nil
			if err := it.base.Err(); err != nil {
				it.err = closedErr(err)
			}
			return
		case oe != nil && (bk == nil || bytes.Compare(oe.key, bk) <= 0):
			if bk != nil && bytes.Equal(oe.key, bk) {
				it.base.Next()
			}
			if oe.del {
				it.oi++
				continue
			}
			it.key, it.value = bytes.Clone(oe.key), bytes.Clone(oe.value)
		default:
			it.key, it.value = bk, bv
		}
		it.valid = true
		it.txn.reads = append(it.txn.reads, it.txn.db.fp.Of(it.f.ID(), it.key))
		return
	}
}

// Valid reports whether the iterator is at a key.
func (it *Iterator) Valid() bool { return it.valid }

// Key returns the current key (the caller's copy), or nil.
func (it *Iterator) Key() []byte { return it.key }

// Value returns the current value (the caller's copy), or nil.
func (it *Iterator) Value() []byte { return it.value }

// Err returns the first error the iterator met.
func (it *Iterator) Err() error { return it.err }

// Close frees the iterator; it is idempotent.
func (it *Iterator) Close() { it.base.Close() }
