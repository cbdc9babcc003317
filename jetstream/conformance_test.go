package jetstream_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/eventstore/revision"
	"github.com/rockline/rockline/jetstream"
	"github.com/rockline/rockline/pipeline"
	"github.com/rockline/rockline/test/conformance"
)

// TestConformance runs the core's conformance suite against the JetStream engine: a
// fresh 3-replica partition on the package's embedded cluster per test, driven
// through Partition.Begin's transactions.
func TestConformance(t *testing.T) {
	conformance.Run(t, func(t *testing.T) conformance.Engine {
		n := streamSeq.Add(1)
		cfg := jetstream.Config{Stream: fmt.Sprintf("RL_conf_%d", n), Subject: fmt.Sprintf("rl.conf.%d", n), Replicas: 3,
			PositionedValues: eventstore.PositionedValues()}
		return jsEngine{openOn(t, connect(t, 0), cfg)}
	})
}

// TestConformanceThroughPipeline runs the suite through rockline's public API on the
// JetStream engine: a *pipeline.DB from OpenDB on a fresh 3-replica partition, with
// an eventstore.Store on it, driven by the same adapter (conformance.DB) as the local
// engine's run.
func TestConformanceThroughPipeline(t *testing.T) {
	conformance.Run(t, func(t *testing.T) conformance.Engine {
		n := streamSeq.Add(1)
		cfg := jetstream.Config{Stream: fmt.Sprintf("RL_db_%d", n), Subject: fmt.Sprintf("rl.db.%d", n), Replicas: 3}
		db, err := jetstream.OpenDB(ctxT(t), connect(t, 0), cfg, pipeline.Config{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := db.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
		e, err := conformance.DB(db)
		if err != nil {
			t.Fatal(err)
		}
		return e
	})
}

// jsEngine adapts a Partition to conformance.Engine.
type jsEngine struct{ p *jetstream.Partition }

func (e jsEngine) Begin(ctx context.Context) (conformance.Txn, error) {
	tx, err := e.p.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return jsTxn{tx}, nil
}

// Append retries a conflict, as eventstore's Store.Append does: the retry re-reads
// the stream, so a changed stream then fails its expectation.
func (e jsEngine) Append(ctx context.Context, stream string, expected eventstore.ExpectedRevision, events ...pipeline.Event) (uint64, error) {
	for {
		tx, err := e.p.Begin(ctx)
		if err != nil {
			return 0, err
		}
		if err := tx.Append(ctx, stream, expected, events...); err != nil {
			tx.Discard()
			return 0, err
		}
		pos, err := tx.Commit(ctx)
		if !errors.Is(err, pipeline.ErrConflict) || ctx.Err() != nil {
			return pos, err
		}
	}
}

func (e jsEngine) ReadStream(ctx context.Context, stream string) ([]conformance.Event, error) {
	evs, err := e.p.ReadStream(ctx, stream, 0, 1<<20)
	out := make([]conformance.Event, len(evs))
	for i, x := range evs {
		out[i] = conformance.Event{Stream: x.Stream, Revision: x.Revision, ID: x.ID, Type: x.Type, Data: x.Data, Tags: x.Tags}
	}
	return out, err
}

func (e jsEngine) Subscribe(ctx context.Context, after uint64, fn func(conformance.Entry) error) (conformance.Subscription, error) {
	return e.p.Subscribe(ctx, after, func(en jetstream.Entry) error {
		if en.Aborted {
			return nil // an abort marker fencing out a timed-out commit: no commit
		}
		c := conformance.Entry{Position: en.Position}
		for _, x := range en.Events {
			c.Events = append(c.Events, conformance.Event{Stream: x.Stream, Revision: x.Revision, ID: x.ID, Type: x.Type, Data: x.Data, Tags: x.Tags})
		}
		for _, w := range en.Writes {
			c.Writes = append(c.Writes, conformance.Write{Family: w.Family, Key: w.Key, Value: w.Value, Delete: w.Delete})
		}
		return fn(c)
	})
}

func (e jsEngine) DropFamily(ctx context.Context, family string) error {
	return e.p.PurgeFamily(ctx, family)
}

type jsTxn struct{ tx *jetstream.Txn }

func (t jsTxn) Get(ctx context.Context, family string, key []byte) ([]byte, bool, error) {
	return t.tx.Get(ctx, family, key)
}
func (t jsTxn) Put(family string, key, value []byte) error { return t.tx.Put(family, key, value) }
func (t jsTxn) PutAtCommit(family string, key, payload []byte) error {
	return t.tx.PutAtCommit(family, key, payload, revision.MarkName)
}
func (t jsTxn) Delete(family string, key []byte) error { return t.tx.Delete(family, key) }
func (t jsTxn) Append(ctx context.Context, stream string, expected eventstore.ExpectedRevision, events ...pipeline.Event) error {
	return t.tx.Append(ctx, stream, expected, events...)
}
func (t jsTxn) CheckStream(ctx context.Context, stream string, expected eventstore.ExpectedRevision) error {
	return t.tx.CheckStream(ctx, stream, expected)
}

// RequireNoneMatching is refused: a Partition's own streams keep no tag markers
// (the event store over OpenDB does, and TestConformanceThroughPipeline checks it).
func (t jsTxn) RequireNoneMatching(context.Context, eventstore.Query, uint64) error {
	return fmt.Errorf("rockline/jetstream: a Partition's Txn has no tag conditions (use the event store over OpenDB): %w", errors.ErrUnsupported)
}
func (t jsTxn) Commit(ctx context.Context) (uint64, error) { return t.tx.Commit(ctx) }
func (t jsTxn) Discard()                                   { t.tx.Discard() }
