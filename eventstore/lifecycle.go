package eventstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/rockline/rockline/eventstore/revision"
	"github.com/rockline/rockline/pipeline"
)

// ErrStreamDeleted is matched by every *StreamDeletedError.
var ErrStreamDeleted = errors.New("rockline: stream deleted")

// StreamDeletedError reports a call on a tombstoned stream (TombstoneStream): it can
// never be appended to or read again.
type StreamDeletedError struct{ Stream string }

// Error names the stream.
func (e *StreamDeletedError) Error() string {
	return fmt.Sprintf("rockline: stream %q is tombstoned", e.Stream)
}

// Is reports whether target is ErrStreamDeleted.
func (e *StreamDeletedError) Is(target error) bool { return target == ErrStreamDeleted }

// DeleteStream soft-deletes stream if its state meets expected: it then reads as
// absent (ReadStream returns no events, NoStream matches it), and the next append
// recreates it with revisions continuing after the deleted ones, which stay hidden
// (KurrentDB's soft delete). Deleting a stream that has no events, or is deleted
// already, changes nothing. It is an ordinary commit, returned as its log position (0
// when nothing changed), so Replay and Rebuild reproduce it. Errors:
// *WrongExpectedVersionError, *StreamDeletedError for a tombstoned stream, and the
// errors of pipeline.DB.Update.
func (s *Store) DeleteStream(ctx context.Context, stream string, expected ExpectedRevision) (uint64, error) {
	return s.changeState(ctx, "DeleteStream", stream, &expected, func(st *streamState, head uint64, hasHead bool) bool {
		if !hasHead || st.deleted {
			return false
		}
		st.deleted, st.deletedBefore = true, head+1
		return true
	})
}

// TombstoneStream deletes stream for good, if its state meets expected: every later
// append and read fails with a *StreamDeletedError, and so does a second tombstone. A
// stream with no events can be tombstoned too, so its name is never used. Like
// DeleteStream it is an ordinary commit and returns its position.
func (s *Store) TombstoneStream(ctx context.Context, stream string, expected ExpectedRevision) (uint64, error) {
	return s.changeState(ctx, "TombstoneStream", stream, &expected, func(st *streamState, _ uint64, _ bool) bool {
		st.tombstoned = true
		return true
	})
}

// SetStreamMetadata sets the bounds readers of stream see (see StreamMetadata),
// replacing earlier ones; a soft delete's hidden revisions stay hidden whatever it
// says. It is an ordinary commit and returns its position.
// Errors: *StreamDeletedError for a tombstoned stream, the errors of
// pipeline.DB.Update.
func (s *Store) SetStreamMetadata(ctx context.Context, stream string, md StreamMetadata) (uint64, error) {
	if md.MaxAge < 0 {
		return 0, &pipeline.ArgumentError{Op: "SetStreamMetadata", Arg: "MaxAge", Reason: fmt.Sprintf("%v is negative", md.MaxAge)}
	}
	return s.changeState(ctx, "SetStreamMetadata", stream, nil, func(st *streamState, _ uint64, _ bool) bool {
		st.StreamMetadata = md
		return true
	})
}

// GetStreamMetadata returns stream's metadata (the zero value when none was set).
// Errors: *StreamDeletedError for a tombstoned stream.
func (s *Store) GetStreamMetadata(ctx context.Context, stream string) (StreamMetadata, error) {
	if err := checkStream("GetStreamMetadata", stream); err != nil {
		return StreamMetadata{}, err
	}
	var st streamState
	err := s.db.View(func(tx *pipeline.Txn) error {
		var err error
		_, _, st, err = s.head(tx, stream)
		return err
	})
	if err == nil && st.tombstoned {
		err = &StreamDeletedError{Stream: stream}
	}
	return st.StreamMetadata, err
}

// changeState runs one change of a stream's state record in a transaction of its own:
// change edits st (the head as the transaction sees it given) and reports whether
// anything changed.
func (s *Store) changeState(ctx context.Context, op, stream string, expected *ExpectedRevision, change func(st *streamState, head uint64, hasHead bool) bool) (uint64, error) {
	if err := checkStream(op, stream); err != nil {
		return 0, err
	}
	if expected != nil && !expected.Valid() {
		return 0, &pipeline.ArgumentError{Op: op, Arg: "expected", Reason: "must be Any, NoStream, StreamExists or Revision(n)"}
	}
	return s.db.UpdatePosition(ctx, func(tx *pipeline.Txn) error {
		head, hasHead, st, err := s.head(tx, stream)
		if err != nil {
			return err
		}
		if st.tombstoned {
			return &StreamDeletedError{Stream: stream}
		}
		if expected != nil {
			if err := revision.Check(stream, *expected, head, hasHead && !st.deleted); err != nil {
				return err
			}
		}
		if !change(&st, head, hasHead) {
			return nil
		}
		st.noEvents = !hasHead && !st.deleted
		if err := tx.Put(s.cf, headKey(stream), encodeHead(head, st)); err != nil {
			return err
		}
		return tx.Put(s.cf, stateKey(stream), nil)
	})
}
