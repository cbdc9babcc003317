package jetstream

import (
	"errors"
	"fmt"

	"github.com/rockline/rockline/pipeline"
)

// Errors returned by this package, to match with errors.Is. The error returned usually
// wraps one of them with more context (a *ConflictError, a *LimitError, ...).
var (
	// ErrConflict is pipeline.ErrConflict: a key or stream the commit read or wrote
	// changed after the version the commit expected. Nothing was written; re-read and
	// retry. Every *ConflictError matches it.
	ErrConflict = pipeline.ErrConflict
	// ErrClosed is pipeline.ErrClosed: the Partition was closed.
	ErrClosed = pipeline.ErrClosed
	// ErrInvalidArgument is pipeline.ErrInvalidArgument: matched by every
	// *ArgumentError and every *LimitError.
	ErrInvalidArgument = pipeline.ErrInvalidArgument
	// ErrInvalidConfig is pipeline.ErrInvalidConfig: matched by every *ConfigError.
	ErrInvalidConfig = pipeline.ErrInvalidConfig
	// ErrLimit is matched by every *LimitError: the commit or read does not fit one of
	// JetStream's limits (messages per batch, subject length, max_payload, results of
	// one multi-get). Nothing was written.
	ErrLimit = errors.New("rockline/jetstream: limit exceeded")
	// ErrTimeout: a commit's publish timed out and the engine then proved, by landing an
	// abort marker with the commit's message ID, that the commit was not written and
	// never will be; or the stream had no leader to take the commit ("no responders")
	// for Config.PublishTimeout, so nothing of it was stored. Retrying is safe.
	ErrTimeout = errors.New("rockline/jetstream: commit timed out and was not written")
	// ErrOutcomeUnknown: a commit's publish timed out, or its connection failed once
	// the commit message may have gone out, and its outcome could not be resolved
	// before Config.ResolveTimeout (no reachable leader, or the connection closed).
	// The commit may or may not be written; read its keys before retrying.
	ErrOutcomeUnknown = errors.New("rockline/jetstream: commit outcome unknown")
	// ErrNotSent: a commit failed before its commit message went out (a read it
	// needs first failed, or a publish of an earlier message of its batch failed; the
	// wrapped error says which): the server cannot complete the batch, nothing was
	// written. Retrying is safe.
	ErrNotSent = errors.New("rockline/jetstream: commit not sent")
	// ErrRefused: the server refused the commit for a reason other than a conflict or
	// a timeout (a limit of the stream, a sealed or deleted stream; the wrapped
	// *ServerError names it), and the engine settled the refusal: nothing was written
	// and nothing of it will be. Retrying is safe but meets the same refusal until
	// the cause is mended.
	ErrRefused = errors.New("rockline/jetstream: commit refused by the server")
	// ErrDuplicateEvent is matched by *DuplicateEventError: an event ID of the commit is
	// already stored within the dedupe window, but not all of the commit's event IDs
	// belong to one stored commit, so the commit is not a retry of that one.
	ErrDuplicateEvent = errors.New("rockline/jetstream: duplicate event id")
	// ErrTruncated is matched by *TruncatedError: the position asked for is below the
	// partition's truncation point, so its log entries (and snapshot) are gone.
	ErrTruncated = errors.New("rockline/jetstream: position truncated")
	// ErrPositionUnavailable: a snapshot read at a position that the replica answering
	// has not applied yet, and did not apply before the read's deadline (or the position
	// is not a commit position of this partition).
	ErrPositionUnavailable = errors.New("rockline/jetstream: position not available")
)

// ArgumentError is pipeline.ArgumentError: it names the call and the argument
// ("Commit", "writes[2].Family") and matches ErrInvalidArgument.
type ArgumentError = pipeline.ArgumentError

// ConfigError is pipeline.ConfigError: it names the Config field, the value given and
// what is accepted, and matches ErrInvalidConfig.
type ConfigError = pipeline.ConfigError

// ConflictError reports the first expectation found broken: Subject is the JetStream
// subject, Family and Key name the key (Kind "write" or "read"), or Stream names the
// stream (Kind "stream"), or Family names a family whose catalog record changed (Kind
// "family": dropped or re-created since the commit's position). Expected is the version the commit carried and Actual the
// version found when the engine re-read it (0 when the re-read found the same version,
// which happens when a concurrent commit held the subject and then failed). It matches
// ErrConflict.
type ConflictError struct {
	Kind     string
	Family   string
	Key      []byte
	Stream   string
	Subject  string
	Expected uint64
	Actual   uint64
	Err      error // the server's answer, or nil
}

// Error names the key or stream and both versions.
func (e *ConflictError) Error() string {
	what := fmt.Sprintf("key %q in family %q", e.Key, e.Family)
	switch e.Kind {
	case "stream":
		what = fmt.Sprintf("stream %q", e.Stream)
	case "family":
		what = fmt.Sprintf("the catalog record of family %q", e.Family)
	}
	s := fmt.Sprintf("rockline/jetstream: conflict on %s (%s): expected version %d, found %d", what, e.Kind, e.Expected, e.Actual)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Is reports whether target is ErrConflict.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// Unwrap returns the server's answer.
func (e *ConflictError) Unwrap() error { return e.Err }

// LimitError names the limit a commit or read exceeded: Limit is its name
// ("messages per commit", "encoded subject length", "max_payload", "multi-get
// results", "multi-get bytes"), Field the part of the input that exceeded it
// ("writes[3].Key", "events[0].Data", "commit"), Got the size found and Max the limit.
// It matches ErrLimit and ErrInvalidArgument.
type LimitError struct {
	Op    string
	Field string
	Limit string
	Got   int
	Max   int
}

// Error names the field, the limit and both sizes.
func (e *LimitError) Error() string {
	return fmt.Sprintf("rockline/jetstream: %s: %s exceeds %s: %d > %d", e.Op, e.Field, e.Limit, e.Got, e.Max)
}

// Is reports whether target is ErrLimit or ErrInvalidArgument.
func (e *LimitError) Is(target error) bool { return target == ErrLimit || target == ErrInvalidArgument }

// DuplicateEventError reports an event ID that is already stored, at the commit
// Position, while the commit being refused carried other event IDs that are not part
// of that commit. It matches ErrDuplicateEvent.
type DuplicateEventError struct {
	ID       string
	Position uint64
}

// Error names the event ID and where it is stored.
func (e *DuplicateEventError) Error() string {
	return fmt.Sprintf("rockline/jetstream: event id %q is already stored in the commit at position %d", e.ID, e.Position)
}

// Is reports whether target is ErrDuplicateEvent.
func (e *DuplicateEventError) Is(target error) bool { return target == ErrDuplicateEvent }

// TruncatedError reports a position below the first one kept (First). It matches
// ErrTruncated.
type TruncatedError struct {
	Position uint64
	First    uint64
}

// Error names the position and the first one kept.
func (e *TruncatedError) Error() string {
	return fmt.Sprintf("rockline/jetstream: position %d is truncated (the log starts after %d)", e.Position, e.First-1)
}

// Is reports whether target is ErrTruncated or pipeline.ErrLogTruncated.
func (e *TruncatedError) Is(target error) bool {
	return target == ErrTruncated || target == pipeline.ErrLogTruncated
}

// ServerError is a JetStream API error the engine has no more specific error for:
// Code is the HTTP-like status, ErrCode JetStream's error code (10071 "wrong last
// sequence", 10164 "subject in flight", ...).
type ServerError struct {
	Op          string
	Code        int
	ErrCode     int
	Description string
}

// Error names the operation and the server's code and description.
func (e *ServerError) Error() string {
	return fmt.Sprintf("rockline/jetstream: %s: server error %d/%d: %s", e.Op, e.Code, e.ErrCode, e.Description)
}

// JetStream error codes the engine acts on (nats-server/server/errors.json).
const (
	codeWrongLastSeq      = 10071 // an expectation failed: a conflict
	codeSubjectInFlight   = 10164 // a second expectation in flight on a subject
	codeDuplicateMsgID    = 10201 // a batch carries a message ID already stored
	codeDuplicateInFlight = 10158 // a message ID is being proposed right now
	codeIncompleteBatch   = 10176 // the server lost the batch (leader change, inflight limit)
	codeTooManyInflight   = 10210 // too many open batches
	codeNoMessage         = 10037
)
