package eventstore

import (
	"context"
	"errors"
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
// SubscribeToAll from the position of revision from, filtered to the stream; the
// catch-up reads the log from there). A stream that has no revision from yet is
// followed from the current end of the log. Errors: as SubscribeToAll's, and an
// *pipeline.ArgumentError for a bad stream name.
func (s *Store) SubscribeToStream(ctx context.Context, stream string, from uint64, handler func(RecordedEvent) error, opts ...pipeline.SubscribeOption) (*pipeline.Subscription, error) {
	if err := checkStream("SubscribeToStream", stream); err != nil {
		return nil, err
	}
	if handler == nil {
		return nil, &pipeline.ArgumentError{Op: "SubscribeToStream", Arg: "handler", Reason: "must not be nil"}
	}
	after, err := s.positionBefore(stream, from)
	if err != nil {
		return nil, err
	}
	return s.SubscribeToAll(ctx, after, func(e RecordedEvent) error {
		if e.Revision < from {
			return nil // an earlier event of the same commit
		}
		return handler(e)
	}, SubscribeOptions{Filter: Filter{stream: stream}, Options: opts})
}

// positionBefore returns the log position just before the commit that holds revision
// rev of stream, or the published position when the stream has no such revision yet
// (its later events can only be in entries after it).
func (s *Store) positionBefore(stream string, rev uint64) (uint64, error) {
	var after uint64
	err := s.db.View(func(tx *pipeline.Txn) error {
		after = tx.ReadPosition()
		v, err := tx.GetUntracked(s.cf, eventKey(stream, rev))
		if errors.Is(err, pipeline.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		pos, _, _, err := parseEventValue(v)
		after = pos - 1
		return err
	})
	return after, err
}
