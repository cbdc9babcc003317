package jetstream

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	"github.com/nats-io/nats.go"

	"github.com/rockline/rockline/eventstore/revision"
	"github.com/rockline/rockline/pipeline"
)

// The engine seam's JetStream side: Engine is a pipeline.Engine over one Partition,
// so pipeline.OpenEngine gives a *pipeline.DB on it, and every layer built on the
// public API (eventstore, partitioned) runs on JetStream unchanged. The engine itself
// imports pipeline and nothing above it (internal/layers checks it): of the event
// store it knows only what package eventstore/revision states for engines.
//
// Mapping:
//   - A pipeline.Txn is a Txn: snapshot reads at its position, every read tracked
//     (an untracked Get reads the same snapshot without recording a check), writes
//     with their version as the expectation, commit as one atomic batch.
//   - Txn.AddStreamEvents events are the commit's events with the stream and revision
//     the layer assigned; the layer's own records (the event store's stream heads)
//     carry the conflict check, as on the local engine.
//   - Txn.PutAtCommit is a positioned write: the PositionedValue's Name must be the
//     name of one of Config.PositionedValues (OpenDB adds the event store's), because
//     the engine stores the codec's name and makes the value on every read with the
//     codec configured under it (positioned.go).
//   - Positions are commit positions: strictly increasing in commit order, but not
//     consecutive (a commit's position is its commit marker's stream sequence, so a
//     commit of n messages advances the position by n). The log never skips a commit
//     and never repeats one; an abort marker that fenced out a timed-out commit is a
//     Filler entry.
//   - Families are the catalog's (families.go); a family the catalog does not record
//     as created is not listed, but writing one never created is allowed, as for
//     the layer families. A layer family ("rockline." prefix) is never recorded:
//     the partition refuses to create or drop one, so commits do not check its
//     catalog record.
//   - TruncateLog(before) is Truncate(before-1): positions below before are gone.
//   - Txn.DeleteRange and the local engine's maintenance fail with a
//     *pipeline.NotSupportedError.

// EngineName is the engine's name in spans, metrics and errors.
const EngineName = "jetstream"

// Engine is a pipeline.Engine over a Partition.
type Engine struct {
	p *Partition
}

var _ pipeline.Engine = (*Engine)(nil)

// NewEngine returns the engine over p; closing it closes p.
func NewEngine(p *Partition) *Engine { return &Engine{p: p} }

// eventStoreCodecs are the event store's positioned values (eventstore.PositionedValues:
// revision.AppendRecord under revision.RecordName, "rockline.event", and
// revision.AppendMark under revision.MarkName, "rockline.mark"), which OpenDB adds to
// Config.PositionedValues.
var eventStoreCodecs = []PositionedValue{
	pipeline.NewPositionedValue(revision.RecordName, revision.AppendRecord),
	pipeline.NewPositionedValue(revision.MarkName, revision.AppendMark),
}

// OpenDB opens the partition cfg describes on nc and returns a *pipeline.DB on it,
// with the event store's codecs added to cfg.PositionedValues unless one of the name
// is there (so eventstore.New works on the DB; a partition opened with Open and
// NewEngine instead configures eventstore.PositionedValues() for that). dbcfg is
// passed to pipeline.OpenEngine. Closing the DB closes the partition, not nc.
func OpenDB(ctx context.Context, nc *nats.Conn, cfg Config, dbcfg pipeline.Config) (*pipeline.DB, error) {
	pv := slices.Clone(cfg.PositionedValues)
	for _, codec := range eventStoreCodecs {
		if !slices.ContainsFunc(pv, func(c PositionedValue) bool { return c != nil && c.Name() == codec.Name() }) {
			pv = append(pv, codec)
		}
	}
	cfg.PositionedValues = pv
	p, err := Open(ctx, nc, cfg)
	if err != nil {
		return nil, err
	}
	db, err := pipeline.OpenEngine(NewEngine(p), dbcfg)
	if err != nil {
		p.Close()
		return nil, err
	}
	return db, nil
}

// Partition returns the engine's partition.
func (e *Engine) Partition() *Partition { return e.p }

// Name returns EngineName.
func (e *Engine) Name() string { return EngineName }

// Begin starts a Txn at the partition's latest position.
func (e *Engine) Begin(ctx context.Context) (pipeline.EngineTxn, error) {
	t, err := e.p.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return &engineTxn{e: e, t: t}, nil
}

// LastPosition is Partition.Position.
func (e *Engine) LastPosition(ctx context.Context) (uint64, error) { return e.p.Position(ctx) }

// FirstPosition returns the first position after the truncation point (1 if none).
func (e *Engine) FirstPosition() uint64 { return e.p.truncated.Load() + 1 }

// Entry is Partition.Entry as a pipeline.LogEntry.
func (e *Engine) Entry(ctx context.Context, pos uint64) (pipeline.LogEntry, error) {
	en, err := e.p.Entry(ctx, pos)
	if err != nil {
		return pipeline.LogEntry{}, err
	}
	return logEntry(en), nil
}

// ReadLog is Partition.ReadLog as pipeline.LogEntry values.
func (e *Engine) ReadLog(ctx context.Context, from uint64, limit int) ([]pipeline.LogEntry, error) {
	ens, err := e.p.ReadLog(ctx, from, limit)
	out := make([]pipeline.LogEntry, len(ens))
	for i, en := range ens {
		out[i] = logEntry(en)
	}
	return out, err
}

// WaitForPosition is Partition.WaitForPosition.
func (e *Engine) WaitForPosition(ctx context.Context, pos uint64) error {
	return e.p.WaitForPosition(ctx, pos)
}

// Subscribe is Partition.Subscribe, delivering pipeline.LogEntry values; OnLive and
// the lag bound are not reported.
func (e *Engine) Subscribe(ctx context.Context, after uint64, handler func(pipeline.LogEntry) error, _ pipeline.SubscribeOptions) (pipeline.EngineSubscription, error) {
	return e.p.Subscribe(ctx, after, func(en Entry) error { return handler(logEntry(en)) })
}

// family is the engine's handle on a family: its name. A partition's keys carry no
// generation a handle could pin; a write through a handle of a dropped family fails
// at commit, where the catalog is checked.
type family string

// Name returns the family's name.
func (f family) Name() string { return string(f) }

// defaultFamily is the name of the family every database has.
const defaultFamily = "default"

// Default returns the default family.
func (e *Engine) Default() pipeline.EngineFamily { return family(defaultFamily) }

// Family returns the live family name, or an error matching
// pipeline.ErrColumnFamilyNotFound.
func (e *Engine) Family(ctx context.Context, name string) (pipeline.EngineFamily, error) {
	names, err := e.Families(ctx)
	if err != nil {
		return nil, err
	}
	if _, found := slices.BinarySearch(names, name); !found {
		return nil, fmt.Errorf("rockline/jetstream: family %q: %w", name, pipeline.ErrColumnFamilyNotFound)
	}
	return family(name), nil
}

// LayerFamily returns the layer family name: a partition's families exist once
// written. Such a family (reserved, "rockline." prefix) can never be dropped, so a
// Txn commits it without a FamilyCheck (families.go).
func (e *Engine) LayerFamily(_ context.Context, name string) (pipeline.EngineFamily, error) {
	return family(name), nil
}

// CreateFamily is Partition.CreateFamily.
func (e *Engine) CreateFamily(ctx context.Context, name string) (pipeline.EngineFamily, error) {
	if _, _, err := e.p.CreateFamily(ctx, name); err != nil {
		return nil, err
	}
	return family(name), nil
}

// DropFamily is Partition.DropFamily; a family already dropped is not found. The
// drop has taken full effect when its commit is acknowledged, so dropped runs before
// DropFamily returns.
func (e *Engine) DropFamily(ctx context.Context, name string, dropped func(error)) error {
	if _, _, err := e.p.DropFamily(ctx, name); err != nil {
		if _, ok := err.(*pipeline.DroppedError); ok {
			return fmt.Errorf("rockline/jetstream: DropFamily %q: %w", name, pipeline.ErrColumnFamilyNotFound)
		}
		return err
	}
	dropped(nil)
	return nil
}

// Families returns the families the catalog records as live at the latest position.
func (e *Engine) Families(ctx context.Context) ([]string, error) {
	pos, err := e.p.Position(ctx)
	if err != nil {
		return nil, err
	}
	states, err := e.p.Families(ctx, pos)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, s := range states {
		if s.Recorded && !s.Dropped {
			out = append(out, s.Family)
		}
	}
	slices.Sort(out)
	return out, nil
}

// TruncateLog is Truncate(before-1).
func (e *Engine) TruncateLog(ctx context.Context, before uint64) error {
	if before <= 1 {
		return nil
	}
	return e.p.Truncate(ctx, before-1)
}

// Close closes the partition.
func (e *Engine) Close() error { return e.p.Close() }

// logEntry converts an Entry.
func logEntry(en Entry) pipeline.LogEntry {
	le := pipeline.LogEntry{Position: en.Position, Time: en.Time, Filler: en.Aborted}
	for i, ev := range en.Events {
		le.Events = append(le.Events, pipeline.RecordedEvent{Stream: ev.Stream, Revision: ev.Revision, Position: en.Position, Index: i, Time: en.Time, Event: ev.Event})
	}
	for _, w := range en.Writes {
		le.Writes = append(le.Writes, pipeline.LogWrite{Family: w.Family, Generation: int(max(w.Generation, 1)), Key: w.Key, Value: w.Value, Delete: w.Delete})
	}
	for _, f := range en.Families {
		le.Families = append(le.Families, pipeline.FamilyChange{Family: f.Family, Generation: int(f.Generation), Dropped: f.Dropped})
	}
	return le
}

// engineTxn is a pipeline.EngineTxn over a Txn.
type engineTxn struct {
	e *Engine
	t *Txn
}

func (x *engineTxn) ReadPosition() uint64 { return x.t.at }

func (x *engineTxn) Get(ctx context.Context, ef pipeline.EngineFamily, key []byte, track bool) ([]byte, bool, error) {
	if track {
		return x.t.Get(ctx, ef.Name(), key)
	}
	t := x.t
	if t.done {
		return nil, false, ErrTxnDone
	}
	if w, ok := t.writes[txnKey(ef.Name(), key)]; ok {
		return bytes.Clone(w.Value), !w.Delete, nil
	}
	it, found, err := t.read(ctx, ef.Name(), key)
	return it.Value, found, err
}

func (x *engineTxn) NewIterator(ctx context.Context, ef pipeline.EngineFamily, o pipeline.IterOptions) (pipeline.EngineIterator, error) {
	it, err := x.t.NewIterator(ctx, ef.Name(), IterOptions{Lower: o.Lower, Upper: o.Upper})
	if err != nil {
		return nil, err
	}
	return it, nil
}

func (x *engineTxn) Put(ef pipeline.EngineFamily, key, value []byte) error {
	return x.t.Put(ef.Name(), key, value)
}

func (x *engineTxn) Delete(ef pipeline.EngineFamily, key []byte) error {
	return x.t.Delete(ef.Name(), key)
}

func (x *engineTxn) PutAtCommit(ef pipeline.EngineFamily, key, payload []byte, value pipeline.PositionedValue) error {
	name := value.Name()
	if x.e.p.codecs[name] == nil {
		return &ArgumentError{Op: "Txn.PutAtCommit", Arg: "value", Reason: fmt.Sprintf("codec %q is not one of the partition's Config.PositionedValues (the JetStream engine stores a codec's name and makes the value on every read)", name)}
	}
	return x.t.PutAtCommit(ef.Name(), key, payload, name)
}

func (x *engineTxn) AddEvents(stream string, first uint64, events []pipeline.Event) error {
	t := x.t
	if t.done {
		return ErrTxnDone
	}
	for i, ev := range events {
		ev.Data, ev.Metadata, ev.Tags = bytes.Clone(ev.Data), bytes.Clone(ev.Metadata), slices.Clone(ev.Tags)
		t.events = append(t.events, Event{Stream: stream, Revision: first + uint64(i), Event: ev})
	}
	return nil
}

func (x *engineTxn) Commit(ctx context.Context) (uint64, error) { return x.t.Commit(ctx) }

func (x *engineTxn) Discard() { x.t.Discard() }
