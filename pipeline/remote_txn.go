package pipeline

import (
	"context"
	"fmt"
	"time"

	"github.com/rockline/rockline/storage"
	"github.com/rockline/rockline/tracing"
)

// remoteTxn is the part of a Txn of a remote DB: the engine's transaction and the
// context its reads run under (Update's, or Background for Begin and View).
type remoteTxn struct {
	eng    EngineTxn
	ctx    context.Context
	writes int
	events int
}

// beginRemote is Begin on a remote engine.
func (db *DB) beginRemote(ctx context.Context) *Txn {
	t := &Txn{db: db}
	if db.closing.Load() {
		t.err, t.done = ErrClosed, true
		return t
	}
	et, err := db.remote.eng.Begin(ctx)
	if err != nil {
		t.err, t.done = err, true
		return t
	}
	t.readPos = et.ReadPosition()
	db.remote.saw(t.readPos)
	t.rt = &remoteTxn{eng: et, ctx: ctx}
	return t
}

func (t *Txn) remoteGet(op string, cf *ColumnFamily, key []byte, track bool) ([]byte, error) {
	fam, err := t.db.remoteFamily(op, cf)
	if err != nil {
		return nil, err
	}
	if err := checkKey(op, key); err != nil {
		return nil, err
	}
	v, found, err := t.rt.eng.Get(t.rt.ctx, fam, key, track)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, ErrNotFound
	}
	return v, nil
}

func (t *Txn) remoteWrite(op string, cf *ColumnFamily, key, value []byte, del bool) error {
	fam, err := t.db.remoteFamily(op, cf)
	if err != nil {
		return err
	}
	if err := checkKey(op, key); err != nil {
		return err
	}
	if len(value) > storage.MaxValueSize {
		return &ArgumentError{Op: op, Arg: "value", Reason: fmt.Sprintf("%d bytes exceeds the limit of %d", len(value), storage.MaxValueSize), Err: storage.ErrTooLarge}
	}
	if del {
		err = t.rt.eng.Delete(fam, key)
	} else {
		err = t.rt.eng.Put(fam, key, value)
	}
	if err == nil {
		t.rt.writes++
	}
	return err
}

func (t *Txn) remotePutAtCommit(op string, cf *ColumnFamily, key, payload []byte, value PositionedValue) error {
	fam, err := t.db.remoteFamily(op, cf)
	if err != nil {
		return err
	}
	if err := checkKey(op, key); err != nil {
		return err
	}
	if value == nil {
		return &ArgumentError{Op: op, Arg: "value", Reason: "must not be nil"}
	}
	if err := t.rt.eng.PutAtCommit(fam, key, payload, value); err != nil {
		return err
	}
	t.rt.writes++
	return nil
}

func (t *Txn) remoteEvents(stream string, first uint64, events []Event) error {
	if err := t.rt.eng.AddEvents(stream, first, events); err != nil {
		return err
	}
	t.rt.events += len(events)
	return nil
}

func (t *Txn) remoteIterator(cf *ColumnFamily, o IterOptions) (*Iterator, error) {
	const op = "Txn.NewIterator"
	fam, err := t.db.remoteFamily(op, cf)
	if err != nil {
		return nil, err
	}
	it, err := t.rt.eng.NewIterator(t.rt.ctx, fam, o)
	if err != nil {
		return nil, err
	}
	return &Iterator{txn: t, remote: it}, nil
}

// commitRemote is commit on a remote engine: the engine commits; the span and the
// metrics are the local engine's rockline.commit and rockline.commit.duration
// (total), with the engine's name as the policy.
func (t *Txn) commitRemote(ctx context.Context) (pos uint64, err error) {
	t.done = true
	db, rt := t.db, t.rt
	defer rt.eng.Discard()
	ctx, span := db.tracer.Start(ctx, tracing.SpanCommit)
	if span.IsRecording() {
		span.SetAttributes(
			tracing.AttrPolicy.String(db.remote.name),
			tracing.AttrKeys.Int(rt.writes),
			tracing.AttrEvents.Int(rt.events),
		)
	}
	start := time.Now()
	defer func() {
		endCommitSpan(span, pos, err)
		db.metrics.outcome(ctx, err)
		db.metrics.stage(ctx, stageTotal, time.Since(start))
	}()
	if db.closing.Load() {
		return 0, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	pos, err = rt.eng.Commit(ctx)
	if err != nil {
		return 0, err
	}
	db.remote.saw(pos)
	return pos, nil
}
