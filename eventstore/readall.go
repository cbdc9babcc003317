package eventstore

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/rockline/rockline/pipeline"
)

// ToEnd, as a limit, reads every event to the end (of the stream, or of the log):
// however many there are, all held in memory at once.
const ToEnd = -1

// At is a place in the order of all events: the event at Index among the events of the
// log entry at Position. Events are ordered by Position, then Index. Start is before
// every event and End after every event; an At past the last event of its entry is
// simply before the next entry's first.
type At struct {
	Position uint64
	Index    int
}

var (
	// Start is before the first event of the log.
	Start = At{}
	// End is after the last event of the log, now and later.
	End = At{Position: math.MaxUint64, Index: math.MaxInt}
)

// Next returns the place just after e: where a forward read that handled e goes on.
func Next(e RecordedEvent) At { return At{Position: e.Position, Index: e.Index + 1} }

// Prev returns the place just before e: where a backward read that handled e goes on.
func Prev(e RecordedEvent) At {
	if e.Index == 0 {
		if e.Position == 0 {
			return Start
		}
		return At{Position: e.Position - 1, Index: math.MaxInt}
	}
	return At{Position: e.Position, Index: e.Index - 1}
}

// readPage is how many log entries a read takes from the log at a time.
const readPage = 256

// ReadAll returns, in log order, up to limit published events at or after from that
// match filter (limit 1..1<<20, or ToEnd). Events of every stream come, and events of
// no stream (pipeline.Txn.AddEvents) unless filter has a stream condition. To read on,
// pass Next of the last event returned. Log positions removed by
// pipeline.DB.TruncateLog fail with pipeline.ErrLogTruncated; start at or above the
// truncation point to skip them.
func (s *Store) ReadAll(ctx context.Context, from At, limit int, filter Filter) ([]RecordedEvent, error) {
	if err := checkLimit("ReadAll", limit); err != nil {
		return nil, err
	}
	var out []RecordedEvent
	pos := max(from.Position, 1)
	for want(limit, len(out)) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		page, err := s.db.ReadLog(pos, readPage)
		if err != nil {
			return nil, err
		}
		if len(page) == 0 {
			return out, nil
		}
		for _, e := range page {
			for i := range e.Events {
				ev := &e.Events[i]
				if (e.Position == from.Position && i < from.Index) || !filter.Match(ev) {
					continue
				}
				if !want(limit, len(out)) {
					return out, nil
				}
				out = append(out, *ev)
			}
			pos = e.Position + 1
		}
	}
	return out, nil
}

// ReadAllBackward returns, newest first, up to limit published events at or before
// from that match filter (End: from the last published event). To read on, pass Prev
// of the last event returned. It stops at the truncation point of the log without an
// error.
func (s *Store) ReadAllBackward(ctx context.Context, from At, limit int, filter Filter) ([]RecordedEvent, error) {
	if err := checkLimit("ReadAllBackward", limit); err != nil {
		return nil, err
	}
	var out []RecordedEvent
	top := min(from.Position, s.db.LastPosition())
	for want(limit, len(out)) {
		lowest := s.db.FirstPosition()
		if top < lowest {
			return out, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		first := lowest
		if top-lowest >= readPage {
			first = top - readPage + 1
		}
		page, err := s.db.ReadLog(first, int(top-first+1))
		if errors.Is(err, pipeline.ErrLogTruncated) {
			continue // a TruncateLog ran meanwhile: read from its new first position
		}
		if err != nil {
			return nil, err
		}
		for j := len(page) - 1; j >= 0; j-- {
			e := &page[j]
			for i := len(e.Events) - 1; i >= 0; i-- {
				ev := &e.Events[i]
				if (e.Position == from.Position && i > from.Index) || !filter.Match(ev) {
					continue
				}
				if !want(limit, len(out)) {
					return out, nil
				}
				out = append(out, *ev)
			}
		}
		if first == 1 {
			return out, nil
		}
		top = first - 1
	}
	return out, nil
}

// want reports whether a read with limit that holds n events takes another.
func want(limit, n int) bool { return limit == ToEnd || n < limit }

func checkLimit(op string, limit int) error {
	if limit != ToEnd && (limit < 1 || limit > maxReadLimit) {
		return &pipeline.ArgumentError{Op: op, Arg: "limit", Reason: fmt.Sprintf("%d is not between 1 and %d, or ToEnd", limit, maxReadLimit)}
	}
	return nil
}
