package partitioned

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/pipeline"
)

// Store is an event store over a fixed set of partitions. Its methods are safe for
// concurrent use; each routes by stream name to one partition's eventstore.Store.
type Store struct {
	cfg   Config
	part  func(string, int) int
	dbs   []*pipeline.DB
	es    []*eventstore.Store
	owned bool // Open opened the databases; Close closes them
}

// manifest is what Open records in the store's folder.
type manifest struct {
	Format     int `json:"format"`
	Partitions int `json:"partitions"`
}

const manifestName = "PARTITIONS.json"

// Open opens (creating if needed) a partitioned store in dir on the local engine: one
// rockline database per partition in dir/p000, dir/p001, ..., each opened with
// cfg.DB. The partition count is recorded at creation; reopening with another count
// fails with a *pipeline.ConfigError naming Partitions (the partition function cannot
// be checked: keep it the same). Close closes every partition.
func Open(dir string, cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, manifestName)
	switch b, err := os.ReadFile(path); {
	case err == nil:
		var m manifest
		if err := json.Unmarshal(b, &m); err != nil || m.Format != 1 {
			return nil, fmt.Errorf("%w: %s holds %q", pipeline.ErrCorrupt, path, b)
		}
		if m.Partitions != cfg.Partitions {
			return nil, &pipeline.ConfigError{Field: "Partitions", Value: cfg.Partitions, Expected: fmt.Sprintf("%d, the count %s was created with", m.Partitions, dir)}
		}
	case errors.Is(err, os.ErrNotExist):
		b, _ := json.Marshal(manifest{Format: 1, Partitions: cfg.Partitions})
		if err := writeFileSynced(path, b); err != nil {
			return nil, err
		}
	default:
		return nil, err
	}
	dbs := make([]*pipeline.DB, 0, cfg.Partitions)
	for p := range cfg.Partitions {
		db, err := pipeline.Open(filepath.Join(dir, fmt.Sprintf("p%03d", p)), cfg.DB)
		if err != nil {
			for _, d := range dbs {
				d.Close()
			}
			return nil, fmt.Errorf("partition %d: %w", p, err)
		}
		dbs = append(dbs, db)
	}
	s, err := New(dbs, cfg)
	if err != nil {
		for _, d := range dbs {
			d.Close()
		}
		return nil, err
	}
	s.owned = true
	return s, nil
}

// writeFileSynced writes b to path through a synced temporary file and a rename.
func writeFileSynced(path string, b []byte) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if err = errors.Join(err, f.Close()); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

// New builds a partitioned store over dbs, partition i being dbs[i], on whatever
// engine opened them; len(dbs) must equal cfg.Partitions (cfg.DB is not used). Close
// leaves the databases open: they are the caller's.
func New(dbs []*pipeline.DB, cfg Config) (*Store, error) {
	if cfg.Partitions == 0 {
		cfg.Partitions = len(dbs)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if len(dbs) != cfg.Partitions {
		return nil, &pipeline.ConfigError{Field: "Partitions", Value: cfg.Partitions, Expected: fmt.Sprintf("the number of databases given, %d", len(dbs))}
	}
	s := &Store{cfg: cfg, part: cfg.partition(), dbs: dbs, es: make([]*eventstore.Store, len(dbs))}
	for i, db := range dbs {
		if db == nil {
			return nil, &pipeline.ArgumentError{Op: "partitioned.New", Arg: fmt.Sprintf("dbs[%d]", i), Reason: "must not be nil"}
		}
		es, err := eventstore.New(db)
		if err != nil {
			return nil, fmt.Errorf("partition %d: %w", i, err)
		}
		s.es[i] = es
	}
	return s, nil
}

// Close closes every partition's database when Open opened them (nothing otherwise).
func (s *Store) Close() error {
	if !s.owned {
		return nil
	}
	var errs []error
	for i, db := range s.dbs {
		if err := db.Close(); err != nil {
			errs = append(errs, fmt.Errorf("partition %d: %w", i, err))
		}
	}
	return errors.Join(errs...)
}

// Partitions returns the number of partitions.
func (s *Store) Partitions() int { return len(s.dbs) }

// PartitionOf returns the partition stream belongs to. A partition function that
// returns a number outside [0, Partitions) fails every call routed through it with a
// *pipeline.ConfigError naming Partition.
func (s *Store) PartitionOf(stream string) (int, error) {
	p := s.part(stream, len(s.dbs))
	if p < 0 || p >= len(s.dbs) {
		return 0, &pipeline.ConfigError{Field: "Partition", Value: p, Expected: fmt.Sprintf("a partition in [0, %d) for stream %q", len(s.dbs), stream)}
	}
	return p, nil
}

// Partition returns partition p's event store and database, for what the routing
// methods do not cover (projections, stream lifecycle, the log).
func (s *Store) Partition(p int) (*eventstore.Store, *pipeline.DB, error) {
	if p < 0 || p >= len(s.dbs) {
		return nil, nil, &pipeline.ArgumentError{Op: "Partition", Arg: "p", Reason: fmt.Sprintf("%d is not in [0, %d)", p, len(s.dbs))}
	}
	return s.es[p], s.dbs[p], nil
}

// AppendResult is an append's outcome: the partition it went to, and eventstore's
// result there (Position is a position in that partition's log).
type AppendResult struct {
	Partition int
	eventstore.AppendResult
}

// Append appends events to stream in its partition, as eventstore.Store.Append does.
func (s *Store) Append(ctx context.Context, stream string, expected eventstore.ExpectedRevision, events ...eventstore.Event) (AppendResult, error) {
	p, err := s.PartitionOf(stream)
	if err != nil {
		return AppendResult{}, err
	}
	res, err := s.es[p].Append(ctx, stream, expected, events...)
	return AppendResult{Partition: p, AppendResult: res}, err
}

// AppendIf appends events to stream in its partition if every condition holds, as
// eventstore.Store.AppendIf does. A condition is checked in the append's transaction,
// so its stream must be in the same partition: one of another partition fails with a
// *CrossPartitionError naming it, and nothing is written. A NoneMatching condition
// would see only its partition's events, so with more than one partition it is
// refused with an *pipeline.ArgumentError naming it.
func (s *Store) AppendIf(ctx context.Context, stream string, expected eventstore.ExpectedRevision, conds []eventstore.Condition, events ...eventstore.Event) (AppendResult, error) {
	p, err := s.PartitionOf(stream)
	if err != nil {
		return AppendResult{}, err
	}
	if err := s.samePartition(stream, p, conds); err != nil {
		return AppendResult{Partition: p}, err
	}
	res, err := s.es[p].AppendIf(ctx, stream, expected, conds, events...)
	return AppendResult{Partition: p, AppendResult: res}, err
}

// samePartition fails with a *CrossPartitionError for the first condition on a stream
// of another partition than p, route's, and with an *pipeline.ArgumentError for a
// query condition when there are several partitions. A condition with no stream (the
// zero Condition) is left to the event store, which refuses it as malformed.
func (s *Store) samePartition(route string, p int, conds []eventstore.Condition) error {
	for i, c := range conds {
		if _, _, ok := c.Query(); ok && len(s.dbs) > 1 {
			return &pipeline.ArgumentError{Op: "partitioned.AppendIf", Arg: fmt.Sprintf("conditions[%d]", i),
				Reason: "a NoneMatching condition sees one partition's events only: with several partitions it cannot hold for the store"}
		}
		if c.Stream() == "" {
			continue
		}
		q, err := s.PartitionOf(c.Stream())
		if err != nil {
			return err
		}
		if q != p {
			return &CrossPartitionError{Stream: route, Partition: p, Other: c.Stream(), OtherPartition: q}
		}
	}
	return nil
}

// ReadStream reads stream forward from revision from in its partition, as
// eventstore.Store.ReadStream does.
func (s *Store) ReadStream(ctx context.Context, stream string, from uint64, limit int) ([]eventstore.RecordedEvent, error) {
	p, err := s.PartitionOf(stream)
	if err != nil {
		return nil, err
	}
	return s.es[p].ReadStream(ctx, stream, from, limit)
}

// ReadStreamBackward reads stream backward from revision from in its partition, as
// eventstore.Store.ReadStreamBackward does.
func (s *Store) ReadStreamBackward(ctx context.Context, stream string, from uint64, limit int) ([]eventstore.RecordedEvent, error) {
	p, err := s.PartitionOf(stream)
	if err != nil {
		return nil, err
	}
	return s.es[p].ReadStreamBackward(ctx, stream, from, limit)
}

// ErrCrossPartition is matched by the *CrossPartitionError a transaction's Append
// returns for a stream of another partition than the transaction's.
var ErrCrossPartition = errors.New("rockline: streams of different partitions in one transaction")

// CrossPartitionError names the stream that routed a transaction and a stream of
// another partition it tried to append to.
type CrossPartitionError struct {
	Stream, Other             string
	Partition, OtherPartition int
}

// Error names both streams and their partitions, and says how to cross partitions.
func (e *CrossPartitionError) Error() string {
	return fmt.Sprintf("rockline: stream %q (partition %d) and %q (partition %d) in one transaction: a transaction writes one partition; cross with a process manager", e.Stream, e.Partition, e.Other, e.OtherPartition)
}

// Is reports whether target is ErrCrossPartition.
func (e *CrossPartitionError) Is(target error) bool { return target == ErrCrossPartition }

// Tx is a transaction of one partition, handed to Update's function. Its Txn reads
// and writes that partition's database (its families, with tracked reads); Append
// appends to streams of that partition only.
type Tx struct {
	*pipeline.Txn
	s         *Store
	partition int
	route     string
}

// Append appends events to stream within the transaction, as eventstore's AppendTxn
// does; a stream of another partition fails with a *CrossPartitionError, the
// transaction left as it was.
func (t *Tx) Append(stream string, expected eventstore.ExpectedRevision, events ...eventstore.Event) error {
	q, err := t.s.PartitionOf(stream)
	if err != nil {
		return err
	}
	if q != t.partition {
		return &CrossPartitionError{Stream: t.route, Partition: t.partition, Other: stream, OtherPartition: q}
	}
	return t.s.es[q].AppendTxn(t.Txn, stream, expected, events...)
}

// Require makes the transaction conditional, as eventstore's Store.Require does; a
// condition on a stream of another partition fails with a *CrossPartitionError, the
// transaction left as it was.
func (t *Tx) Require(conds ...eventstore.Condition) error {
	if err := t.s.samePartition(t.route, t.partition, conds); err != nil {
		return err
	}
	return t.s.es[t.partition].Require(t.Txn, conds...)
}

// Partition returns the transaction's partition.
func (t *Tx) Partition() int { return t.partition }

// Update runs fn in a transaction of route's partition (route is a stream name, the
// one that decides), committing it and retrying conflicts as pipeline.DB.Update does.
// Everything fn appends (Tx.Append) and writes commits atomically, in that partition:
// an append to a stream of another partition fails with a *CrossPartitionError, and
// fn's error is returned with nothing written.
func (s *Store) Update(ctx context.Context, route string, fn func(tx *Tx) error) (partition int, err error) {
	if fn == nil {
		return 0, &pipeline.ArgumentError{Op: "partitioned.Update", Arg: "fn", Reason: "must not be nil"}
	}
	p, err := s.PartitionOf(route)
	if err != nil {
		return 0, err
	}
	return p, s.dbs[p].Update(ctx, func(tx *pipeline.Txn) error {
		return fn(&Tx{Txn: tx, s: s, partition: p, route: route})
	})
}
