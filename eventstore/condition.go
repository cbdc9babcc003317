package eventstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/rockline/rockline/eventstore/revision"
	"github.com/rockline/rockline/pipeline"
)

// Condition is something an append requires of the store besides its own stream's
// expected revision, checked in the same transaction: it holds as the transaction
// reads the store, and the commit fails (and is retried, or reported) if it stops
// holding before the commit. Make one with StreamAt or NoneMatching; the zero
// Condition is invalid.
//
// A condition widens an append's consistency boundary beyond the stream it writes:
// "append Enrolled to student-7, if course-3 is still at revision 12 and
// username-ada still has no events" commits only while both hold, and writes nothing
// to course-3 or username-ada.
type Condition struct {
	stream   string
	expected ExpectedRevision
	query    *Query // NoneMatching's query, nil for StreamAt
	after    uint64 // NoneMatching's position
}

// StreamAt is the condition that stream's state meets expected (Any, NoStream,
// StreamExists or Revision(n)), whether or not the append writes to stream. A
// soft-deleted stream reads as no stream, as it does for Append; a tombstoned stream
// meets only Any.
func StreamAt(stream string, expected ExpectedRevision) Condition {
	return Condition{stream: stream, expected: expected}
}

// Stream returns the stream a StreamAt condition is on ("" for another or the zero
// Condition), so a layer that routes streams (package partitioned) can tell where it
// must be checked.
func (c Condition) Stream() string { return c.stream }

// Query returns a NoneMatching condition's query and position, and whether c is one.
func (c Condition) Query() (q Query, after uint64, ok bool) {
	if c.query == nil {
		return Query{}, 0, false
	}
	return *c.query, c.after, true
}

// String describes the condition, as a *ConditionFailedError names it.
func (c Condition) String() string {
	if c.query != nil {
		return fmt.Sprintf("no event matching %s after position %d", *c.query, c.after)
	}
	return fmt.Sprintf("stream %q at %s", c.stream, c.expected)
}

// ErrConditionFailed is matched by every *ConditionFailedError.
var ErrConditionFailed = errors.New("rockline: append condition failed")

// ConditionFailedError reports the first condition of an append that did not hold:
// its index among the conditions given, the condition, and why (Err: for StreamAt a
// *WrongExpectedVersionError carrying the stream's actual state, or a
// *StreamDeletedError; for NoneMatching a *QueryMatchedError naming an event that
// matched). The append wrote nothing. errors.Is matches
// ErrConditionFailed, and through Err, ErrWrongExpectedVersion or ErrStreamDeleted;
// errors.As to *ConditionFailedError tells a condition's failure from the append's
// own stream's.
type ConditionFailedError struct {
	Index     int
	Condition Condition
	Err       error
}

// Error names the condition and what was found instead.
func (e *ConditionFailedError) Error() string {
	var wrong *WrongExpectedVersionError
	if errors.As(e.Err, &wrong) {
		return fmt.Sprintf("rockline: condition %d (%s) failed: the stream is at %s", e.Index, e.Condition, wrong.Actual)
	}
	return fmt.Sprintf("rockline: condition %d (%s) failed: %v", e.Index, e.Condition, e.Err)
}

// Is reports whether target is ErrConditionFailed.
func (e *ConditionFailedError) Is(target error) bool { return target == ErrConditionFailed }

// Unwrap returns the reason.
func (e *ConditionFailedError) Unwrap() error { return e.Err }

// checkConditions validates every condition (an *pipeline.ArgumentError naming
// conds[i] for a bad one) before any is read.
func checkConditions(op string, conds []Condition) error {
	for i, c := range conds {
		arg := fmt.Sprintf("conditions[%d]", i)
		if c.query != nil {
			if err := c.query.check(op, arg+".query"); err != nil {
				return err
			}
			continue
		}
		if !c.expected.Valid() {
			return &pipeline.ArgumentError{Op: op, Arg: arg, Reason: "is not a condition: make one with StreamAt (with Any, NoStream, StreamExists or Revision(n)) or NoneMatching"}
		}
		if err := checkStream(op, c.stream); err != nil {
			var ae *pipeline.ArgumentError
			if errors.As(err, &ae) {
				return &pipeline.ArgumentError{Op: op, Arg: arg + ".stream", Reason: ae.Reason}
			}
			return err
		}
	}
	return nil
}

// Require checks conds within tx: each stream's head, and each query's tag marker,
// is read with tracking, so a commit that changes one before tx commits makes tx
// fail with pipeline.ErrConflict (Update and AppendIf retry, and the retry reports
// the condition). It returns the
// first condition that does not hold as a *ConditionFailedError, an
// *pipeline.ArgumentError for a malformed one (nothing read), or tx's read errors.
// Conditions are read as tx sees the store, its own appends included. Use it in a
// transaction that also calls AppendTxn (or writes other keys) to make the whole
// commit conditional; AppendIf does both.
func (s *Store) Require(tx *pipeline.Txn, conds ...Condition) error {
	const op = "Store.Require"
	if err := s.checkTxn(op, tx); err != nil {
		return err
	}
	if err := checkConditions(op, conds); err != nil {
		return err
	}
	return s.require(tx, conds)
}

func (s *Store) require(tx *pipeline.Txn, conds []Condition) error {
	for i, c := range conds {
		if c.query != nil {
			if err := s.requireNone(tx, c.query, c.after); err != nil {
				var matched *QueryMatchedError
				if errors.As(err, &matched) {
					return &ConditionFailedError{Index: i, Condition: c, Err: err}
				}
				return err
			}
			continue
		}
		if c.expected == Any {
			continue // holds for every stream: nothing to read, nothing to conflict on
		}
		cur, hasHead, st, err := s.head(tx, c.stream)
		if err != nil {
			return err
		}
		var why error
		if st.tombstoned {
			why = &StreamDeletedError{Stream: c.stream}
		} else {
			why = revision.Check(c.stream, c.expected, cur, hasHead && !st.deleted)
		}
		if why != nil {
			return &ConditionFailedError{Index: i, Condition: c, Err: why}
		}
	}
	return nil
}

// AppendIf appends events to stream, as Append does, if the stream meets expected
// and every condition holds, all checked in one transaction and committed only while
// they still hold: a commit that changes a condition's stream first makes this
// append retry, and the retry reports the failed condition as a
// *ConditionFailedError. A retried append whose events are already there (all with
// IDs, at the revisions expected) returns the original result whatever the
// conditions say now: they held when it committed. Errors: those of Append, a
// *ConditionFailedError, and an *pipeline.ArgumentError naming conditions[i] for a
// malformed condition (nothing is written).
func (s *Store) AppendIf(ctx context.Context, stream string, expected ExpectedRevision, conds []Condition, events ...Event) (AppendResult, error) {
	if err := checkConditions("Store.AppendIf", conds); err != nil {
		return AppendResult{}, err
	}
	return s.append(ctx, "Store.AppendIf", stream, expected, conds, events)
}
