package conformance

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/eventstore/revision"
	"github.com/rockline/rockline/pipeline"
)

// DB adapts a pipeline.DB, on any engine, and an event store on it to Engine: the
// suite then drives rockline's public API (pipeline and eventstore), so the same
// adapter proves the same promises on the local engine and on every engine behind
// pipeline.OpenEngine.
func DB(db *pipeline.DB) (Engine, error) {
	es, err := eventstore.New(db)
	if err != nil {
		return nil, err
	}
	return &local{db: db, es: es, fams: map[string]*pipeline.ColumnFamily{}}, nil
}

// local is the Engine DB returns.
type local struct {
	db   *pipeline.DB
	es   *eventstore.Store
	mu   sync.Mutex // fams
	fams map[string]*pipeline.ColumnFamily
}

func (l *local) family(name string) (*pipeline.ColumnFamily, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if cf, ok := l.fams[name]; ok {
		return cf, nil
	}
	cf, err := l.db.EnsureColumnFamily(name)
	if err == nil {
		l.fams[name] = cf
	}
	return cf, err
}

func (l *local) Begin(context.Context) (Txn, error) {
	return &localTxn{l: l, tx: l.db.Begin()}, nil
}

func (l *local) Append(ctx context.Context, stream string, expected eventstore.ExpectedRevision, events ...pipeline.Event) (uint64, error) {
	res, err := l.es.Append(ctx, stream, expected, events...)
	return res.Position, err
}

func (l *local) ReadStream(ctx context.Context, stream string) ([]Event, error) {
	evs, err := l.es.ReadStream(ctx, stream, 0, 1<<20)
	out := make([]Event, len(evs))
	for i, e := range evs {
		out[i] = Event{Stream: e.Stream, Revision: e.Revision, ID: e.ID, Type: e.Type, Data: e.Data, Tags: e.Tags}
	}
	return out, err
}

func (l *local) Subscribe(ctx context.Context, after uint64, fn func(Entry) error) (Subscription, error) {
	return l.db.Subscribe(ctx, after, func(e pipeline.LogEntry) error {
		if len(e.Families) > 0 {
			return nil // family creations and drops are entries of their own here
		}
		en := Entry{Position: e.Position}
		for _, x := range e.Events {
			en.Events = append(en.Events, Event{Stream: x.Stream, Revision: x.Revision, ID: x.ID, Type: x.Type, Data: x.Data, Tags: x.Tags})
		}
		for _, w := range e.Writes {
			en.Writes = append(en.Writes, Write{Family: w.Family, Key: w.Key, Value: w.Value, Delete: w.Delete})
		}
		return fn(en)
	})
}

func (l *local) DropFamily(_ context.Context, family string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.fams, family)
	return l.db.DropColumnFamily(family)
}

type localTxn struct {
	l  *local
	tx *pipeline.Txn
}

func (t *localTxn) Get(_ context.Context, family string, key []byte) ([]byte, bool, error) {
	cf, err := t.l.family(family)
	if err != nil {
		return nil, false, err
	}
	v, err := t.tx.Get(cf, key)
	if errors.Is(err, pipeline.ErrNotFound) {
		return nil, false, nil
	}
	return v, err == nil, err
}

func (t *localTxn) Put(family string, key, value []byte) error {
	cf, err := t.l.family(family)
	if err != nil {
		return err
	}
	return t.tx.Put(cf, key, value)
}

func (t *localTxn) PutAtCommit(family string, key, payload []byte) error {
	cf, err := t.l.family(family)
	if err != nil {
		return err
	}
	for _, v := range eventstore.PositionedValues() {
		if v.Name() == revision.MarkName {
			return t.tx.PutAtCommit(cf, key, payload, v)
		}
	}
	return fmt.Errorf("conformance: the event store has no %q positioned value", revision.MarkName)
}

func (t *localTxn) Delete(family string, key []byte) error {
	cf, err := t.l.family(family)
	if err != nil {
		return err
	}
	return t.tx.Delete(cf, key)
}

func (t *localTxn) Append(_ context.Context, stream string, expected eventstore.ExpectedRevision, events ...pipeline.Event) error {
	return t.l.es.AppendTxn(t.tx, stream, expected, events...)
}

func (t *localTxn) CheckStream(_ context.Context, stream string, expected eventstore.ExpectedRevision) error {
	return t.l.es.Require(t.tx, eventstore.StreamAt(stream, expected))
}

func (t *localTxn) RequireNoneMatching(_ context.Context, q eventstore.Query, after uint64) error {
	return t.l.es.Require(t.tx, eventstore.NoneMatching(q, after))
}

func (t *localTxn) Commit(ctx context.Context) (uint64, error) {
	return t.tx.CommitPosition(ctx)
}

func (t *localTxn) Discard() { t.tx.Discard() }
