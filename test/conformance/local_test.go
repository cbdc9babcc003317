package conformance_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/pipeline"
	"github.com/rockline/rockline/test/conformance"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestLocalEngine runs the suite against the local engine: a pipeline.DB on RocksDB
// with its event store, under both validation policies.
func TestLocalEngine(t *testing.T) {
	for _, policy := range []string{pipeline.Parallel, pipeline.Serial} {
		t.Run(policy, func(t *testing.T) {
			conformance.Run(t, func(t *testing.T) conformance.Engine {
				db, err := pipeline.Open(filepath.Join(t.TempDir(), "db"), pipeline.Config{Validation: policy})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() {
					if err := db.Close(); err != nil {
						t.Errorf("Close: %v", err)
					}
				})
				es, err := eventstore.New(db)
				if err != nil {
					t.Fatal(err)
				}
				return &local{db: db, es: es}
			})
		})
	}
}

// local adapts a pipeline.DB and its eventstore.Store to conformance.Engine.
type local struct {
	db *pipeline.DB
	es *eventstore.Store
	mu sync.Mutex // families
}

func (l *local) family(name string) (*pipeline.ColumnFamily, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.db.EnsureColumnFamily(name)
}

func (l *local) Begin(context.Context) (conformance.Txn, error) {
	return &localTxn{l: l, tx: l.db.Begin()}, nil
}

func (l *local) Append(ctx context.Context, stream string, expected eventstore.ExpectedRevision, events ...pipeline.Event) (uint64, error) {
	res, err := l.es.Append(ctx, stream, expected, events...)
	return res.Position, err
}

func (l *local) ReadStream(ctx context.Context, stream string) ([]conformance.Event, error) {
	evs, err := l.es.ReadStream(ctx, stream, 0, 1<<20)
	out := make([]conformance.Event, len(evs))
	for i, e := range evs {
		out[i] = conformance.Event{Stream: e.Stream, Revision: e.Revision, ID: e.ID, Type: e.Type, Data: e.Data}
	}
	return out, err
}

func (l *local) Subscribe(ctx context.Context, after uint64, fn func(conformance.Entry) error) (conformance.Subscription, error) {
	return l.db.Subscribe(ctx, after, func(e pipeline.LogEntry) error {
		if len(e.Families) > 0 {
			return nil // family creations and drops are entries of their own here
		}
		en := conformance.Entry{Position: e.Position}
		for _, x := range e.Events {
			en.Events = append(en.Events, conformance.Event{Stream: x.Stream, Revision: x.Revision, ID: x.ID, Type: x.Type, Data: x.Data})
		}
		return fn(en)
	})
}

func (l *local) DropFamily(_ context.Context, family string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
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

func (t *localTxn) Commit(ctx context.Context) (uint64, error) {
	return t.tx.CommitPosition(ctx)
}

func (t *localTxn) Discard() { t.tx.Discard() }
