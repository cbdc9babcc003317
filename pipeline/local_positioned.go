package pipeline

import (
	"fmt"

	"github.com/rockline/rockline/storage"
)

// The hook through which a layer built on the core (the event store in package
// eventstore) writes records that point at their own commit: a stream index entry
// "revision r of stream s is event i of log position p" can only be written once p is
// known, and p is assigned by the writer queue after validation. The core knows
// nothing of what such a record means or how its key is laid out; it only fills in
// the position and writes the record with the commit, in its batch and in its log
// entry.

// PositionedValue makes the value of a PutAtCommit write once the commit's log
// position is known: it appends the value for position pos to dst and returns it.
// payload is the payload given to PutAtCommit. It runs once per commit attempt that
// passed validation, on the goroutine that writes the commit's group, and must not
// block, fail or call into the database; it must depend on nothing but its arguments
// (a replay re-applies the value written, it does not call the function again).
type PositionedValue func(dst []byte, pos uint64, payload []byte) []byte

// positionedPut is one PutAtCommit write: key and payload live in the arena.
type positionedPut struct {
	family       *storage.Family
	key, payload []byte
	value        PositionedValue
}

// PutAtCommit is EngineTxn.PutAtCommit: key and payload copied into the arena, the
// value made at commit (encodeEntry).
func (t *localTxn) PutAtCommit(ef EngineFamily, key, payload []byte, value PositionedValue) error {
	f := storageFamily(ef)
	if err := t.writable(f); err != nil {
		return err
	}
	start := len(t.arena)
	t.arena = append(t.arena, key...)
	t.arena = append(t.arena, payload...)
	k := t.arena[start : start+len(key) : start+len(key)]
	p := t.arena[start+len(key) : len(t.arena) : len(t.arena)]
	t.positioned = append(t.positioned, positionedPut{family: f, key: k, payload: p, value: value})
	return nil
}

// putPositioned adds the PutAtCommit write p, whose value is v, to b.
func (t *localTxn) putPositioned(b *storage.Batch, p positionedPut, v []byte) error {
	if len(v) > storage.MaxValueSize {
		return &ArgumentError{Op: "Txn.PutAtCommit", Arg: "value", Reason: fmt.Sprintf("%d bytes exceeds the limit of %d", len(v), storage.MaxValueSize), Err: storage.ErrTooLarge}
	}
	if err := b.Put(p.family, p.key, v); err != nil {
		return t.mapBatchErr(p.family, err)
	}
	return nil
}
