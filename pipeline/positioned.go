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

// PutAtCommit buffers a put of key in cf whose value is made at commit by value, from
// payload and the commit's log position. The write is part of the commit as any Put
// is: in the same atomic batch, and in the log entry's writes (after the Puts and
// Deletes), so Replay and Rebuild reproduce it. Unlike a Put it is not checked for
// conflicts, and the transaction's own reads (Get, iterators) do not see it; a layer
// uses it for records whose key is owned by a write that is checked (the event store
// writes a stream's head with Put and the head's new events with PutAtCommit). A
// transaction with only PutAtCommit writes still gets a position. key and payload are
// copied; key and the value made must fit storage.MaxKeySize and storage.MaxValueSize
// (a value over the limit fails the commit with an *ArgumentError).
func (t *Txn) PutAtCommit(cf *ColumnFamily, key, payload []byte, value PositionedValue) error {
	const op = "Txn.PutAtCommit"
	if t.rt != nil {
		if err := t.usable(); err != nil {
			return err
		}
		return t.remotePutAtCommit(op, cf, key, payload, value)
	}
	f, err := t.writable(op, cf, key)
	if err != nil {
		return err
	}
	if value == nil {
		return &ArgumentError{Op: op, Arg: "value", Reason: "must not be nil"}
	}
	start := len(t.arena)
	t.arena = append(t.arena, key...)
	t.arena = append(t.arena, payload...)
	k := t.arena[start : start+len(key) : start+len(key)]
	p := t.arena[start+len(key) : len(t.arena) : len(t.arena)]
	t.positioned = append(t.positioned, positionedPut{family: f, key: k, payload: p, value: value})
	return nil
}

// EventCount returns the number of events the transaction carries so far: the index,
// within the commit's log entry, that the next event added will have.
func (t *Txn) EventCount() int {
	if t.rt != nil {
		return t.rt.events
	}
	return len(t.events)
}

// putPositioned adds the PutAtCommit write p, whose value is v, to b.
func (t *Txn) putPositioned(b *storage.Batch, p positionedPut, v []byte) error {
	if len(v) > storage.MaxValueSize {
		return &ArgumentError{Op: "Txn.PutAtCommit", Arg: "value", Reason: fmt.Sprintf("%d bytes exceeds the limit of %d", len(v), storage.MaxValueSize), Err: storage.ErrTooLarge}
	}
	if err := b.Put(p.family, p.key, v); err != nil {
		return t.mapBatchErr(p.family, err)
	}
	return nil
}
