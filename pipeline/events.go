package pipeline

import (
	"fmt"
	"time"
	"unicode/utf8"
)

// Event is one application event recorded in a commit's log entry. Type must be 1..256
// bytes of valid UTF-8; ID (optional, at most 256 bytes) identifies the event for
// idempotent appends; Data and Metadata are opaque, may be nil, and are copied.
type Event struct {
	ID       string
	Type     string
	Data     []byte
	Metadata []byte
}

// RecordedEvent is an event as the log holds it, the one form every reader hands out
// (the log readers, subscriptions, the event store's stream reads): the stream it was
// appended to and its revision there (an empty Stream and revision 0 for an event
// added with AddEvents), the log position of its commit, its index among the commit's
// events, and the commit's time.
type RecordedEvent struct {
	Stream   string
	Revision uint64
	Position uint64
	Index    int
	Time     time.Time
	Event
}

// txnEvent is an event a transaction carries, with its stream (AddStreamEvents).
type txnEvent struct {
	Event
	stream string
	rev    uint64
}

// Limits on events.
const (
	MaxEventTypeLen = 256
	MaxEventIDLen   = 256
	MaxEventDataLen = 64 << 20
)

// CheckEvents returns the *ArgumentError AddEvents would return for events, naming op
// as the operation, or nil. A layer that writes more than the events (the event store
// writes a stream head) calls it first, so a bad event leaves the transaction
// unchanged.
func CheckEvents(op string, events []Event) error {
	for i, e := range events {
		if err := checkEvent(op, i, e); err != nil {
			return err
		}
	}
	return nil
}

func checkEvent(op string, i int, e Event) error {
	arg := fmt.Sprintf("events[%d]", i)
	switch {
	case e.Type == "":
		return &ArgumentError{Op: op, Arg: arg + ".Type", Reason: "must not be empty"}
	case len(e.Type) > MaxEventTypeLen:
		return &ArgumentError{Op: op, Arg: arg + ".Type", Reason: fmt.Sprintf("%d bytes exceeds %d", len(e.Type), MaxEventTypeLen)}
	case !utf8.ValidString(e.Type):
		return &ArgumentError{Op: op, Arg: arg + ".Type", Reason: "must be valid UTF-8"}
	case len(e.ID) > MaxEventIDLen:
		return &ArgumentError{Op: op, Arg: arg + ".ID", Reason: fmt.Sprintf("%d bytes exceeds %d", len(e.ID), MaxEventIDLen)}
	case !utf8.ValidString(e.ID):
		return &ArgumentError{Op: op, Arg: arg + ".ID", Reason: "must be valid UTF-8"}
	case len(e.Data)+len(e.Metadata) > MaxEventDataLen:
		return &ArgumentError{Op: op, Arg: arg + ".Data", Reason: fmt.Sprintf("data and metadata of %d bytes exceed %d", len(e.Data)+len(e.Metadata), MaxEventDataLen)}
	}
	return nil
}

// AddEvents attaches events to the transaction's log entry. They are recorded at the
// commit's log position, in order, and delivered to subscribers; a transaction with
// events but no writes still gets a position. Every event is checked first; on an
// *ArgumentError none is added.
func (t *Txn) AddEvents(events ...Event) error {
	if err := t.usable(); err != nil {
		return err
	}
	if err := t.db.writable(); err != nil {
		return err
	}
	if err := CheckEvents("Txn.AddEvents", events); err != nil {
		return err
	}
	if t.rt != nil {
		return t.remoteEvents("", 0, events)
	}
	t.addEvents(events)
	return nil
}

// AddStreamEvents attaches events to the transaction's log entry, as AddEvents does,
// recorded as the events of stream at revisions first, first+1, and so on: every
// reader then hands them out with that stream and revision. It is the hook of a layer
// that keeps streams (package eventstore): the core records the names and revisions
// it is given and checks neither against anything. stream must not be empty; every
// event is checked first, and on an *ArgumentError none is added.
func (t *Txn) AddStreamEvents(stream string, first uint64, events ...Event) error {
	const op = "Txn.AddStreamEvents"
	if err := t.usable(); err != nil {
		return err
	}
	if err := t.db.writable(); err != nil {
		return err
	}
	if stream == "" {
		return &ArgumentError{Op: op, Arg: "stream", Reason: "must not be empty"}
	}
	if err := CheckEvents(op, events); err != nil {
		return err
	}
	if t.rt != nil {
		return t.remoteEvents(stream, first, events)
	}
	t.addStreamEvents(stream, first, events)
	return nil
}

// addEvents copies checked events into the transaction.
func (t *Txn) addEvents(events []Event) { t.addStreamEvents("", 0, events) }

// addStreamEvents copies checked events into the transaction, as stream's from
// revision first on (no stream when stream is empty).
func (t *Txn) addStreamEvents(stream string, first uint64, events []Event) {
	for i, e := range events {
		e.Data = t.copyBytes(e.Data)
		e.Metadata = t.copyBytes(e.Metadata)
		te := txnEvent{Event: e}
		if stream != "" {
			te.stream, te.rev = stream, first+uint64(i)
		}
		t.events = append(t.events, te)
		if stream != "" {
			t.streamEvents++
		}
	}
}

// copyBytes copies p into the transaction's arena (nil stays nil).
func (t *Txn) copyBytes(p []byte) []byte {
	if p == nil {
		return nil
	}
	start := len(t.arena)
	t.arena = append(t.arena, p...)
	return t.arena[start:len(t.arena):len(t.arena)]
}
