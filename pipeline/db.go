package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/rockline/rockline/storage"
	"github.com/rockline/rockline/tracing"
)

// DB is an open rockline database: the front over one engine (engine.go). Open,
// OpenReadOnly and OpenSecondary put the local engine behind it (RocksDB, commit
// lanes, a validator, the dense log); OpenEngine puts any other Engine behind it.
// Its methods are safe for concurrent use.
//
// Invariants:
//   - closing goes false->true once; after it, Begin, Commit, family changes and the
//     log readers fail with ErrClosed.
//   - Close ends every subscription (done, then subs.Wait), then takes gate for
//     writing (waiting for family changes in progress, which hold it for reading),
//     then closes the engine: the engine is closed once, after the last subscription
//     and family change left. A commit in flight is the engine's to finish or refuse
//     (the local engine's lanes drain before its storage closes).
//   - last only grows: the highest position the front has seen committed, read or
//     reported by the engine (LastPosition falls back on it when the engine cannot
//     answer, and the subscription-lag gauge reads it).
type DB struct {
	cfg  Config
	eng  Engine
	name string // eng.Name(), read once
	// readOnly is set when the engine was opened for reading only (OpenReadOnly,
	// OpenSecondary): every write fails with ErrReadOnly.
	readOnly bool
	tracer   trace.Tracer

	closeGate               // held for reading by family changes, for writing by Close
	closeDone chan struct{} // closed when the first Close returns
	// closed is cancelled when Close begins: calls that wait (WaitForPosition) end
	// with it.
	closed context.Context
	cancel context.CancelFunc

	last atomic.Uint64

	metrics *metrics

	subscriptions
}

// newFront returns the DB over e, with cfg's engine-independent settings applied.
// It closes e when it fails.
func newFront(e Engine, cfg Config) (*DB, error) {
	db := &DB{cfg: cfg, eng: e, name: e.Name(), closeDone: make(chan struct{})}
	db.done = make(chan struct{})
	db.closed, db.cancel = context.WithCancel(context.Background())
	tp := cfg.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	db.tracer = tp.Tracer(tracing.ScopeName)
	var err error
	if m, ok := e.(interface{ commitMetrics() *metrics }); ok {
		db.metrics = m.commitMetrics() // the local engine records its stages in them
	} else if db.metrics, err = newMetrics(cfg.MeterProvider, db.name); err != nil {
		return nil, errors.Join(fmt.Errorf("rockline: metrics: %w", err), e.Close())
	}
	if err := db.metrics.registerGauges(db); err != nil {
		return nil, errors.Join(fmt.Errorf("rockline: metrics: %w", err), e.Close())
	}
	if r, ok := e.(readOnlyEngine); ok {
		db.readOnly = r.ReadOnly()
	}
	if a, ok := e.(interface{ attach(*DB) }); ok {
		a.attach(db)
	}
	if p, err := e.LastPosition(context.Background()); err == nil {
		db.saw(p)
	}
	return db, nil
}

// saw records that position pos is committed.
func (db *DB) saw(pos uint64) {
	for {
		cur := db.last.Load()
		if pos <= cur || db.last.CompareAndSwap(cur, pos) {
			return
		}
	}
}

// Close stops admitting commits, lets every queued and running commit finish, and
// frees every native handle. In-flight Commit calls either succeed or fail with
// ErrClosed. Close is idempotent; later calls return nil.
func (db *DB) Close() error {
	if db.closing.Swap(true) {
		<-db.closeDone // wait for the first Close to finish
		return nil
	}
	defer close(db.closeDone)
	db.cancel()
	db.subsMu.Lock() // no Subscribe can add itself after this
	close(db.done)
	db.subsMu.Unlock()
	db.subs.Wait()
	db.metrics.unregister()
	db.gate.Lock() // family changes in progress finish first
	defer db.gate.Unlock()
	return db.eng.Close()
}

// notSupported is the error of a call op the engine does not offer.
func (db *DB) notSupported(op string) error {
	return &NotSupportedError{Op: op, Engine: db.name}
}

// Policy returns the validation policy of the local engine ("parallel" or
// "serial"), or on a DB opened with OpenEngine the engine's name.
func (db *DB) Policy() string { return db.name }

// BucketPoolBytes returns the memory of the local engine's lock pool (0 under the
// serial policy and on other engines).
func (db *DB) BucketPoolBytes() int {
	if p, ok := db.eng.(interface{ PoolBytes() int }); ok {
		return p.PoolBytes()
	}
	return 0
}

// LastPosition returns the highest published log position (0 for an empty log). When
// the engine cannot answer (a remote engine cut off) it returns the last position
// the DB saw.
func (db *DB) LastPosition() uint64 {
	if db.closing.Load() {
		return db.last.Load()
	}
	if pos, err := db.eng.LastPosition(context.Background()); err == nil {
		db.saw(pos)
	}
	return db.last.Load()
}

// StorageStats returns RocksDB's statistics for the database and each family; other
// engines fail with a *NotSupportedError.
func (db *DB) StorageStats() (storage.Stats, error) {
	s, ok := db.eng.(interface{ StorageStats() (storage.Stats, error) })
	if !ok {
		return storage.Stats{}, db.notSupported("DB.StorageStats")
	}
	if db.closing.Load() {
		return storage.Stats{}, ErrClosed
	}
	return s.StorageStats()
}
