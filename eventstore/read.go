package eventstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/rockline/rockline/pipeline"
)

// Event is an application event, as the core records it in a commit's log entry.
type Event = pipeline.Event

// RecordedEvent is an event as the log holds it: its stream and revision, its commit's
// log position and time, and its index among the commit's events. The log readers and
// subscriptions of package pipeline hand out the same type.
type RecordedEvent = pipeline.RecordedEvent

// maxReadLimit bounds a read's limit.
const maxReadLimit = 1 << 20

// ReadStream returns up to limit events of stream from revision from forward
// (ascending). It returns every event whose commit has been written, waiting for the
// publication of those still in flight (until ctx ends), so it agrees with what an
// Append has seen. A stream with no events, or from beyond its last revision, returns
// none and no error. limit must be 1..1<<20, or ToEnd.
func (s *Store) ReadStream(ctx context.Context, stream string, from uint64, limit int) ([]RecordedEvent, error) {
	return s.readStream(ctx, "ReadStream", stream, from, limit, false)
}

// ReadStreamBackward returns up to limit events of stream from revision from down to
// 0 (descending); from beyond the last revision starts at the last. It waits as
// ReadStream does.
func (s *Store) ReadStreamBackward(ctx context.Context, stream string, from uint64, limit int) ([]RecordedEvent, error) {
	return s.readStream(ctx, "ReadStreamBackward", stream, from, limit, true)
}

// ref locates one event of a stream: its revision, its commit and its index there.
type ref struct {
	rev, pos uint64
	idx      int
}

func (s *Store) readStream(ctx context.Context, op, stream string, from uint64, limit int, backward bool) ([]RecordedEvent, error) {
	if err := checkStream(op, stream); err != nil {
		return nil, err
	}
	if err := checkLimit(op, limit); err != nil {
		return nil, err
	}
	var refs []ref
	err := s.db.View(func(tx *pipeline.Txn) error {
		var err error
		refs, err = s.refs(tx, stream, from, limit, backward)
		return err
	})
	if err != nil || len(refs) == 0 {
		return nil, err
	}
	// A record is written with its commit's log entry, but the entry is readable only
	// once published: wait for the commits in flight below it. This keeps ReadStream
	// consistent with what an Append (which reads the head) has already seen.
	newest := uint64(0)
	for _, r := range refs {
		newest = max(newest, r.pos)
	}
	if err := s.db.WaitForPosition(ctx, newest); err != nil {
		return nil, err
	}
	out := make([]RecordedEvent, 0, len(refs))
	var entry pipeline.LogEntry
	for _, r := range refs {
		if entry.Position != r.pos {
			if entry, err = s.db.Entry(r.pos); err != nil {
				return nil, err
			}
		}
		if r.idx >= len(entry.Events) {
			return nil, fmt.Errorf("%w: stream %q revision %d points at event %d of log entry %d, which has %d", pipeline.ErrCorrupt, stream, r.rev, r.idx, r.pos, len(entry.Events))
		}
		ev := entry.Events[r.idx]
		if ev.Stream != "" && (ev.Stream != stream || ev.Revision != r.rev) {
			return nil, fmt.Errorf("%w: stream %q revision %d points at event %d of log entry %d, which is revision %d of stream %q", pipeline.ErrCorrupt, stream, r.rev, r.idx, r.pos, ev.Revision, ev.Stream)
		}
		// Entries written before events carried their stream name none: the index
		// record says whose event it is.
		ev.Stream, ev.Revision = stream, r.rev
		out = append(out, ev)
	}
	return out, nil
}

// refs reads the records of up to limit revisions of stream from from on (or down),
// in tx's snapshot, with one iterator over the stream's record range, leaving out the
// revisions the stream's state hides (a soft delete, MaxCount, MaxAge,
// TruncateBefore). A tombstoned stream fails with a *StreamDeletedError.
func (s *Store) refs(tx *pipeline.Txn, stream string, from uint64, limit int, backward bool) ([]ref, error) {
	low, head, ok, err := s.visible(tx, stream)
	if err != nil || !ok {
		return nil, err
	}
	return s.refsIn(tx, stream, low, head, from, limit, backward)
}

// visible returns the revisions of stream readers see in tx's snapshot: low..head (none
// when low > head), ok false when the stream has no events or is soft-deleted. low is
// the lowest revision the stream's state leaves visible (a soft delete, TruncateBefore,
// MaxCount, MaxAge), also when ok is false: revisions appended later below it stay
// hidden. A tombstoned stream fails with a *StreamDeletedError.
func (s *Store) visible(tx *pipeline.Txn, stream string) (low, head uint64, ok bool, err error) {
	head, hasHead, st, err := s.head(tx, stream)
	if err != nil {
		return 0, 0, false, err
	}
	if st.tombstoned {
		return 0, 0, false, &StreamDeletedError{Stream: stream}
	}
	low = st.lowest(head)
	if !hasHead || st.deleted {
		return low, head, false, nil
	}
	if st.MaxAge > 0 {
		if low, err = s.firstYoung(tx, stream, low, head, time.Now().Add(-st.MaxAge)); err != nil {
			return 0, 0, false, err
		}
	}
	return low, head, true, nil
}

// refsIn is refs within the visible revisions low..head.
func (s *Store) refsIn(tx *pipeline.Txn, stream string, low, head, from uint64, limit int, backward bool) ([]ref, error) {
	if low > head || (backward && from < low) {
		return nil, nil
	}
	lower, upper := eventKey(stream, low), eventKey(stream, 0)
	upper[len(upper)-9] = 1 // the stream's records end where the separator byte 0 does
	upper = upper[:len(upper)-8]
	if backward {
		if from < ^uint64(0) {
			upper = eventKey(stream, from+1)
		}
	} else {
		lower = eventKey(stream, max(from, low))
	}
	it, err := tx.NewIterator(s.cf, pipeline.IterOptions{Lower: lower, Upper: upper})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	step := begin(it, backward)
	var refs []ref
	for ; it.Valid() && want(limit, len(refs)); step() {
		k := it.Key()
		pos, idx, _, err := parseEventValue(it.Value())
		if err != nil {
			return nil, err
		}
		refs = append(refs, ref{binary.BigEndian.Uint64(k[len(k)-8:]), pos, idx})
	}
	return refs, it.Err()
}

// firstYoung returns the lowest revision in low..head whose commit is not older than
// cutoff (head+1 when none is), by a binary search over the revisions' commit times:
// it assumes a clock that does not go back, so commit times grow with log positions.
// A commit not yet published is young; a record Reclaim deleted is old. A revision
// whose entry TruncateLog removed has no time left: it is older than every entry
// still in the log, so old when one of those is old; when the first one kept is
// young, or none is kept, its age is unknown and it stays visible (and its record is
// kept from Reclaim), so that reading it fails with ErrLogTruncated as on a stream
// without MaxAge.
func (s *Store) firstYoung(tx *pipeline.Txn, stream string, low, head uint64, cutoff time.Time) (uint64, error) {
	lo, hi := low, head+1 // the answer is in [lo, hi]
	for lo < hi {
		mid := lo + (hi-lo)/2
		age, err := s.age(tx, stream, mid, cutoff)
		if err != nil {
			return 0, err
		}
		if age == young {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	if lo > low { // the revision below the answer: truncated means no kept entry after it is old
		if age, err := s.age(tx, stream, lo-1, cutoff); err != nil || age == truncated {
			return low, err
		}
	}
	return lo, nil
}

// The ages age tells.
const (
	old       = iota // committed before the cutoff, or its record reclaimed
	young            // committed at or after the cutoff, or not yet published
	truncated        // its entry is below the log's start: no time left (taken as old by the search)
)

// age tells the age of stream's revision rev against cutoff.
func (s *Store) age(tx *pipeline.Txn, stream string, rev uint64, cutoff time.Time) (int, error) {
	v, err := tx.GetUntracked(s.cf, eventKey(stream, rev))
	if errors.Is(err, pipeline.ErrNotFound) {
		return old, nil
	}
	if err != nil {
		return old, err
	}
	pos, _, _, err := parseEventValue(v)
	if err != nil {
		return old, err
	}
	if pos > s.db.LastPosition() {
		return young, nil
	}
	e, err := s.db.Entry(pos)
	switch {
	case errors.Is(err, pipeline.ErrLogTruncated):
		return truncated, nil
	case err != nil:
		return old, err
	case e.Time.Before(cutoff):
		return old, nil
	}
	return young, nil
}

// begin puts it on its first key in the read's direction and returns the step to the
// next one.
func begin(it *pipeline.Iterator, backward bool) func() {
	if backward {
		it.Last()
		return it.Prev
	}
	it.First()
	return it.Next
}
