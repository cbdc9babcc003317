package eventstore

import (
	"errors"
	"fmt"
)

// ExpectedRevision states what an append expects of its stream: Any, NoStream,
// StreamExists or an exact Revision(n) (the revision of the stream's last event;
// the first event of a stream has revision 0). The zero value is invalid.
type ExpectedRevision struct {
	kind expectKind
	rev  uint64
}

type expectKind uint8

const (
	expectInvalid expectKind = iota
	expectAny
	expectNoStream
	expectStreamExists
	expectExact
)

var (
	// Any accepts the stream in any state.
	Any = ExpectedRevision{kind: expectAny}
	// NoStream requires that the stream has no events yet.
	NoStream = ExpectedRevision{kind: expectNoStream}
	// StreamExists requires that the stream has at least one event.
	StreamExists = ExpectedRevision{kind: expectStreamExists}
)

// Revision requires that the stream's last event has revision n.
func Revision(n uint64) ExpectedRevision { return ExpectedRevision{kind: expectExact, rev: n} }

// String renders the expectation: "any", "no_stream", "stream_exists" or the number.
func (e ExpectedRevision) String() string {
	switch e.kind {
	case expectAny:
		return "any"
	case expectNoStream:
		return "no_stream"
	case expectStreamExists:
		return "stream_exists"
	case expectExact:
		return fmt.Sprint(e.rev)
	}
	return "invalid"
}

// Exact returns the revision of an exact expectation (Revision(n)) and true, or 0 and
// false for the other kinds.
func (e ExpectedRevision) Exact() (uint64, bool) { return e.rev, e.kind == expectExact }

func (e ExpectedRevision) valid() bool { return e.kind != expectInvalid }

// matches reports whether a stream whose last revision is cur (when exists) meets e.
func (e ExpectedRevision) matches(cur uint64, exists bool) bool {
	switch e.kind {
	case expectAny:
		return true
	case expectNoStream:
		return !exists
	case expectStreamExists:
		return exists
	case expectExact:
		return exists && cur == e.rev
	}
	return false
}

// actual describes a stream's state as an ExpectedRevision: NoStream or Revision(cur).
func actual(cur uint64, exists bool) ExpectedRevision {
	if !exists {
		return NoStream
	}
	return Revision(cur)
}

// ErrWrongExpectedVersion is matched by every *WrongExpectedVersionError.
var ErrWrongExpectedVersion = errors.New("rockline: wrong expected version")

// WrongExpectedVersionError reports an append whose expectation did not hold. Actual
// is NoStream or Revision(n) of the stream's last event at the time of the check.
type WrongExpectedVersionError struct {
	Stream   string
	Expected ExpectedRevision
	Actual   ExpectedRevision
}

// Error describes the problem, naming what was wrong.
func (e *WrongExpectedVersionError) Error() string {
	return fmt.Sprintf("rockline: append to stream %q: expected revision %s, actual %s", e.Stream, e.Expected, e.Actual)
}

// Is reports whether target is ErrWrongExpectedVersion.
func (e *WrongExpectedVersionError) Is(target error) bool { return target == ErrWrongExpectedVersion }
