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

// PositionedValue is a named codec that makes the value of a PutAtCommit write once
// the commit's log position is known.
//
// Append appends to dst the value for the commit position pos and payload (the payload
// given to PutAtCommit), and returns it. It must depend on nothing but its arguments,
// and must not block, fail or call into the database: the local engine calls it once
// per commit attempt that passed validation, on the goroutine that writes the commit's
// group, and stores the result (a replay re-applies the value written, it does not call
// Append again); an engine that stores the payload instead calls it on every read.
//
// Name identifies the codec, and is stable: an engine may store it with the write and
// look the codec up by it when the write is read back, possibly by another process or
// a later version of the program (the JetStream engine stores it, and every client of
// a partition configures the same codecs under the same names). A name is 1..32 of
// A-Z a-z 0-9 _ . - and, once written, never denotes another encoding; a layer
// prefixes its codecs' names with its own ("rockline.event" is the event store's).
// The local engine does not store names.
//
// NewPositionedValue makes one from a name and a function.
type PositionedValue interface {
	Name() string
	Append(dst []byte, pos uint64, payload []byte) []byte
}

// NewPositionedValue returns the PositionedValue named name whose Append is fn.
func NewPositionedValue(name string, fn func(dst []byte, pos uint64, payload []byte) []byte) PositionedValue {
	return funcValue{name: name, fn: fn}
}

type funcValue struct {
	name string
	fn   func(dst []byte, pos uint64, payload []byte) []byte
}

func (v funcValue) Name() string { return v.name }

func (v funcValue) Append(dst []byte, pos uint64, payload []byte) []byte {
	return v.fn(dst, pos, payload)
}

// positionedPut is one PutAtCommit write: key and payload live in the arena; value is
// the codec's Append.
type positionedPut struct {
	family       *storage.Family
	key, payload []byte
	value        func(dst []byte, pos uint64, payload []byte) []byte
}

// PutAtCommit buffers a put of key in cf whose value is made at commit by value, from
// payload and the commit's log position. The write is part of the commit as any Put
// is: in the same atomic batch, and in the log entry's writes (after the Puts and
// Deletes), so Replay and Rebuild reproduce it. Unlike a Put it is not checked for
// conflicts, and the transaction's own reads (Get, iterators) do not see it; a layer
// uses it for records whose key is owned by a write that is checked (the event store
// writes a stream's head with Put and the head's new events with PutAtCommit). A
// transaction with only PutAtCommit writes still gets a position. key and payload are
// copied; key and the value made must fit MaxKeySize and MaxValueSize (a value over
// the limit fails the commit with an *ArgumentError).
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
	// A NewPositionedValue's function is stored as is; another codec's Append as a
	// method value (one small allocation).
	var appendValue func(dst []byte, pos uint64, payload []byte) []byte
	if fv, ok := value.(funcValue); ok {
		if fv.fn == nil {
			return &ArgumentError{Op: op, Arg: "value", Reason: "has a nil function"}
		}
		appendValue = fv.fn
	} else {
		appendValue = value.Append
	}
	start := len(t.arena)
	t.arena = append(t.arena, key...)
	t.arena = append(t.arena, payload...)
	k := t.arena[start : start+len(key) : start+len(key)]
	p := t.arena[start+len(key) : len(t.arena) : len(t.arena)]
	t.positioned = append(t.positioned, positionedPut{family: f, key: k, payload: p, value: appendValue})
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
