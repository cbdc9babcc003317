package eventstore

import "github.com/rockline/rockline/eventstore/revision"

// The expectations and their error are package revision's, which holds the stream
// rules an engine applies too (the JetStream engine's native appends); the names here
// are the same types and values.

// ExpectedRevision states what an append expects of its stream: Any, NoStream,
// StreamExists or an exact Revision(n) (the revision of the stream's last event;
// the first event of a stream has revision 0). The zero value is invalid.
type ExpectedRevision = revision.Expected

var (
	// Any accepts the stream in any state.
	Any = revision.Any
	// NoStream requires that the stream has no events yet.
	NoStream = revision.NoStream
	// StreamExists requires that the stream has at least one event.
	StreamExists = revision.StreamExists
)

// Revision requires that the stream's last event has revision n.
func Revision(n uint64) ExpectedRevision { return revision.Exact(n) }

// ErrWrongExpectedVersion is matched by every *WrongExpectedVersionError.
var ErrWrongExpectedVersion = revision.ErrWrongExpectedVersion

// WrongExpectedVersionError reports an append whose expectation did not hold. Actual
// is NoStream or Revision(n) of the stream's last event at the time of the check.
type WrongExpectedVersionError = revision.WrongExpectedVersionError
