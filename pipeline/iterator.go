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

// Iterator walks one family in key order as the transaction sees it: the
// transaction's snapshot merged with its own buffered writes (a buffered delete hides
// the key). First, Seek and Next walk ascending; Last and Prev descending, and either
// step may follow any positioning (a change of direction repositions both sources
// around the current key). Every key it yields is tracked for conflicts, like Get.
// Writes buffered after the iterator was opened are not seen by it. Close it when
// done.
type Iterator struct {
	txn   *Txn
	f     *storage.Family
	base  *storage.Iterator
	own   []ownEntry // the transaction's writes in this family within bounds, sorted
	oi    int
	key   []byte
	value []byte
	valid bool
	back  bool // walking descending (Last, Prev)
	// atBase, atOwn: the current key is base's current key, or own[oi]'s (an own write
	// that shadows a snapshot key has already stepped base past it), so a step in the
	// same direction moves that source without comparing keys again.
	atBase, atOwn bool
	err           error
	// remote is the engine's iterator in a transaction of a DB opened with
	// OpenEngine; the fields from f to atOwn are unused then (see fromRemote).
	remote EngineIterator
}

// fromRemote copies the remote iterator's position after a move.
func (it *Iterator) fromRemote() {
	r := it.remote
	it.valid, it.err = r.Valid(), r.Err()
	it.key, it.value = nil, nil
	if it.valid {
		it.key, it.value = r.Key(), r.Value()
	}
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
	if t.rt != nil {
		return t.remoteIterator(cf, o)
	}
	f, err := t.db.checkFamily("Txn.NewIterator", cf)
	if err != nil {
		return nil, err
	}
	base, err := t.db.store.NewIterator(f, storage.IterOptions{Lower: o.Lower, Upper: o.Upper, Snapshot: t.snap})
	if err != nil {
		return nil, readErr(f, err)
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
	if it.remote != nil {
		it.remote.First()
		it.fromRemote()
		return
	}
	it.back = false
	it.base.First()
	it.oi = 0
	it.settle()
}

// Seek moves to the first key at or after key.
func (it *Iterator) Seek(key []byte) {
	if it.remote != nil {
		it.remote.Seek(key)
		it.fromRemote()
		return
	}
	it.back = false
	it.base.Seek(key)
	it.oi = it.ownAtOrAfter(key)
	it.settle()
}

// Last moves to the last key.
func (it *Iterator) Last() {
	if it.remote != nil {
		it.remote.Last()
		it.fromRemote()
		return
	}
	it.back = true
	it.base.Last()
	it.oi = len(it.own) - 1
	it.settleBack()
}

// Next moves to the next key (ascending).
func (it *Iterator) Next() {
	if it.remote != nil {
		it.remote.Next()
		it.fromRemote()
		return
	}
	if !it.valid {
		return
	}
	cur := it.key
	if it.back { // reposition both sources at or just after cur
		it.back = false
		it.base.Seek(cur)
		it.oi = it.ownAtOrAfter(cur)
		it.atBase = it.base.Valid() && bytes.Equal(it.base.Key(), cur)
		it.atOwn = it.oi < len(it.own) && bytes.Equal(it.own[it.oi].key, cur)
	}
	if it.atBase {
		it.base.Next()
	}
	if it.atOwn {
		it.oi++
	}
	it.settle()
}

// Prev moves to the previous key (descending).
func (it *Iterator) Prev() {
	if it.remote != nil {
		it.remote.Prev()
		it.fromRemote()
		return
	}
	if !it.valid {
		return
	}
	cur := it.key
	if !it.back { // reposition both sources at or just before cur
		it.back = true
		it.base.Seek(cur)
		it.atBase = it.base.Valid() && bytes.Equal(it.base.Key(), cur)
		if !it.base.Valid() {
			it.base.Last()
		} else if !it.atBase {
			it.base.Prev()
		}
		it.oi = it.ownAtOrAfter(cur)
		it.atOwn = it.oi < len(it.own) && bytes.Equal(it.own[it.oi].key, cur)
		if !it.atOwn {
			it.oi--
		}
	}
	if it.atBase {
		it.base.Prev()
	}
	if it.atOwn {
		it.oi--
	}
	it.settleBack()
}

// ownAtOrAfter returns the index of the first own write at or after key.
func (it *Iterator) ownAtOrAfter(key []byte) int {
	i, _ := slices.BinarySearchFunc(it.own, key, func(e ownEntry, k []byte) int { return bytes.Compare(e.key, k) })
	return i
}

// settle positions on the smaller of the two sources' current keys, skipping keys the
// transaction deleted.
func (it *Iterator) settle() { it.settleDir(false) }

// settleBack positions on the larger of the two sources' current keys (walking
// descending), skipping keys the transaction deleted.
func (it *Iterator) settleBack() { it.settleDir(true) }

func (it *Iterator) settleDir(back bool) {
	if it.txn.done {
		it.valid, it.key, it.value, it.err = false, nil, nil, ErrTxnDone
		return
	}
	ownStep := 1
	if back {
		ownStep = -1
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
		if it.oi >= 0 && it.oi < len(it.own) {
			oe = &it.own[it.oi]
		}
		// ownFirst: the own write comes first in the walk's direction (or ties).
		ownFirst := false
		if oe != nil {
			c := 0
			if bk != nil {
				c = bytes.Compare(oe.key, bk)
			}
			ownFirst = bk == nil || (!back && c <= 0) || (back && c >= 0)
		}
		switch {
		case bk == nil && oe == nil:
			it.valid, it.key, it.value, it.atBase, it.atOwn = false, nil, nil, false, false
			if err := it.base.Err(); err != nil {
				it.err = closedErr(err)
			}
			return
		case ownFirst:
			if bk != nil && bytes.Equal(oe.key, bk) { // the own write shadows the snapshot's
				if back {
					it.base.Prev()
				} else {
					it.base.Next()
				}
			}
			if oe.del {
				it.oi += ownStep
				continue
			}
			it.key, it.value, it.atBase, it.atOwn = bytes.Clone(oe.key), bytes.Clone(oe.value), false, true
		default:
			it.key, it.value, it.atBase, it.atOwn = bk, bv, true, false
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
func (it *Iterator) Close() {
	if it.remote != nil {
		it.remote.Close()
		return
	}
	it.base.Close()
}
