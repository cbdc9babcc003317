package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rockline/rockline/internal/logentry"
	"github.com/rockline/rockline/storage"
)

// ReadLog is Engine.ReadLog: the published entries from position from (1 or more),
// up to limit, read in one iteration of the log family; see DB.ReadLog for what it
// returns.
func (db *localDB) ReadLog(_ context.Context, from uint64, limit int) ([]LogEntry, error) {
	if db.closing.Load() {
		return nil, ErrClosed
	}
	if from == 0 {
		from = 1
	}
	if err := db.checkTruncated(from); err != nil {
		return nil, err
	}
	last := db.seq.Published()
	if from > last {
		return nil, nil
	}
	upto := min(last, from+uint64(limit)-1)
	it, err := db.store.NewIterator(db.log, storage.IterOptions{Lower: logentry.Key(from), Upper: logentry.Key(upto + 1)})
	if err != nil {
		return nil, closedErr(err)
	}
	defer it.Close()
	out := make([]LogEntry, 0, upto-from+1)
	want := from
	for it.First(); it.Valid(); it.Next() {
		k, v, err := it.Item() // ErrClosed, not an empty key, when Close races
		if err != nil {
			return out, closedErr(err)
		}
		pos, err := logentry.ParseKey(k)
		if err != nil {
			return out, err
		}
		if pos != want {
			return out, db.gapError(want, last)
		}
		e, err := decodeEntry(pos, v)
		if err != nil {
			return out, err
		}
		out = append(out, e)
		want++
	}
	if err := it.Err(); err != nil {
		return out, closedErr(err)
	}
	if want != upto+1 {
		return out, db.gapError(want, last)
	}
	return out, nil
}

// checkTruncated fails with ErrLogTruncated when pos was removed by TruncateLog.
func (db *localDB) checkTruncated(pos uint64) error {
	if t := db.truncated.Load(); pos < t {
		return fmt.Errorf("%w: position %d, first kept %d", ErrLogTruncated, pos, t)
	}
	return nil
}

// gapError explains a published position missing from the log: a TruncateLog that
// removed it after ReadLog began (ErrLogTruncated, as if it had been removed before), a
// Close that cut the read short (ErrClosed), or else a damaged log (*CorruptEntryError).
func (db *localDB) gapError(missing, published uint64) error {
	if err := db.checkTruncated(missing); err != nil {
		return err
	}
	if db.closing.Load() {
		return ErrClosed
	}
	return &CorruptEntryError{Position: missing, Reason: fmt.Sprintf("missing below the published position %d", published)}
}

// Entry is Engine.Entry: the entry at pos, read with a point lookup (which the log
// family's bloom filter serves, where an iterator's seek reads an index block of
// every level: a stream read looks up one entry per event), ErrNotFound when it is not
// published yet; otherwise as ReadLog of one position.
func (db *localDB) Entry(ctx context.Context, pos uint64) (LogEntry, error) {
	if pos == 0 {
		es, err := db.ReadLog(ctx, pos, 1)
		if err != nil || len(es) == 0 {
			return LogEntry{}, err
		}
		return es[0], nil
	}
	if db.closing.Load() {
		return LogEntry{}, ErrClosed
	}
	if err := db.checkTruncated(pos); err != nil {
		return LogEntry{}, err
	}
	last := db.seq.Published()
	if pos > last {
		return LogEntry{}, fmt.Errorf("rockline: log position %d: %w", pos, ErrNotFound)
	}
	v, err := db.store.Get(db.log, logentry.Key(pos), nil)
	if errors.Is(err, storage.ErrNotFound) {
		return LogEntry{}, db.gapError(pos, last)
	}
	if err != nil {
		return LogEntry{}, closedErr(err)
	}
	return decodeEntry(pos, v)
}

// decodeEntry turns a stored entry into the public form; slices are copies.
func decodeEntry(pos uint64, raw []byte) (LogEntry, error) {
	e, err := logentry.Decode(pos, raw)
	if err != nil {
		return LogEntry{}, err
	}
	out := LogEntry{Position: e.Position, Time: time.Unix(0, e.Time), Filler: e.Filler}
	if len(e.Events) > 0 {
		out.Events = make([]RecordedEvent, len(e.Events))
		for i, ev := range e.Events {
			out.Events[i] = RecordedEvent{Stream: ev.Stream, Revision: ev.Revision, Position: pos, Index: i, Time: out.Time,
				Event: Event{ID: ev.ID, Type: ev.Type, Data: ev.Data, Metadata: ev.Metadata, Tags: ev.Tags}}
		}
	}
	if len(e.Writes) > 0 {
		out.Writes = make([]LogWrite, len(e.Writes))
		for i, w := range e.Writes {
			name, gen := storage.ParseQualifiedName(w.Family)
			out.Writes[i] = LogWrite{Family: name, Generation: gen, Key: w.Key, Value: w.Value, Delete: w.Delete, Range: w.Range}
		}
	}
	if len(e.Families) > 0 {
		out.Families = make([]FamilyChange, len(e.Families))
		for i, f := range e.Families {
			name, gen := storage.ParseQualifiedName(f.Family)
			out.Families[i] = FamilyChange{Family: name, Generation: gen, Dropped: f.Drop}
		}
	}
	return out, nil
}

// FirstPosition is Engine.FirstPosition: 1, or the position TruncateLog cut the
// log below.
func (db *localDB) FirstPosition() uint64 { return max(db.truncated.Load(), 1) }

// WaitForPosition is Engine.WaitForPosition: it returns once pos is published, with
// ctx's error, with ErrClosed once the engine closes, or with the error that stopped
// the database.
func (db *localDB) WaitForPosition(ctx context.Context, pos uint64) error {
	for {
		changed := db.seq.Changed()
		if db.seq.Published() >= pos {
			return nil
		}
		if err := db.seq.Err(); err != nil {
			return err
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		case <-db.done:
			return ErrClosed
		}
	}
}
