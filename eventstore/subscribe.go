package eventstore

import (
	"context"
	"fmt"

	"github.com/rockline/rockline/pipeline"
)

// SubscribeOptions configure SubscribeToAll.
type SubscribeOptions struct {
	// Filter selects the events handed to the handler.
	Filter Filter
	// Checkpoint, when set, is called on the subscription's goroutine with a log
	// position every CheckpointEvery log entries scanned, matched or not, once every
	// event up to and including that position has been handled: a subscriber that
	// stores it and subscribes again after it after a restart neither misses a
	// matching event nor rescans what it skipped (KurrentDB's checkpoint reached). An
	// error from it ends the subscription with that error (Wait returns it), but the
	// entry at that position stays handled: the subscription's Position is that
	// position whether or not the checkpoint succeeded, so subscribing again after
	// Position hands none of its events out twice.
	Checkpoint func(position uint64) error
	// CheckpointEvery is the number of entries scanned between Checkpoint calls
	// (default 1024, at least 1).
	CheckpointEvery int
	// Options are the log subscription's (pipeline.OnLive, pipeline.WithLagBound).
	Options []pipeline.SubscribeOption
}

// DefaultCheckpointEvery is SubscribeOptions.CheckpointEvery's default.
const DefaultCheckpointEvery = 1024

// SubscribeToAll hands every published event after log position after that matches
// o.Filter to handler, in log order, each exactly once, on a goroutine the returned
// subscription owns: first catching up from the log, then live. It never slows a
// writer; a slow handler only falls behind, and reads the log to catch up. The
// subscription ends on ctx, Close, the database's Close, or an error from handler or
// o.Checkpoint, which Wait returns. The subscription's Position is the last log
// position whose matching events have all been handled, a Checkpoint error
// notwithstanding: subscribing again after it resumes exactly there (an entry whose
// handling failed part-way is delivered again whole).
func (s *Store) SubscribeToAll(ctx context.Context, after uint64, handler func(RecordedEvent) error, o SubscribeOptions) (*pipeline.Subscription, error) {
	if handler == nil {
		return nil, &pipeline.ArgumentError{Op: "SubscribeToAll", Arg: "handler", Reason: "must not be nil"}
	}
	every := o.CheckpointEvery
	switch {
	case every == 0:
		every = DefaultCheckpointEvery
	case every < 0:
		return nil, &pipeline.ArgumentError{Op: "SubscribeToAll", Arg: "CheckpointEvery", Reason: fmt.Sprintf("%d is negative", every)}
	}
	filter, scanned := o.Filter, 0
	return s.db.Subscribe(ctx, after, func(e pipeline.LogEntry) error {
		for i := range e.Events {
			if ev := &e.Events[i]; filter.Match(ev) {
				if err := handler(*ev); err != nil {
					return err
				}
			}
		}
		if scanned++; o.Checkpoint != nil && scanned%every == 0 {
			// The entry is handled whatever the checkpoint's fate: Position includes it.
			return pipeline.Handled(o.Checkpoint(e.Position))
		}
		return nil
	}, o.Options...)
}

// SubscribeToStream hands the events of stream from revision from on to handler, in
// order, each exactly once, catching up and then live as SubscribeToAll does (it is
// SubscribeToAll from the position of its first revision, filtered to the stream; the
// catch-up reads the log from there). Its catch-up agrees with ReadStream forward from
// from at the time of the call: revisions the stream's state hides then (a soft
// delete, TruncateBefore, MaxCount, MaxAge) are not handed out, so a subscription from
// a revision below the first visible one starts at the first visible revision still
// stored, whether Reclaim has deleted the hidden ones' records or not. Later revisions
// are handed out as they are published; a change of the stream's state after the call
// does not take back what the subscription handed out or will hand out (a soft delete
// and the append that recreates the stream are followed across). A stream with no
// visible revision from from on yet is followed from the current end of the log.
// Errors: as SubscribeToAll's, a *StreamDeletedError for a tombstoned stream (as
// reads), and an *pipeline.ArgumentError for a bad stream name.
func (s *Store) SubscribeToStream(ctx context.Context, stream string, from uint64, handler func(RecordedEvent) error, opts ...pipeline.SubscribeOption) (*pipeline.Subscription, error) {
	if err := checkStream("SubscribeToStream", stream); err != nil {
		return nil, err
	}
	if handler == nil {
		return nil, &pipeline.ArgumentError{Op: "SubscribeToStream", Arg: "handler", Reason: "must not be nil"}
	}
	after, first, err := s.streamStart(stream, from)
	if err != nil {
		return nil, err
	}
	return s.SubscribeToAll(ctx, after, func(e RecordedEvent) error {
		if e.Revision < first {
			return nil // hidden, or an earlier event of the same commit
		}
		return handler(e)
	}, SubscribeOptions{Filter: Filter{stream: stream}, Options: opts})
}

// streamStart returns where a subscription to stream from revision from starts: after,
// the log position just before the commit holding the first revision ReadStream would
// return from from, and first, that revision. When the stream has none yet, after is
// the snapshot's read position (its later revisions can only be in entries after it)
// and first the lowest revision from from on the stream's state leaves visible.
func (s *Store) streamStart(stream string, from uint64) (after, first uint64, err error) {
	err = s.db.View(func(tx *pipeline.Txn) error {
		after = tx.ReadPosition()
		low, head, ok, err := s.visible(tx, stream)
		if err != nil {
			return err
		}
		first = max(from, low)
		if !ok {
			return nil
		}
		refs, err := s.refsIn(tx, stream, low, head, from, 1, false)
		if err != nil || len(refs) == 0 {
			return err
		}
		after, first = refs[0].pos-1, refs[0].rev
		return nil
	})
	return after, first, err
}
