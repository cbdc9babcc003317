package eventstore

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"weak"

	"github.com/rockline/rockline/pipeline"
)

// Which indexes a database keeps, and how every Store of it agrees.
//
// Invariants:
//   - Every append writes the entries of every index the database keeps, or fails:
//     an entry is never missing for an event whose record exists.
//   - The database records each index it keeps under 'i' name (value: its kind),
//     written once the index holds an entry for every event already stored (build).
//   - Within a process, the first Store made for an open DB fixes its indexes
//     (agreed); every later Store of that DB declares the same names and kinds, or
//     none and adopts them. So no Store appends without an index another declared.
//     One process opens a database at a time (RocksDB's lock), so that covers every
//     writer.

// agreed holds, per open DB of this process, the indexes its Stores agreed on. An
// entry goes when its DB is collected.
var agreed struct {
	mu   sync.Mutex
	sets map[weak.Pointer[pipeline.DB]][]Index
}

// registryKey is the key recording the index name.
func registryKey(name string) []byte { return append([]byte{'i'}, name...) }

// agree sets s.indexes from declared (empty: adopt), as the invariants above require,
// building the indexes new to the database first.
func (s *Store) agree(ctx context.Context, declared []Index) error {
	agreed.mu.Lock()
	defer agreed.mu.Unlock()
	key := weak.Make(s.db)
	if set, ok := agreed.sets[key]; ok {
		if len(declared) == 0 {
			s.indexes = set
			return nil
		}
		if !sameIndexes(set, declared) {
			return mismatch(set, declared, "another Store of this open database declared other indexes")
		}
		s.indexes = slices.Clone(declared)
		return nil
	}
	kept, err := s.keptIndexes()
	if err != nil {
		return err
	}
	switch {
	case len(declared) == 0:
		s.indexes = kept // a selector's Select is nil: this Store refuses appends
	default:
		for _, k := range kept {
			if !hasIndex(declared, k.Name, k.Kind) {
				return &IndexMismatchError{Index: k.Name, Reason: fmt.Sprintf("the database keeps it as a %v index; declare it so in Config.Indexes", k.Kind)}
			}
		}
		var added []Index
		for _, d := range declared {
			if !hasIndex(kept, d.Name, 0) {
				added = append(added, d)
			}
		}
		if len(added) > 0 {
			if err := s.build(ctx, added); err != nil {
				return err
			}
		}
		s.indexes = slices.Clone(declared)
	}
	if agreed.sets == nil {
		agreed.sets = map[weak.Pointer[pipeline.DB]][]Index{}
	}
	agreed.sets[key] = s.indexes
	runtime.AddCleanup(s.db, func(k weak.Pointer[pipeline.DB]) {
		agreed.mu.Lock()
		delete(agreed.sets, k)
		agreed.mu.Unlock()
	}, key)
	return nil
}

// mismatch names the first index that differs between the agreed and declared sets.
func mismatch(set, declared []Index, reason string) error {
	for _, d := range declared {
		if !hasIndex(set, d.Name, d.Kind) {
			return &IndexMismatchError{Index: d.Name, Reason: reason}
		}
	}
	for _, x := range set {
		if !hasIndex(declared, x.Name, 0) {
			return &IndexMismatchError{Index: x.Name, Reason: reason + " (it is not declared here)"}
		}
	}
	return &IndexMismatchError{Reason: reason}
}

// keptIndexes reads the indexes the database records, sorted by name; a selector's
// Select is nil.
func (s *Store) keptIndexes() ([]Index, error) {
	var kept []Index
	err := s.db.View(func(tx *pipeline.Txn) error {
		it, err := tx.NewIterator(s.cf, pipeline.IterOptions{Lower: []byte{'i'}, Upper: []byte{'j'}})
		if err != nil {
			return err
		}
		defer it.Close()
		for it.First(); it.Valid(); it.Next() {
			name, v := string(it.Key()[1:]), it.Value()
			if len(v) != 1 || IndexKind(v[0]) < ByType || IndexKind(v[0]) > BySelector {
				return fmt.Errorf("%w: index %q is recorded as %x", pipeline.ErrCorrupt, name, v)
			}
			kept = append(kept, Index{Name: name, Kind: IndexKind(v[0])})
		}
		return it.Err()
	})
	return kept, err
}

// build writes the entries of the indexes added for every event already stored whose
// record still exists, a page of log entries per commit, then records the indexes.
// Nothing appends meanwhile (no Store of the database exists in this process yet); a
// crash before the record leaves entries that the next build writes again.
func (s *Store) build(ctx context.Context, added []Index) error {
	var vals []string
	for pos := max(s.db.FirstPosition(), 1); pos <= s.db.LastPosition(); {
		page, err := s.db.ReadLog(pos, readPage)
		if err != nil {
			return fmt.Errorf("build indexes: %w", err)
		}
		if len(page) == 0 {
			break
		}
		err = s.db.Update(ctx, func(tx *pipeline.Txn) error {
			for _, e := range page {
				for i := range e.Events {
					ev := &e.Events[i]
					live, err := s.recordNames(tx, ev)
					if err != nil {
						return err
					}
					if !live {
						continue
					}
					for _, ix := range added {
						if vals, err = ix.values("eventstore.NewWithConfig", func() string { return fmt.Sprintf("log entry %d event %d", e.Position, i) }, ev.Stream, &ev.Event, vals[:0]); err != nil {
							return err
						}
						for _, v := range vals {
							if err := tx.Put(s.cf, indexKey(nil, indexPrefix(nil, ix.Name, v), e.Position, i), nil); err != nil {
								return err
							}
						}
					}
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("build indexes: %w", err)
		}
		pos = page[len(page)-1].Position + 1
	}
	return s.db.Update(ctx, func(tx *pipeline.Txn) error {
		for _, ix := range added {
			if err := tx.Put(s.cf, registryKey(ix.Name), []byte{byte(ix.Kind)}); err != nil {
				return err
			}
		}
		return nil
	})
}

// recordNames reports whether ev is a stream event whose record still exists and
// names it (not reclaimed).
func (s *Store) recordNames(tx *pipeline.Txn, ev *pipeline.RecordedEvent) (bool, error) {
	if ev.Stream == "" {
		return false, nil
	}
	v, err := tx.GetUntracked(s.cf, eventKey(ev.Stream, ev.Revision))
	if errors.Is(err, pipeline.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	pos, idx, _, err := parseEventValue(v)
	return err == nil && pos == ev.Position && idx == ev.Index, err
}

// index returns the store's index named name, or an *pipeline.ArgumentError.
func (s *Store) index(op, name string) (*Index, error) {
	for i := range s.indexes {
		if s.indexes[i].Name == name {
			return &s.indexes[i], nil
		}
	}
	names := make([]string, len(s.indexes))
	for i, ix := range s.indexes {
		names[i] = ix.Name
	}
	return nil, &pipeline.ArgumentError{Op: op, Arg: "index", Reason: fmt.Sprintf("the store keeps no index %q (it keeps %q)", name, names)}
}

// Indexes returns the indexes the store keeps (a selector's Select is nil when this
// Store was made without it).
func (s *Store) Indexes() []Index { return slices.Clone(s.indexes) }
