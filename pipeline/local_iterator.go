package pipeline

import (
	"bytes"
	"context"
	"slices"

	"github.com/rockline/rockline/storage"
)

// localIter is the local engine's iterator (EngineIterator): a RocksDB iterator at
// the transaction's snapshot merged with the transaction's own writes in the family
// (see Iterator for what it yields). Every key it stops at is a tracked read.
type localIter struct {
	txn   *localTxn
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
}

type ownEntry struct {
	key, value []byte
	del        bool
}

// NewIterator is EngineTxn.NewIterator.
func (t *localTxn) NewIterator(_ context.Context, ef EngineFamily, o IterOptions) (EngineIterator, error) {
	if t.done {
		return nil, ErrTxnDone
	}
	f := storageFamily(ef)
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
	return &localIter{txn: t, f: f, base: base, own: own}, nil
}

// First moves to the first key.
func (it *localIter) First() {
	it.back = false
	it.base.First()
	it.oi = 0
	it.settle()
}

// Seek moves to the first key at or after key.
func (it *localIter) Seek(key []byte) {
	it.back = false
	it.base.Seek(key)
	it.oi = it.ownAtOrAfter(key)
	it.settle()
}

// Last moves to the last key.
func (it *localIter) Last() {
	it.back = true
	it.base.Last()
	it.oi = len(it.own) - 1
	it.settleBack()
}

// Next moves to the next key (ascending).
func (it *localIter) Next() {
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
func (it *localIter) Prev() {
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
func (it *localIter) ownAtOrAfter(key []byte) int {
	i, _ := slices.BinarySearchFunc(it.own, key, func(e ownEntry, k []byte) int { return bytes.Compare(e.key, k) })
	return i
}

// settle positions on the smaller of the two sources' current keys, skipping keys the
// transaction deleted.
func (it *localIter) settle() { it.settleDir(false) }

// settleBack positions on the larger of the two sources' current keys (walking
// descending), skipping keys the transaction deleted.
func (it *localIter) settleBack() { it.settleDir(true) }

func (it *localIter) settleDir(back bool) {
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
func (it *localIter) Valid() bool { return it.valid }

// Key returns the current key (the caller's copy), or nil.
func (it *localIter) Key() []byte { return it.key }

// Value returns the current value (the caller's copy), or nil.
func (it *localIter) Value() []byte { return it.value }

// Err returns the first error the iterator met.
func (it *localIter) Err() error { return it.err }

// Close frees the iterator; it is idempotent.
func (it *localIter) Close() error {
	it.base.Close()
	return nil
}
