package eventstore

import (
	"context"
	"errors"
	"slices"

	"github.com/rockline/rockline/pipeline"
)

// live reports whether ev, an event of the log, has its record: its revision is in
// its stream's run of records (Verify checks each record names its event).
func live(streams map[string]*verifiedStream, ev *pipeline.RecordedEvent) bool {
	v := streams[ev.Stream]
	return v != nil && v.records && ev.Revision >= v.first && ev.Revision <= v.last
}

// verifyWhere names no event: Verify reports a value it cannot compute as a problem
// of its own.
func verifyWhere() string { return "" }

// countEntries adds to expected the entries ev needs in each index whose values this
// Store can compute.
func (s *Store) countEntries(ev *pipeline.RecordedEvent, expected map[string]uint64, vals []string) []string {
	for i := range s.indexes {
		ix := &s.indexes[i]
		if !ix.computable() {
			continue
		}
		var err error
		if vals, err = ix.values("Store.Verify", verifyWhere, ev.Stream, &ev.Event, vals[:0]); err == nil {
			expected[ix.Name] += uint64(len(vals))
		}
	}
	return vals
}

// verifyIndexes checks every index entry against the log, then each index's count
// against expected (see Verify).
func (s *Store) verifyIndexes(ctx context.Context, streams map[string]*verifiedStream, first uint64, expected map[string]uint64, r *VerifyReport) error {
	if len(s.indexes) == 0 {
		return nil
	}
	found := map[string]uint64{}
	var e pipeline.LogEntry
	var vals []string
	err := s.db.View(func(tx *pipeline.Txn) error {
		it, err := tx.NewIterator(s.cf, pipeline.IterOptions{Lower: []byte{'x'}, Upper: []byte{'y'}})
		if err != nil {
			return err
		}
		defer it.Close()
		for it.First(); it.Valid(); it.Next() {
			r.IndexEntries++
			if r.IndexEntries%4096 == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			name, value, pos, idx, ok := parseIndexKey(it.Key())
			if !ok {
				r.problem("index entry: malformed key %x", it.Key())
				continue
			}
			ix, err := s.index("Store.Verify", name)
			if err != nil {
				r.problem("index entry of %q: the store keeps no such index", name)
				continue
			}
			if pos < first {
				continue // the log below pos was truncated
			}
			if e.Position != pos {
				if e, err = s.db.Entry(pos); err != nil {
					if errors.Is(err, pipeline.ErrClosed) || errors.Is(err, ctx.Err()) {
						return err
					}
					r.problem("index %q value %q: log entry %d: %v", name, value, pos, err)
					continue
				}
			}
			if idx >= len(e.Events) || !live(streams, &e.Events[idx]) {
				r.problem("index %q value %q: an entry for event %d of log entry %d, which is no stream event with a record", name, value, idx, pos)
				continue
			}
			ev := &e.Events[idx]
			if !ix.computable() {
				continue
			}
			if vals, err = ix.values("Store.Verify", verifyWhere, ev.Stream, &ev.Event, vals[:0]); err != nil || !slices.Contains(vals, value) {
				r.problem("index %q value %q: an entry for stream %q revision %d (log entry %d event %d), which the index keys by %q", name, value, ev.Stream, ev.Revision, pos, idx, vals)
				continue
			}
			found[name]++
		}
		return it.Err()
	})
	if err != nil {
		return err
	}
	for _, ix := range s.indexes {
		if !ix.computable() {
			continue
		}
		if found[ix.Name] != expected[ix.Name] {
			r.problem("index %q: %d entries name events the log holds, the log's events need %d", ix.Name, found[ix.Name], expected[ix.Name])
		}
	}
	return nil
}
