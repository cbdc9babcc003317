package eventstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rockline/rockline/pipeline"
)

// Reclaim deletes the index records of the revisions that streams' states hide: below
// a soft delete or TruncateBefore, beyond MaxCount, older than MaxAge, and every
// record of a tombstoned stream. Reads hide those revisions already; Reclaim frees
// their space, and deletes their events' index entries with them (and the index
// entries of positions TruncateLog removed). The log entries stay
// (pipeline.DB.TruncateLog is the log's own retention). Each stream's hidden records
// go in one range delete (pipeline.Txn.DeleteRange), an ordinary commit with its
// index entries' deletes; Reclaim returns how many records it deleted. A Store made
// without the function of a selector index its database keeps cannot compute that
// index's entries, and its Reclaim fails with an *IndexMismatchError.
func (s *Store) Reclaim(ctx context.Context) (int, error) {
	var streams []string
	err := s.db.View(func(tx *pipeline.Txn) error {
		it, err := tx.NewIterator(s.cf, pipeline.IterOptions{Lower: []byte{'s'}, Upper: []byte{'t'}})
		if err != nil {
			return err
		}
		defer it.Close()
		for it.First(); it.Valid(); it.Next() {
			streams = append(streams, string(it.Key()[1:]))
		}
		return it.Err()
	})
	if err != nil {
		return 0, err
	}
	total := 0
	for _, stream := range streams {
		n, err := s.reclaimStream(ctx, stream)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, s.reclaimTruncatedEntries(ctx)
}

// deleteEntries deletes in tx the index entries of the events at places, whose log
// entries give their values (the entries of a truncated position go with
// reclaimTruncatedEntries).
func (s *Store) deleteEntries(ctx context.Context, tx *pipeline.Txn, places []At) error {
	if len(places) == 0 {
		return nil
	}
	events, err := s.eventsAt(ctx, "(reclaim)", places)
	if err != nil {
		return err
	}
	var vals []string
	for i := range events {
		ev := &events[i]
		for j := range s.indexes {
			ix := &s.indexes[j]
			if vals, err = ix.values("Store.Reclaim", func() string { return fmt.Sprintf("stream %q revision %d", ev.Stream, ev.Revision) }, ev.Stream, &ev.Event, vals[:0]); err != nil {
				return err
			}
			for _, v := range vals {
				if err := tx.Delete(s.cf, indexKey(nil, indexPrefix(nil, ix.Name, v), ev.Position, ev.Index)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// reclaimTruncatedEntries deletes, with a range delete per index value, the index
// entries below the log's first position, whose events TruncateLog removed: reads
// skip them already.
func (s *Store) reclaimTruncatedEntries(ctx context.Context) error {
	first := s.db.FirstPosition()
	if len(s.indexes) == 0 || first <= max(s.swept.Load(), 1) {
		return nil
	}
	err := s.db.Update(ctx, func(tx *pipeline.Txn) error {
		it, err := tx.NewIterator(s.cf, pipeline.IterOptions{Lower: []byte{'x'}, Upper: []byte{'y'}})
		if err != nil {
			return err
		}
		defer it.Close()
		for it.First(); it.Valid(); {
			k := it.Key()
			if len(k) < 1+indexPlace {
				return fmt.Errorf("%w: index entry %x", pipeline.ErrCorrupt, k)
			}
			prefix := slices.Clone(k[:len(k)-indexPlace])
			if binary.BigEndian.Uint64(k[len(k)-indexPlace:]) < first {
				if err := tx.DeleteRange(s.cf, indexKey(nil, prefix, 0, 0), indexKey(nil, prefix, first, 0)); err != nil {
					return err
				}
			}
			it.Seek(append(indexKey(nil, prefix, math.MaxUint64, math.MaxUint32), 0)) // the next value's entries
		}
		return it.Err()
	})
	if err == nil {
		s.swept.Store(first)
	}
	return err
}

// reclaimStream deletes the hidden records of one stream with one range delete, in a
// transaction that reads the head with tracking: a metadata change or delete racing it
// conflicts, and the retry computes the range again.
func (s *Store) reclaimStream(ctx context.Context, stream string) (int, error) {
	n := 0
	err := s.db.Update(ctx, func(tx *pipeline.Txn) error {
		n = 0
		head, hasHead, st, err := s.head(tx, stream)
		if err != nil || !hasHead {
			return err
		}
		low := head + 1 // a tombstone hides everything
		if !st.tombstoned {
			low = st.lowest(head)
			if st.MaxAge > 0 {
				if low, err = s.firstYoung(tx, stream, low, head, time.Now().Add(-st.MaxAge)); err != nil {
					return err
				}
			}
		}
		it, err := tx.NewIterator(s.cf, pipeline.IterOptions{Lower: eventKey(stream, 0), Upper: eventKey(stream, low)})
		if err != nil {
			return err
		}
		var places []At // of the records deleted, when the store keeps indexes
		for it.First(); it.Valid(); it.Next() {
			n++
			if len(s.indexes) > 0 {
				pos, idx, _, err := parseEventValue(it.Value())
				if err != nil {
					it.Close()
					return err
				}
				places = append(places, At{Position: pos, Index: idx})
			}
		}
		err = it.Err()
		it.Close()
		if err != nil || n == 0 {
			return err
		}
		if err := s.deleteEntries(ctx, tx, places); err != nil {
			return err
		}
		return tx.DeleteRange(s.cf, eventKey(stream, 0), eventKey(stream, low))
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// Reclaimer runs Reclaim in the background; its goroutine ends with Close, the
// context it was started with, or the database's Close.
type Reclaimer struct {
	cancel    context.CancelFunc
	done      chan struct{}
	reclaimed atomic.Int64
	mu        sync.Mutex
	err       error
}

// StartReclaimer runs Reclaim now and then every interval (at least 1 ms) until ctx
// ends, the database closes or the Reclaimer is closed. Any other Reclaim error ends
// it too, and Close returns that error.
func (s *Store) StartReclaimer(ctx context.Context, every time.Duration) (*Reclaimer, error) {
	if every < time.Millisecond {
		return nil, &pipeline.ArgumentError{Op: "StartReclaimer", Arg: "every", Reason: every.String() + " is below 1ms"}
	}
	ctx, cancel := context.WithCancel(ctx)
	r := &Reclaimer{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			n, err := s.Reclaim(ctx)
			r.reclaimed.Add(int64(n))
			switch {
			case ctx.Err() != nil, errors.Is(err, pipeline.ErrClosed):
				return
			case err != nil:
				r.mu.Lock()
				r.err = err
				r.mu.Unlock()
				return
			}
			select {
			case <-t.C:
			case <-ctx.Done():
				return
			}
		}
	}()
	return r, nil
}

// Reclaimed returns how many records the Reclaimer has deleted so far.
func (r *Reclaimer) Reclaimed() int64 { return r.reclaimed.Load() }

// Close stops the Reclaimer, waits for its goroutine and returns the error that ended
// it, if one did.
func (r *Reclaimer) Close() error {
	r.cancel()
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}
