package eventstore

import (
	"context"
	"encoding/binary"
	"errors"

	"github.com/rockline/rockline/eventstore/revision"
	"github.com/rockline/rockline/pipeline"
)

// AppendResult is the outcome of an append: the revision of the stream's last event
// (pass it as Revision(n) to the next append) and the commit's log position.
type AppendResult struct {
	NextExpectedRevision uint64
	Position             uint64
}

// Append appends events to stream in a transaction of its own, retrying conflicts as
// pipeline.DB.Update does, except that the first retry runs at once, without backing
// off (a conflict with a concurrent append re-reads the head, so the loser gets a
// *WrongExpectedVersionError as soon as the winner has committed). A retried append
// whose events, all with IDs, are already the stream's events at the revisions
// expected returns the original result without writing, once the original's position
// is published: every position Append returns is published when it returns (readable
// with pipeline.DB.Entry, at or below LastPosition). Errors:
// *WrongExpectedVersionError, an *pipeline.ArgumentError for a bad stream name or
// event, the errors of pipeline.Txn.Commit, and those of pipeline.DB.WaitForPosition
// (ctx's among them) while a retry waits for the original's publication.
func (s *Store) Append(ctx context.Context, stream string, expected ExpectedRevision, events ...Event) (AppendResult, error) {
	return s.append(ctx, "Store.Append", stream, expected, nil, events)
}

// append is Append and AppendIf.
func (s *Store) append(ctx context.Context, op, stream string, expected ExpectedRevision, conds []Condition, events []Event) (AppendResult, error) {
	var res AppendResult
	var done bool
	fn := func(tx *pipeline.Txn) error {
		var err error
		res, done, err = s.appendTxn(op, tx, stream, expected, conds, events)
		return err
	}
	// The first attempt on its own: its conflict is almost always a concurrent append
	// that moved the head, and the attempt after it, which UpdatePosition runs at once
	// (it backs off only between its own attempts), re-reads the head and reports the
	// wrong expected version, without the backoff a conflict on a hot key deserves.
	tx := s.db.Begin()
	pos, err := uint64(0), fn(tx)
	if err == nil {
		pos, err = tx.CommitPosition(ctx)
	} else {
		tx.Discard()
	}
	if errors.Is(err, pipeline.ErrConflict) || errors.Is(err, pipeline.ErrTxnTooOld) {
		pos, err = s.db.UpdatePosition(ctx, fn)
	}
	if err != nil {
		return AppendResult{}, err
	}
	if !done {
		res.Position = pos // Commit returned: published
		return res, nil
	}
	// The original append's records are in the snapshot once it is written, which can
	// be before its position is published: wait for it, as a commit does, so the
	// position returned is readable (Entry, LastPosition) whichever way it was found.
	if err := s.db.WaitForPosition(ctx, res.Position); err != nil {
		return AppendResult{}, err
	}
	return res, nil
}

// AppendTxn appends events to stream within tx, if the stream's state meets expected;
// otherwise it returns a *WrongExpectedVersionError carrying the actual revision.
// Appends to several streams in one transaction, and the transaction's other writes,
// commit atomically. The stream's head is read with tracking, so a concurrent append
// makes the commit fail with pipeline.ErrConflict (Append retries and then reports the
// mismatch). Appending events whose IDs are already the stream's events at the
// revisions expected succeeds without writing them again. Stream names are 1..1024
// bytes of UTF-8 without NUL; at least one event is required. A soft-deleted stream
// (DeleteStream) reads as no stream, and an append recreates it with revisions
// continuing after the deleted ones; a tombstoned stream refuses every append with a
// *StreamDeletedError. Events with tags write their tags' markers too (see
// NoneMatching), and every event its entries in the store's indexes (see ReadIndex).
// On any error tx is left as it was.
func (s *Store) AppendTxn(tx *pipeline.Txn, stream string, expected ExpectedRevision, events ...Event) error {
	_, _, err := s.appendTxn("Store.AppendTxn", tx, stream, expected, nil, events)
	return err
}

// appendTxn is AppendTxn, with conditions checked (conds already validated) once the
// append is known not to be a retry; done reports an append found already made (res
// is then the original result, position included).
func (s *Store) appendTxn(op string, tx *pipeline.Txn, stream string, expected ExpectedRevision, conds []Condition, events []Event) (res AppendResult, done bool, err error) {
	if err := s.checkTxn(op, tx); err != nil {
		return AppendResult{}, false, err
	}
	if err := checkStream(op, stream); err != nil {
		return AppendResult{}, false, err
	}
	if !expected.Valid() {
		return AppendResult{}, false, &pipeline.ArgumentError{Op: op, Arg: "expected", Reason: "must be Any, NoStream, StreamExists or Revision(n)"}
	}
	if len(events) == 0 {
		return AppendResult{}, false, &pipeline.ArgumentError{Op: op, Arg: "events", Reason: "at least one event is required"}
	}
	if err := pipeline.CheckEvents(op, events); err != nil {
		return AppendResult{}, false, err
	}
	cur, hasHead, st, err := s.head(tx, stream)
	if err != nil {
		return AppendResult{}, false, err
	}
	if st.tombstoned {
		return AppendResult{}, false, &StreamDeletedError{Stream: stream}
	}
	exists := hasHead && !st.deleted // a soft-deleted stream reads as no stream
	if res, ok, err := s.alreadyAppended(tx, stream, expected, cur, exists, events); err != nil || ok {
		return res, ok, err
	}
	if err := revision.Check(stream, expected, cur, exists); err != nil {
		return AppendResult{}, false, err
	}
	if err := s.require(tx, conds); err != nil {
		return AppendResult{}, false, err
	}
	entries, err := s.indexEntries(op, stream, events)
	if err != nil {
		return AppendResult{}, false, err
	}
	first := uint64(0)
	if hasHead {
		first = cur + 1 // after a soft delete too: revisions continue
	}
	last := first + uint64(len(events)) - 1
	st.deleted, st.noEvents = false, false // an append recreates a deleted stream; its deleted events stay hidden
	if err := tx.Put(s.cf, headKey(stream), encodeHead(last, st)); err != nil {
		return AppendResult{}, false, err
	}
	idx := tx.EventCount()
	if err := tx.AddStreamEvents(stream, first, events...); err != nil {
		return AppendResult{}, false, err // only a done transaction fails here, before Put could succeed
	}
	if err := s.markTags(tx, events); err != nil {
		return AppendResult{}, false, err
	}
	var payload [binary.MaxVarintLen64 + pipeline.MaxEventIDLen]byte
	for i, e := range events {
		p := revision.AppendRecordPayload(payload[:0], idx+i, e.ID)
		if err := tx.PutAtCommit(s.cf, eventKey(stream, first+uint64(i)), p, eventCodec); err != nil {
			return AppendResult{}, false, err
		}
	}
	if err := entries.put(s, tx, idx); err != nil {
		return AppendResult{}, false, err
	}
	return AppendResult{NextExpectedRevision: last}, false, nil
}

// checkTxn checks that tx is a transaction of the store's database.
func (s *Store) checkTxn(op string, tx *pipeline.Txn) error {
	if tx == nil {
		return &pipeline.ArgumentError{Op: op, Arg: "tx", Reason: "must not be nil"}
	}
	if tx.DB() != s.db {
		return &pipeline.ArgumentError{Op: op, Arg: "tx", Reason: "belongs to another database than the store's", Err: pipeline.ErrForeignFamily}
	}
	return nil
}

// head returns the revision of the stream's last event as tx sees it (hasHead false
// when it has none) and the stream's state, tracking the read: an append, a delete and
// a metadata change of one stream all read and write its head, so they serialise.
func (s *Store) head(tx *pipeline.Txn, stream string) (rev uint64, hasHead bool, st streamState, err error) {
	v, err := tx.Get(s.cf, headKey(stream))
	if errors.Is(err, pipeline.ErrNotFound) {
		return 0, false, streamState{}, nil
	}
	if err != nil {
		return 0, false, streamState{}, err
	}
	rev, st, err = parseHead(stream, v)
	return rev, err == nil && !st.noEvents, st, err
}

// alreadyAppended reports whether events (all with IDs) are already the stream's events
// at the revisions the append expected: a retried append. It returns the original
// result.
func (s *Store) alreadyAppended(tx *pipeline.Txn, stream string, expected ExpectedRevision, cur uint64, exists bool, events []Event) (AppendResult, bool, error) {
	for _, e := range events {
		if e.ID == "" {
			return AppendResult{}, false, nil
		}
	}
	n := uint64(len(events))
	first, ok := revision.RetryFrom(expected, cur, exists, n)
	if !ok {
		return AppendResult{}, false, nil
	}
	var pos uint64
	for i := range events {
		v, err := tx.GetUntracked(s.cf, eventKey(stream, first+uint64(i)))
		if errors.Is(err, pipeline.ErrNotFound) {
			return AppendResult{}, false, nil
		}
		if err != nil {
			return AppendResult{}, false, err
		}
		p, _, id, err := parseEventValue(v)
		if err != nil {
			return AppendResult{}, false, err
		}
		if id != events[i].ID {
			return AppendResult{}, false, nil
		}
		pos = p
	}
	return AppendResult{NextExpectedRevision: first + n - 1, Position: pos}, true, nil
}
