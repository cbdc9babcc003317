package jetstream

import (
	"bytes"
	"context"
	"fmt"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/pipeline"
)

// Txn is an optimistic transaction on a Partition with the local engine's rules: it
// reads the partition as of the position it began at (every read tracked), buffers its
// writes and appends, and Commit sends them as one Commit whose checks fail it if any
// key it read or wrote, or any stream it appended to, changed after that position.
// A Txn is not safe for concurrent use, and is done after Commit or Discard.
//
// Invariants:
//   - reads holds the version, as of at, of every key read; a written key's
//     expectation is that version (read now if the key was written without a read),
//     so blind writes conflict as on the local engine.
//   - streams holds, per stream appended to, the version and revision as of at and
//     the revisions assigned so far, so several appends to one stream in one Txn
//     continue each other.
type Txn struct {
	p       *Partition
	at      uint64
	reads   map[string]Read  // by key subject
	writes  map[string]Write // by key subject: the last write of each key
	order   []string         // key subjects in first-write order
	streams map[string]*txnStream
	events  []Event
	already uint64 // the position of appends found already made (see Append)
	done    bool
}

type txnStream struct {
	version uint64 // the stream's version as of at (0: no events)
	next    uint64 // the revision the next event gets
}

// ErrTxnDone is returned by a Txn's methods after Commit or Discard.
var ErrTxnDone = pipeline.ErrTxnDone

// Begin starts a transaction at the partition's latest position.
func (p *Partition) Begin(ctx context.Context) (*Txn, error) {
	at, err := p.Position(ctx)
	if err != nil {
		return nil, err
	}
	return &Txn{p: p, at: at, reads: map[string]Read{}, writes: map[string]Write{}, streams: map[string]*txnStream{}}, nil
}

// Position returns the position the transaction reads at.
func (t *Txn) Position() uint64 { return t.at }

// Get returns key of family as the transaction sees it (its own writes first) and
// whether it exists; the read is tracked.
func (t *Txn) Get(ctx context.Context, family string, key []byte) ([]byte, bool, error) {
	if t.done {
		return nil, false, ErrTxnDone
	}
	subject := t.p.subj.key(family, key)
	if w, ok := t.writes[subject]; ok {
		return bytes.Clone(w.Value), !w.Delete, nil
	}
	it, found, err := t.p.Get(ctx, family, key, t.at)
	if err != nil {
		return nil, false, err
	}
	t.reads[subject] = Read{Family: family, Key: bytes.Clone(key), Version: it.Version}
	return it.Value, found, nil
}

// Put buffers a write of key in family.
func (t *Txn) Put(family string, key, value []byte) error {
	return t.write(Write{Family: family, Key: bytes.Clone(key), Value: bytes.Clone(value)})
}

// Delete buffers a delete of key in family.
func (t *Txn) Delete(family string, key []byte) error {
	return t.write(Write{Family: family, Key: bytes.Clone(key), Delete: true})
}

func (t *Txn) write(w Write) error {
	if t.done {
		return ErrTxnDone
	}
	if len(w.Key) == 0 {
		return &ArgumentError{Op: "Txn.Put", Arg: "key", Reason: "must not be empty"}
	}
	subject := t.p.subj.key(w.Family, w.Key)
	if _, seen := t.writes[subject]; !seen {
		t.order = append(t.order, subject)
	}
	t.writes[subject] = w
	return nil
}

// Append appends events to stream if its revision as of the transaction's position
// (and after the transaction's own appends) meets expected, else returns an
// *eventstore.WrongExpectedVersionError; the stream's version is checked at Commit.
func (t *Txn) Append(ctx context.Context, stream string, expected eventstore.ExpectedRevision, events ...pipeline.Event) error {
	if t.done {
		return ErrTxnDone
	}
	if stream == "" {
		return &ArgumentError{Op: "Txn.Append", Arg: "stream", Reason: "must not be empty"}
	}
	if len(events) == 0 {
		return &ArgumentError{Op: "Txn.Append", Arg: "events", Reason: "at least one event is required"}
	}
	if err := pipeline.CheckEvents("Txn.Append", events); err != nil {
		return err
	}
	s := t.streams[stream]
	if s == nil {
		seq, rev, found, err := t.p.StreamTail(ctx, stream, t.at)
		if err != nil {
			return err
		}
		s = &txnStream{version: seq}
		if found {
			s.next = rev + 1
		}
		t.streams[stream] = s
	}
	exists := s.next > 0
	if !expectationHolds(expected, s.next, exists) {
		if pos, err := t.alreadyAppended(ctx, stream, expected, s.next, events); err != nil || pos > 0 {
			if !t.appended(stream) {
				delete(t.streams, stream)
			}
			t.already = max(t.already, pos)
			return err
		}
		actual := eventstore.NoStream
		if exists {
			actual = eventstore.Revision(s.next - 1)
		}
		if !t.appended(stream) {
			delete(t.streams, stream) // not appended to: nothing to check at Commit
		}
		return &eventstore.WrongExpectedVersionError{Stream: stream, Expected: expected, Actual: actual}
	}
	for _, e := range events {
		t.events = append(t.events, Event{Stream: stream, Revision: s.next, Event: e})
		s.next++
	}
	return nil
}

// alreadyAppended reports the position of the commit that appended events already,
// when they all have IDs and are the stream's events at the revisions expected
// (eventstore's idempotent retry: an append whose acknowledgement was lost, sent
// again), or 0.
func (t *Txn) alreadyAppended(ctx context.Context, stream string, expected eventstore.ExpectedRevision, next uint64, events []pipeline.Event) (uint64, error) {
	for _, e := range events {
		if e.ID == "" {
			return 0, nil
		}
	}
	n := uint64(len(events))
	var first uint64
	if rev, exact := expected.Exact(); exact {
		first = rev + 1
	} else if expected != eventstore.NoStream {
		return 0, nil
	}
	if first+n > next {
		return 0, nil
	}
	got, err := t.p.ReadStream(ctx, stream, first, int(n))
	if err != nil || uint64(len(got)) != n {
		return 0, err
	}
	for i, e := range events {
		if got[i].ID != e.ID || got[i].Revision != first+uint64(i) {
			return 0, nil
		}
	}
	pos, _, err := t.p.leaderGet(ctx, "Txn.Append", msgGetRequest{Seq: got[n-1].Sequence, NextFor: t.p.subj.commit()})
	return pos, err
}

func (t *Txn) appended(stream string) bool {
	for _, e := range t.events {
		if e.Stream == stream {
			return true
		}
	}
	return false
}

// expectationHolds applies expected to a stream whose next revision is next.
func expectationHolds(expected eventstore.ExpectedRevision, next uint64, exists bool) bool {
	if rev, exact := expected.Exact(); exact {
		return exists && rev == next-1
	}
	switch expected {
	case eventstore.Any:
		return true
	case eventstore.NoStream:
		return !exists
	case eventstore.StreamExists:
		return exists
	}
	return false
}

// Commit sends the transaction's writes, appends and checks as one Commit and returns
// its position (0, sending nothing, for a transaction that wrote nothing). A key or
// stream changed since the transaction's position fails it with a *ConflictError
// (errors.Is(err, pipeline.ErrConflict)). The transaction is done afterwards.
func (t *Txn) Commit(ctx context.Context) (uint64, error) {
	if t.done {
		return 0, ErrTxnDone
	}
	t.done = true
	if len(t.writes) == 0 && len(t.events) == 0 {
		return t.already, nil // nothing to send; appends found already made report theirs
	}
	c := &Commit{Events: t.events}
	for _, subject := range t.order {
		w := t.writes[subject]
		r, read := t.reads[subject]
		if !read {
			it, _, err := t.p.Get(ctx, w.Family, w.Key, t.at)
			if err != nil {
				return 0, fmt.Errorf("rockline/jetstream: Commit: the version of a written key: %w", err)
			}
			r.Version = it.Version
		}
		w.Version = r.Version
		c.Writes = append(c.Writes, w)
	}
	for subject, r := range t.reads {
		if _, written := t.writes[subject]; !written {
			c.Reads = append(c.Reads, r)
		}
	}
	for stream, s := range t.streams {
		c.Streams = append(c.Streams, StreamCheck{Stream: stream, Version: s.version})
	}
	return t.p.Commit(ctx, c)
}

// Discard ends the transaction without committing.
func (t *Txn) Discard() { t.done = true }
