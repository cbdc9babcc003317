package eventstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/rockline/rockline/pipeline"
)

// ReadIndex returns, in log order, up to limit events (limit 1..1<<20, or ToEnd) at
// or after from that the index named index holds under value: the events ReadAll
// returns with the matching filter (events of streams only), without scanning the
// log. It reads the entries of the positions published when it starts (so, read on
// from Next of the last event returned, it never misses an event nor returns one
// twice), skips positions TruncateLog removed, and does not hide revisions a stream's
// state hides until Reclaim deletes their entries (as ReadAll does not). To read from
// a time, start at PositionAt. Errors: an *pipeline.ArgumentError for an index the
// store does not keep, a bad value or limit; pipeline.ErrCorrupt for an entry naming
// no event; ctx's and the database's.
func (s *Store) ReadIndex(ctx context.Context, index, value string, from At, limit int) ([]RecordedEvent, error) {
	return s.readIndex(ctx, "Store.ReadIndex", index, value, from, limit, false)
}

// ReadIndexBackward returns, newest first, up to limit events at or before from (End:
// from the last published event) that the index named index holds under value. To
// read on, pass Prev of the last event returned. Otherwise as ReadIndex.
func (s *Store) ReadIndexBackward(ctx context.Context, index, value string, from At, limit int) ([]RecordedEvent, error) {
	return s.readIndex(ctx, "Store.ReadIndexBackward", index, value, from, limit, true)
}

func (s *Store) readIndex(ctx context.Context, op, index, value string, from At, limit int, backward bool) ([]RecordedEvent, error) {
	if err := checkLimit(op, limit); err != nil {
		return nil, err
	}
	if _, err := s.index(op, index); err != nil {
		return nil, err
	}
	if err := checkIndexValue(op, "value", value); err != nil {
		return nil, err
	}
	// Every position up to last is written before it is published, so the snapshot
	// View takes after this holds all their entries: bounding the read by last makes
	// it complete, and a later read from where it stopped, complete again.
	last, first := s.db.LastPosition(), max(s.db.FirstPosition(), 1)
	prefix := indexPrefix(nil, index, value)
	o := pipeline.IterOptions{Lower: indexKey(nil, prefix, first, 0)}
	switch {
	case backward:
		top := min(from.Position, last)
		if top < first {
			return nil, nil
		}
		o.Upper = append(indexKey(nil, prefix, top, min(from.Index, math.MaxUint32)), 0)
		if top < from.Position {
			o.Upper = indexKey(nil, prefix, top+1, 0)
		}
	default:
		start := max(from.Position, first)
		if start > last {
			return nil, nil
		}
		if start == from.Position {
			o.Lower = indexKey(nil, prefix, start, from.Index)
		} else {
			o.Lower = indexKey(nil, prefix, start, 0)
		}
		o.Upper = indexKey(nil, prefix, last+1, 0)
	}
	var places []At
	err := s.db.View(func(tx *pipeline.Txn) error {
		it, err := tx.NewIterator(s.cf, o)
		if err != nil {
			return err
		}
		defer it.Close()
		step := begin(it, backward)
		for ; it.Valid() && want(limit, len(places)); step() {
			k := it.Key()
			if len(k) < len(prefix)+indexPlace {
				return fmt.Errorf("%w: index %q entry %x", pipeline.ErrCorrupt, index, k)
			}
			p := k[len(k)-indexPlace:]
			places = append(places, At{Position: binary.BigEndian.Uint64(p), Index: int(binary.BigEndian.Uint32(p[8:]))})
			if len(places)%4096 == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
		}
		return it.Err()
	})
	if err != nil {
		return nil, err
	}
	return s.eventsAt(ctx, index, places)
}

// eventsAt returns the events at places, reading each log entry once for a run of
// places in it; places a TruncateLog removed meanwhile are left out.
func (s *Store) eventsAt(ctx context.Context, index string, places []At) ([]RecordedEvent, error) {
	out := make([]RecordedEvent, 0, len(places))
	var e pipeline.LogEntry
	have, gone := false, false
	for i, at := range places {
		if !have || at.Position != e.Position {
			if i%256 == 0 {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
			}
			var err error
			e, err = s.db.Entry(at.Position)
			have, gone = true, errors.Is(err, pipeline.ErrLogTruncated)
			switch {
			case gone:
				e = pipeline.LogEntry{Position: at.Position}
			case err != nil:
				return nil, err
			}
		}
		if gone {
			continue
		}
		if at.Index >= len(e.Events) || e.Events[at.Index].Stream == "" {
			return nil, fmt.Errorf("%w: index %q has an entry for event %d of log entry %d, which has no such stream event", pipeline.ErrCorrupt, index, at.Index, at.Position)
		}
		out = append(out, e.Events[at.Index])
	}
	return out, nil
}

// PositionAt returns the place in the log before the first event committed at or
// after t (At{Position: LastPosition()+1} when none was): the from of a ReadAll or
// ReadIndex that starts at a time. Commit times are taken in position order, so they
// rise with the position unless the clock was set back. It reads about log2(n) log
// entries.
func (s *Store) PositionAt(ctx context.Context, t time.Time) (At, error) {
	lo, hi := max(s.db.FirstPosition(), 1), s.db.LastPosition()+1 // the answer is in [lo, hi]
	for lo < hi {
		if err := ctx.Err(); err != nil {
			return At{}, err
		}
		mid := lo + (hi-lo)/2
		e, err := s.db.Entry(mid)
		if errors.Is(err, pipeline.ErrLogTruncated) {
			lo = max(s.db.FirstPosition(), mid+1)
			continue
		}
		if err != nil {
			return At{}, err
		}
		if e.Time.Before(t) {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return At{Position: lo}, nil
}
