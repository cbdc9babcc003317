// Package revision holds the rules of the event store that an engine implementing
// streams natively needs too, so that they exist once: what an append expects of its
// stream (Expected: Any, NoStream, StreamExists, Exact(n)), the check of it and the
// *WrongExpectedVersionError it fails with, where a retried append's events would be,
// and the encoding of the record that places a revision in the log (its positioned
// value, RecordName).
//
// Package eventstore re-exports the expectation and its error under their own names
// (eventstore.ExpectedRevision, eventstore.Any, eventstore.Revision(n),
// eventstore.WrongExpectedVersionError: the same types and values), so applications
// never import this package. It sits below pipeline and imports nothing of rockline,
// so an engine (the JetStream engine's Txn.Append) applies the event store's rules
// without importing the event store.
package revision

import (
	"errors"
	"fmt"
	"math"
)

// Expected states what an append expects of its stream: Any, NoStream, StreamExists
// or an exact Exact(n) (the revision of the stream's last event; the first event of a
// stream has revision 0). The zero value is invalid.
type Expected struct {
	kind kind
	rev  uint64
}

type kind uint8

const (
	kindInvalid kind = iota
	kindAny
	kindNoStream
	kindStreamExists
	kindExact
)

var (
	// Any accepts the stream in any state.
	Any = Expected{kind: kindAny}
	// NoStream requires that the stream has no events yet.
	NoStream = Expected{kind: kindNoStream}
	// StreamExists requires that the stream has at least one event.
	StreamExists = Expected{kind: kindStreamExists}
)

// Exact requires that the stream's last event has revision n.
func Exact(n uint64) Expected { return Expected{kind: kindExact, rev: n} }

// String renders the expectation: "any", "no_stream", "stream_exists" or the number.
func (e Expected) String() string {
	switch e.kind {
	case kindAny:
		return "any"
	case kindNoStream:
		return "no_stream"
	case kindStreamExists:
		return "stream_exists"
	case kindExact:
		return fmt.Sprint(e.rev)
	}
	return "invalid"
}

// Exact returns the revision of an exact expectation (Exact(n)) and true, or 0 and
// false for the other kinds.
func (e Expected) Exact() (uint64, bool) { return e.rev, e.kind == kindExact }

// Valid reports whether e is one of Any, NoStream, StreamExists or Exact(n) (not the
// zero value).
func (e Expected) Valid() bool { return e.kind != kindInvalid }

// Holds reports whether a stream whose last revision is last (when exists) meets e.
// An invalid e holds for no stream.
func (e Expected) Holds(last uint64, exists bool) bool {
	switch e.kind {
	case kindAny:
		return true
	case kindNoStream:
		return !exists
	case kindStreamExists:
		return exists
	case kindExact:
		return exists && last == e.rev
	}
	return false
}

// Actual describes a stream's state as an expectation: NoStream, or Exact(last) when
// it exists. It is what a *WrongExpectedVersionError reports.
func Actual(last uint64, exists bool) Expected {
	if !exists {
		return NoStream
	}
	return Exact(last)
}

// Check returns nil when the stream, whose last revision is last (when exists), meets
// expected, and otherwise the *WrongExpectedVersionError naming its actual state.
func Check(stream string, expected Expected, last uint64, exists bool) error {
	if expected.Holds(last, exists) {
		return nil
	}
	return &WrongExpectedVersionError{Stream: stream, Expected: expected, Actual: Actual(last, exists)}
}

// RetryFrom returns the revision at which n events appended with expected would have
// begun, if that append was already made and this is its retry (an acknowledgement
// lost, the append sent again), and whether such a place exists in a stream whose last
// revision is last (when exists): for NoStream, 0; for Exact(r), r+1; for Any and
// StreamExists, the stream's last n revisions. ok is false when the stream does not
// reach that far. Whether it is a retry is for the caller to tell, by the events' IDs
// at those revisions.
func RetryFrom(expected Expected, last uint64, exists bool, n uint64) (first uint64, ok bool) {
	if !exists || n == 0 {
		return 0, false
	}
	switch expected.kind {
	case kindNoStream:
		first = 0
	case kindExact:
		if expected.rev == math.MaxUint64 {
			return 0, false
		}
		first = expected.rev + 1
	case kindAny, kindStreamExists:
		if last+1 < n {
			return 0, false
		}
		first = last + 1 - n
	default:
		return 0, false
	}
	if n-1 > last-first || first > last { // beyond the stream
		return 0, false
	}
	return first, true
}

// ErrWrongExpectedVersion is matched by every *WrongExpectedVersionError.
var ErrWrongExpectedVersion = errors.New("rockline: wrong expected version")

// WrongExpectedVersionError reports an append whose expectation did not hold. Actual
// is NoStream or Exact(n) of the stream's last event at the time of the check.
type WrongExpectedVersionError struct {
	Stream   string
	Expected Expected
	Actual   Expected
}

// Error describes the problem, naming what was wrong.
func (e *WrongExpectedVersionError) Error() string {
	return fmt.Sprintf("rockline: append to stream %q: expected revision %s, actual %s", e.Stream, e.Expected, e.Actual)
}

// Is reports whether target is ErrWrongExpectedVersion.
func (e *WrongExpectedVersionError) Is(target error) bool { return target == ErrWrongExpectedVersion }
