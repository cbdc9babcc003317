package pipeline

import (
	"context"
	"errors"
	"fmt"

	"github.com/rockline/rockline/internal/logentry"
	"github.com/rockline/rockline/storage"
)

// Replay is DB.Replay on the local engine.
func (db *localDB) Replay(ctx context.Context, entries []LogEntry) error {
	if err := db.writable(); err != nil {
		return err
	}
	if err := db.enter(); err != nil {
		return err
	}
	defer db.leave()
	return db.seq.Exclusive(func() error {
		for _, e := range entries {
			if err := ctx.Err(); err != nil {
				return err
			}
			// Checked here, not only by the sequencer: position 0 would wrap its counter.
			if next := db.seq.Published() + 1; e.Position != next {
				return &ArgumentError{Op: "Replay", Arg: "entries", Reason: fmt.Sprintf("position %d is not next (LastPosition()+1 = %d)", e.Position, next)}
			}
			if h := db.cfg.hooks; h != nil && h.BeforeReplayEntry != nil {
				h.BeforeReplayEntry(e.Position)
			}
			if err := db.replayEntry(e); err != nil {
				return fmt.Errorf("rockline: replay position %d: %w", e.Position, err)
			}
		}
		return nil
	})
}

// replayEntry applies one entry inside Replay: its family creations first, then its
// writes and the entry in one batch; when the entry drops a family, the batch is
// written between the drop's durable intent and the family's retirement, as
// DropColumnFamily writes its own entry.
func (db *localDB) replayEntry(e LogEntry) error {
	var drop *FamilyChange
	for i, fc := range e.Families {
		if err := checkReplayFamily(fc.Family, fc.Generation); err != nil {
			return err
		}
		switch {
		case !fc.Dropped:
			if err := db.replayCreate(fc.Family, fc.Generation); err != nil {
				return err
			}
		case drop != nil:
			return &ArgumentError{Op: "Replay", Arg: "entries", Reason: fmt.Sprintf("position %d drops more than one family", e.Position)}
		default:
			drop = &e.Families[i]
		}
	}
	// Families are resolved (and created) before the batch is built: the drop below
	// holds storage's family lock while the batch is written.
	fams := make([]*storage.Family, len(e.Writes))
	for i, w := range e.Writes {
		if w.Range && w.Delete {
			return &ArgumentError{Op: "Replay", Arg: "entries", Reason: fmt.Sprintf("position %d write %d is both a Delete and a Range", e.Position, i)}
		}
		f, err := db.replayFamily(w.Family, w.Generation)
		if err != nil {
			return fmt.Errorf("write %d: %w", i, err)
		}
		fams[i] = f
	}
	write := func(b *storage.Batch) error {
		for i, w := range e.Writes {
			f := fams[i]
			if f == nil {
				continue // a late write to a generation the source had already dropped
			}
			var err error
			switch {
			case w.Range:
				err = b.DeleteRange(f, w.Key, w.Value)
			case w.Delete:
				err = b.Delete(f, w.Key)
			default:
				err = b.Put(f, w.Key, w.Value)
			}
			if err != nil {
				return fmt.Errorf("write %d: %w", i, err)
			}
		}
		raw := logentry.Append(nil, toInternal(e))
		if err := b.Put(db.log, logentry.Key(e.Position), raw); err != nil {
			return err
		}
		return db.seq.Replay(e.Position, func() error { return db.writeCommit(b) })
	}
	if drop != nil {
		if f, err := db.store.Family(drop.Family); err == nil && f.Generation() == drop.Generation {
			return db.store.DropFamilyWith(drop.Family, func(*storage.Family) error {
				return write(storage.NewBatch())
			})
		}
	}
	return write(storage.NewBatch())
}

func checkReplayFamily(name string, gen int) error {
	if err := checkFamilyName("Replay", name); err != nil {
		return err
	}
	if name == storage.DefaultFamily || gen < 1 {
		return &ArgumentError{Op: "Replay", Arg: "family change", Reason: fmt.Sprintf("%q generation %d cannot be created or dropped", name, gen)}
	}
	return nil
}

// replayCreate creates generation gen of name, unless db has it already (a checkpoint
// taken after the creation) or had it (it was dropped since). A live older
// generation is dropped first.
func (db *localDB) replayCreate(name string, gen int) error {
	f, err := db.store.Family(name)
	switch {
	case err == nil && f.Generation() >= gen:
		return nil
	case err != nil && !errors.Is(err, storage.ErrColumnFamilyNotFound):
		return err
	case gen <= db.store.MaxGeneration(name):
		return nil
	case err == nil:
		if err := db.store.DropFamily(name); err != nil {
			return err
		}
	}
	_, err = db.store.CreateFamilyGeneration(name, gen, db.familyOptions(name))
	return err
}

// replayFamily returns db's family for the source's generation gen of name. It returns
// nil for a generation older than the live one, or one dropped here: a commit admitted
// before the source dropped that generation can land in the log after its drop, and
// such a write is not part of the source's live state, so it is skipped. A generation
// the log never announced (a log written before family changes were recorded) is
// created on first sight, replacing an older live generation.
func (db *localDB) replayFamily(name string, gen int) (*storage.Family, error) {
	switch {
	case name == systemFamily:
		return db.sys, nil
	case name == logFamily:
		return nil, &ArgumentError{Op: "Replay", Arg: "write family", Reason: fmt.Sprintf("%q is the log itself", name)}
	case isReserved(name): // a layer's family (LayerFamily): never dropped, created on first use
		if gen != 1 {
			return nil, &ArgumentError{Op: "Replay", Arg: "write family", Reason: fmt.Sprintf("%q generation %d: a layer's family has only generation 1", name, gen)}
		}
		if err := storage.ValidateFamilyName(name); err != nil {
			return nil, &ArgumentError{Op: "Replay", Arg: "write family", Reason: fmt.Sprintf("%q is not a valid family name", name), Err: err}
		}
		return db.layerFamily(name)
	}
	if err := checkFamilyName("Replay", name); err != nil {
		return nil, err
	}
	f, err := db.store.Family(name)
	switch {
	case err == nil && f.Generation() == gen:
		return f, nil
	case err == nil && f.Generation() > gen:
		return nil, nil
	case err != nil && !errors.Is(err, storage.ErrColumnFamilyNotFound):
		return nil, err
	case gen <= db.store.MaxGeneration(name):
		return nil, nil
	}
	if err := db.replayCreate(name, gen); err != nil {
		return nil, err
	}
	return db.store.Family(name)
}

// familyOptions returns the options Config gives a family name.
func (db *localDB) familyOptions(name string) storage.FamilyOptions {
	if o, ok := db.cfg.Families[name]; ok {
		return o
	}
	return db.cfg.FamilyDefaults
}

func toInternal(e LogEntry) *logentry.Entry {
	out := &logentry.Entry{Position: e.Position, Time: e.Time.UnixNano(), Filler: e.Filler}
	for _, ev := range e.Events {
		out.Events = append(out.Events, logentry.Event{ID: ev.ID, Type: ev.Type, Data: ev.Data, Metadata: ev.Metadata, Stream: ev.Stream, Revision: ev.Revision, Tags: ev.Tags})
	}
	for _, w := range e.Writes {
		out.Writes = append(out.Writes, logentry.Write{Family: storage.QualifiedName(w.Family, w.Generation), Key: w.Key, Value: w.Value, Delete: w.Delete, Range: w.Range})
	}
	for _, f := range e.Families {
		out.Families = append(out.Families, logentry.FamilyOp{Family: storage.QualifiedName(f.Family, f.Generation), Drop: f.Dropped})
	}
	return out
}

// Rebuild is DB.Rebuild on the local engine.
func (db *localDB) Rebuild(ctx context.Context, dir string, cfg Config) (Engine, error) {
	dst, err := db.rebuild(ctx, dir, cfg, 0, nil)
	if err != nil {
		return nil, err
	}
	return dst, nil
}

// rebuild is Rebuild up to position upTo (0: the last published), calling progress,
// when set, with the last position replayed after each page.
func (db *localDB) rebuild(ctx context.Context, dir string, cfg Config, upTo uint64, progress func(uint64)) (*localDB, error) {
	if db.truncated.Load() > 1 {
		return nil, fmt.Errorf("%w: rebuild needs the whole log", ErrLogTruncated)
	}
	dst, err := open(dir, cfg, openMode{})
	if err != nil {
		return nil, err
	}
	if dst.seq.Published() != 0 {
		dst.Close()
		return nil, &ArgumentError{Op: "Rebuild", Arg: "dir", Reason: "must hold no database (its log is not empty)"}
	}
	it := &LogIterator{read: func(from uint64, limit int) ([]LogEntry, error) {
		return db.ReadLog(context.Background(), from, limit)
	}, next: 1}
	page := make([]LogEntry, 0, 256)
	flush := func() error {
		if len(page) == 0 {
			return nil
		}
		last := page[len(page)-1].Position
		err := dst.Replay(ctx, page)
		page = page[:0]
		if err == nil && progress != nil {
			progress(last)
		}
		return err
	}
	for it.Next() {
		if upTo != 0 && it.Entry().Position > upTo {
			break
		}
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
	return dst, nil
}
