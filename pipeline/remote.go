package pipeline

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/rockline/rockline/storage"
	"github.com/rockline/rockline/tracing"
)

// remote is the part of a DB opened with OpenEngine: the engine and what the DB
// remembers of it. The public methods of DB, Txn and Iterator hand off to the
// functions of this file and remote_txn.go when db.remote is set.
//
// Invariants:
//   - last only grows: the highest position the DB has seen committed or reported by
//     the engine (LastPosition falls back on it when the engine cannot answer).
//   - Close (closing set, db.done closed) ends every Subscription before the engine
//     is closed; transactions begun before Close fail on their next call with the
//     engine's closed error.
type remote struct {
	eng  Engine
	name string
	last atomic.Uint64
}

func (r *remote) saw(pos uint64) {
	for {
		cur := r.last.Load()
		if pos <= cur || r.last.CompareAndSwap(cur, pos) {
			return
		}
	}
}

// openRemote is OpenEngine after the checks.
func openRemote(e Engine, cfg Config) (*DB, error) {
	db := newDB(cfg)
	db.remote = &remote{eng: e, name: e.Name()}
	var err error
	if db.metrics, err = newMetrics(db, cfg.MeterProvider); err != nil {
		return nil, fmt.Errorf("rockline: metrics: %w", err)
	}
	return db, nil
}

func (db *DB) notSupported(op string) error {
	return &NotSupportedError{Op: op, Engine: db.remote.name}
}

// closeRemote is Close on a remote engine: subscriptions end, then the engine closes.
func (db *DB) closeRemote() error {
	db.subsMu.Lock()
	close(db.done)
	db.subsMu.Unlock()
	db.subs.Wait()
	if db.metrics.reg != nil {
		db.metrics.reg.Unregister()
	}
	db.gate.Lock() // family changes in progress finish first
	defer db.gate.Unlock()
	return db.remote.eng.Close()
}

func (db *DB) remoteLastPosition() uint64 {
	if db.closing.Load() {
		return db.remote.last.Load()
	}
	if pos, err := db.remote.eng.LastPosition(context.Background()); err == nil {
		db.remote.saw(pos)
	}
	return db.remote.last.Load()
}

// remoteFamily checks a family handle of a remote DB and returns its name.
func (db *DB) remoteFamily(op string, c *ColumnFamily) (string, error) {
	switch {
	case c == nil:
		return "", &ArgumentError{Op: op, Arg: "column family", Reason: "must not be nil"}
	case c.db != db:
		return "", &ArgumentError{Op: op, Arg: "column family", Reason: fmt.Sprintf("%q belongs to another database", c.Name()), Err: storage.ErrForeignFamily}
	case db.closing.Load():
		return "", ErrClosed
	}
	return c.name, nil
}

func (db *DB) remoteHandle(name string) *ColumnFamily { return &ColumnFamily{db: db, name: name} }

func (db *DB) createRemoteFamily(name string) (*ColumnFamily, error) {
	if err := db.enter(); err != nil {
		return nil, err
	}
	defer db.leave()
	if name == storage.DefaultFamily {
		return nil, fmt.Errorf("rockline: family %q: %w", name, ErrColumnFamilyExists)
	}
	if err := db.remote.eng.CreateFamily(context.Background(), name); err != nil {
		return nil, err
	}
	return db.remoteHandle(name), nil
}

func (db *DB) remoteColumnFamily(name string) (*ColumnFamily, error) {
	if db.closing.Load() {
		return nil, ErrClosed
	}
	if name == storage.DefaultFamily {
		return db.remoteHandle(name), nil
	}
	names, err := db.remote.eng.Families(context.Background())
	if err != nil {
		return nil, err
	}
	if _, found := slices.BinarySearch(names, name); !found {
		return nil, fmt.Errorf("rockline: family %q: %w", name, ErrColumnFamilyNotFound)
	}
	return db.remoteHandle(name), nil
}

func (db *DB) remoteColumnFamilies() ([]string, error) {
	if db.closing.Load() {
		return nil, ErrClosed
	}
	names, err := db.remote.eng.Families(context.Background())
	if err != nil {
		return nil, err
	}
	out := []string{storage.DefaultFamily}
	for _, n := range names {
		if !isReserved(n) && n != storage.DefaultFamily {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, nil
}

func (db *DB) dropRemoteFamily(name string) error {
	if err := db.enter(); err != nil {
		return err
	}
	defer db.leave()
	_, span := db.tracer.Start(context.Background(), tracing.SpanDropCF, trace.WithAttributes(tracing.AttrFamily.String(name)))
	defer span.End()
	if err := db.remote.eng.DropFamily(context.Background(), name); err != nil {
		span.SetStatus(codes.Error, err.Error())
		span.SetAttributes(tracing.AttrErrorType.String(errorType(err)))
		return err
	}
	return nil
}

func (db *DB) remoteReadLog(from uint64, limit int) ([]LogEntry, error) {
	if db.closing.Load() {
		return nil, ErrClosed
	}
	if from == 0 {
		from = 1
	}
	es, err := db.remote.eng.ReadLog(context.Background(), from, limit)
	if n := len(es); n > 0 {
		db.remote.saw(es[n-1].Position)
	}
	return es, err
}

func (db *DB) remoteEntry(pos uint64) (LogEntry, error) {
	if db.closing.Load() {
		return LogEntry{}, ErrClosed
	}
	return db.remote.eng.Entry(context.Background(), pos)
}

func (db *DB) remoteWaitForPosition(ctx context.Context, pos uint64) error {
	if db.remote.last.Load() >= pos {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { // ends with the call: cancel runs on return

		select {
		case <-db.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	err := db.remote.eng.WaitForPosition(ctx, pos)
	if err != nil && db.closing.Load() {
		return ErrClosed
	}
	if err == nil {
		db.remote.saw(pos)
	}
	return err
}

// subscribeRemote is Subscribe on a remote engine for s (registered by
// addSubscription, its goroutine's context ctx): the engine's subscription, with the
// Subscription's position kept here and its end tied to Close.
func (db *DB) subscribeRemote(ctx context.Context, s *Subscription, handler func(LogEntry) error) (*Subscription, error) {
	es, err := db.remote.eng.Subscribe(ctx, s.pos.Load(), func(e LogEntry) error {
		handled, err := s.deliver(handler, e)
		if handled {
			db.remote.saw(e.Position)
		}
		return err
	})
	if err != nil {
		db.removeSubscription(s)
		return nil, err
	}
	go func() { // owned by s: ends with the engine's subscription
		defer db.removeSubscription(s)
		defer close(s.done)
		select {
		case <-es.Done():
		case <-db.done:
			es.Close()
			s.err = ErrClosed
			return
		}
		s.err = es.Wait()
		if s.err != nil && db.closing.Load() {
			s.err = ErrClosed
		}
	}()
	return s, nil
}

// errIfRemote returns a *NotSupportedError for op on a remote DB, nil on the local
// engine.
func (db *DB) errIfRemote(op string) error {
	if db.remote != nil {
		return db.notSupported(op)
	}
	return nil
}
