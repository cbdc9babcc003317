package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/rockline/rockline/internal/logentry"
	"github.com/rockline/rockline/storage"
)

// Replay applies log entries to db as if they had been committed here, in order: each
// entry's writes and the entry itself land in one batch at the entry's own position,
// which must be LastPosition()+1. A write to a generation of a family that db has not
// seen replaces db's family of that name with a new, empty one first, so a family
// dropped and re-created in the source is dropped and re-created here too. Replay
// bypasses conflict validation, so it needs the database alone: it fails with an
// error while transactions are open or commits are in flight. It is how a checkpoint
// is brought up to date and how Rebuild recreates a database from a log.
func (db *DB) Replay(ctx context.Context, entries []LogEntry) error {
	if err := db.enter(); err != nil {
		return err
	}
	defer db.leave()
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		// Checked here, not only by the sequencer: position 0 would wrap its counter.
		if next := db.seq.Published() + 1; e.Position != next {
			return &ArgumentError{Op: "Replay", Arg: "entries", Reason: fmt.Sprintf("position %d is not next (LastPosition()+1 = %d)", e.Position, next)}
		}
		b := storage.NewBatch()
		for i, w := range e.Writes {
			f, err := db.replayFamily(w.Family, w.Generation)
			if err != nil {
				return fmt.Errorf("rockline: replay position %d write %d: %w", e.Position, i, err)
			}
			if f == nil {
				continue // a late write to a generation the source had already dropped
			}
			if w.Delete {
				err = b.Delete(f, w.Key)
			} else {
				err = b.Put(f, w.Key, w.Value)
			}
			if err != nil {
				return fmt.Errorf("rockline: replay position %d write %d: %w", e.Position, i, err)
			}
		}
		raw := logentry.Append(nil, toInternal(e))
		if err := b.Put(db.log, logentry.Key(e.Position), raw); err != nil {
			return err
		}
		if err := db.seq.Replay(e.Position, func() error { return db.store.Write(b) }); err != nil {
			return fmt.Errorf("rockline: replay position %d: %w", e.Position, err)
		}
	}
	return nil
}

// replayFamily returns db's family for the source's generation gen of name, creating
// it (and retiring an older generation) on first sight. A family db already had before
// replaying it (the default family, or any family of a database opened from a
// checkpoint) stands for its own generation of the source. It returns nil for a
// generation older than the one in use: a commit admitted before the source dropped
// that generation can land in the log after writes to the next one, and such a write
// is not part of the source's live state, so it must be skipped, not allowed to
// replace the newer generation.
func (db *DB) replayFamily(name string, gen int) (*storage.Family, error) {
	if name == streamsFamily {
		return db.streamsCF.f, nil
	}
	if name == logFamily || isReserved(name) {
		return nil, &ArgumentError{Op: "Replay", Arg: "write family", Reason: fmt.Sprintf("%q is reserved", name)}
	}
	if db.replayGens == nil {
		db.replayGens = make(map[string]int)
	}
	f, err := db.store.Family(name)
	if err != nil && !errors.Is(err, storage.ErrColumnFamilyNotFound) {
		return nil, err
	}
	seen, ok := db.replayGens[name]
	if !ok && err == nil {
		seen = f.Generation()
	}
	switch {
	case err == nil && seen == gen:
		db.replayGens[name] = gen
		return f, nil
	case gen < seen:
		return nil, nil
	case err == nil:
		if err := db.store.DropFamily(name); err != nil {
			return nil, err
		}
	}
	c, err := db.CreateColumnFamily(name)
	if err != nil {
		return nil, err
	}
	db.replayGens[name] = gen
	return c.f, nil
}

func toInternal(e LogEntry) *logentry.Entry {
	out := &logentry.Entry{Position: e.Position, Time: e.Time.UnixNano(), Filler: e.Filler}
	for _, ev := range e.Events {
		out.Events = append(out.Events, logentry.Event{ID: ev.ID, Type: ev.Type, Data: ev.Data, Metadata: ev.Metadata})
	}
	for _, w := range e.Writes {
		q := w.Family
		if w.Generation > 1 {
			q = fmt.Sprintf("%s#%d", w.Family, w.Generation)
		}
		out.Writes = append(out.Writes, logentry.Write{Family: q, Key: w.Key, Value: w.Value, Delete: w.Delete})
	}
	return out
}

// Rebuild recreates the database from its log alone into a new database in dir
// (opened with cfg), replaying every entry; afterwards the new database's families and
// their contents equal this one's, and its log is identical. The log must not have
// been truncated (use Checkpoint and Replay for that). Rebuild reads published
// entries while commits may go on; the result holds the log as of the moment it read
// the last page.
func (db *DB) Rebuild(ctx context.Context, dir string, cfg Config) (*DB, error) {
	if db.truncated.Load() > 1 {
		return nil, fmt.Errorf("%w: rebuild needs the whole log", ErrLogTruncated)
	}
	dst, err := Open(dir, cfg)
	if err != nil {
		return nil, err
	}
	if dst.LastPosition() != 0 {
		dst.Close()
		return nil, &ArgumentError{Op: "Rebuild", Arg: "dir", Reason: "must hold no database (its log is not empty)"}
	}
	it := db.LogIterator(1)
	page := make([]LogEntry, 0, 256)
	flush := func() error {
		err := dst.Replay(ctx, page)
		page = page[:0]
		return err
	}
	for it.Next() {
		page = append(page, it.Entry())
		if len(page) == cap(page) {
			if err := flush(); err != nil {
				dst.Close()
				return nil, err
			}
		}
	}
	if err := it.Err(); err != nil {
		dst.Close()
		return nil, err
	}
	if err := flush(); err != nil {
		dst.Close()
		return nil, err
	}
	if err := dst.matchFamilies(db); err != nil {
		dst.Close()
		return nil, err
	}
	return dst, nil
}

// matchFamilies drops from dst the families src no longer has, and replaces those whose
// live generation in src never received a write (so the log never named it).
func (dst *DB) matchFamilies(src *DB) error {
	srcNames, err := src.ColumnFamilies()
	if err != nil {
		return err
	}
	dstNames, err := dst.ColumnFamilies()
	if err != nil {
		return err
	}
	for _, n := range dstNames {
		if !slices.Contains(srcNames, n) {
			if err := dst.DropColumnFamily(n); err != nil {
				return err
			}
		}
	}
	for _, n := range srcNames {
		f, err := src.store.Family(n)
		if err != nil {
			return err
		}
		if dst.replayGens[n] == f.Generation() {
			continue
		}
		if slices.Contains(dstNames, n) && n != storage.DefaultFamily {
			if err := dst.DropColumnFamily(n); err != nil {
				return err
			}
		}
		if n != storage.DefaultFamily {
			if _, err := dst.CreateColumnFamily(n); err != nil {
				return err
			}
		}
	}
	return nil
}
