package pipeline

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

// NewUntrackedPositionedValue is NewPositionedValue for keys no transaction reads
// with tracking: a layer's records read only with GetUntracked (the event store's
// event records). The local engine then leaves their writes out of conflict checks,
// which spares it a conflict-table entry per write; a tracked read of such a key
// would miss a conflict with them there (the JetStream engine, which needs no table,
// still reports it). Use NewPositionedValue for any key that is read with Get.
func NewUntrackedPositionedValue(name string, fn func(dst []byte, pos uint64, payload []byte) []byte) PositionedValue {
	return funcValue{name: name, fn: fn, untracked: true}
}

type funcValue struct {
	name      string
	fn        func(dst []byte, pos uint64, payload []byte) []byte
	untracked bool // NewUntrackedPositionedValue: no conflict mark
}

func (v funcValue) Name() string { return v.name }

func (v funcValue) Append(dst []byte, pos uint64, payload []byte) []byte {
	return v.fn(dst, pos, payload)
}
