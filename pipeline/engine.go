package pipeline

import (
	"context"
	"errors"
	"fmt"
)

// The engine seam: what stores a DB's commits.
//
// DB, Txn, Iterator, ColumnFamily and Subscription are the front: each holds one
// engine-side value and no engine code, in the shape of database/sql and its driver
// package. The front owns what every engine shares: argument checks and their typed
// errors, the closed state, Update's retries, the rockline.commit span and the
// commit metrics, the subscription registry, and every layer built on the public
// API (package eventstore, package partitioned). Below it, per engine: snapshot
// reads, conflict detection of tracked reads and writes, the atomic commit of writes
// with their log entry, the dense ordered log, family generations.
//
// Two engines exist. The local engine (the local*.go files: lanes, a validator, the
// writer queue, RocksDB storage; its commit path reads top to bottom in
// local_commit.go) is what Open, OpenReadOnly and OpenSecondary put behind a DB.
// Any other engine implements Engine and OpenEngine puts it behind a DB (the
// JetStream engine, in module github.com/rockline/rockline/jetstream, is one).
//
// What an engine offers beyond Engine it offers as optional interfaces the front
// asserts: EngineRangeDeleter and EngineKeyMaker on its transactions
// (Txn.DeleteRange, Txn.PutKeyAtCommit), and the local
// engine's maintenance (Checkpoint, CompactRange, Verify, Replay, Rebuild,
// StorageStats, CatchUp). A call to one the engine lacks fails with a
// *NotSupportedError naming the call and the engine (ErrNotSupported).

// Engine stores the commits of a DB. Its methods are called concurrently; the DB
// calls Close once, after every subscription it handed out has ended.
type Engine interface {
	// Name names the engine in spans and metrics (rockline.policy) and errors.
	Name() string
	// Begin starts a transaction that reads the engine's latest commit position.
	Begin(ctx context.Context) (EngineTxn, error)
	// LastPosition returns the latest commit position (0: none).
	LastPosition(ctx context.Context) (uint64, error)
	// FirstPosition returns the lowest position still held (1 unless truncated).
	FirstPosition() uint64
	// Entry returns the commit at pos, as DB.Entry documents.
	Entry(ctx context.Context, pos uint64) (LogEntry, error)
	// ReadLog returns up to limit entries from position from, as DB.ReadLog
	// documents; a position whose commit failed after it was taken is a Filler.
	ReadLog(ctx context.Context, from uint64, limit int) ([]LogEntry, error)
	// WaitForPosition returns once position pos is committed and readable, or ctx's
	// error.
	WaitForPosition(ctx context.Context, pos uint64) error
	// Subscribe hands every entry above after to handler, in order, each once, on a
	// goroutine the returned subscription owns, until ctx ends, Close, or handler
	// fails. o carries Subscribe's options; an engine may ignore OnLive and the lag
	// bound.
	Subscribe(ctx context.Context, after uint64, handler func(LogEntry) error, o SubscribeOptions) (EngineSubscription, error)
	// Default returns the default family, which always exists.
	Default() EngineFamily
	// Family returns the live family name (ErrColumnFamilyNotFound otherwise).
	Family(ctx context.Context, name string) (EngineFamily, error)
	// LayerFamily returns the layer family name (a reserved "rockline." name the
	// front checked), creating it when the engine has none.
	LayerFamily(ctx context.Context, name string) (EngineFamily, error)
	// CreateFamily creates the family name (ErrColumnFamilyExists for a live one); a
	// name dropped before starts a new, empty generation.
	CreateFamily(ctx context.Context, name string) (EngineFamily, error)
	// DropFamily drops the live family name (ErrColumnFamilyNotFound otherwise):
	// commits that read or wrote it in the dropped generation fail with a
	// *DroppedError. dropped is called once the drop has taken full effect, which may
	// be after DropFamily returned (the local engine's physical drop waits for the
	// commits admitted before it); it may also be called after DropFamily failed.
	DropFamily(ctx context.Context, name string, dropped func(error)) error
	// Families returns the live families, sorted; the front leaves out the default
	// family and rockline's own.
	Families(ctx context.Context) ([]string, error)
	// TruncateLog removes log positions below before.
	TruncateLog(ctx context.Context, before uint64) error
	// Close releases the engine's resources.
	Close() error
}

// EngineFamily is an engine's handle on one generation of a column family; the front
// hands it back to the engine that made it and to no other.
type EngineFamily interface {
	// Name returns the family's name.
	Name() string
}

// EngineTxn is an optimistic transaction of an Engine. The DB calls it from one
// goroutine at a time and checks every argument before (keys 1..MaxKeySize bytes,
// values up to MaxValueSize, events as CheckEvents accepts them, families of this
// DB), so an EngineTxn refuses only what its engine's limits refuse, with an error
// naming the limit.
type EngineTxn interface {
	// ReadPosition returns the commit position the transaction reads at.
	ReadPosition() uint64
	// Get returns key of family at the read position, the transaction's own Puts and
	// Deletes applied; with track, a change to the key after the read position fails
	// the commit.
	Get(ctx context.Context, family EngineFamily, key []byte, track bool) (value []byte, found bool, err error)
	// NewIterator iterates family within o at the read position merged with the
	// transaction's own writes; every key it yields is tracked.
	NewIterator(ctx context.Context, family EngineFamily, o IterOptions) (EngineIterator, error)
	// Put and Delete buffer a write; the commit fails if the key changed after the
	// read position, read or not (blind writes conflict on every engine).
	Put(family EngineFamily, key, value []byte) error
	Delete(family EngineFamily, key []byte) error
	// PutAtCommit buffers a positioned write, as Txn.PutAtCommit documents.
	PutAtCommit(family EngineFamily, key, payload []byte, value PositionedValue) error
	// AddEvents attaches events, as stream's from revision first ("" for none).
	AddEvents(stream string, first uint64, events []Event) error
	// Commit commits atomically and returns the position (0 when there was nothing to
	// write); a conflict matches ErrConflict. The transaction is done afterwards. ctx
	// carries the front's rockline.commit span, under which an engine may start its
	// own stage spans.
	Commit(ctx context.Context) (uint64, error)
	// Discard ends the transaction; it is called after Commit too.
	Discard()
}

// EngineRangeDeleter is an EngineTxn that deletes a range of keys atomically with
// the rest of its commit (Txn.DeleteRange); the front checked start <= end.
type EngineRangeDeleter interface {
	DeleteRange(family EngineFamily, start, end []byte) error
}

// EngineKeyMaker is an EngineTxn that writes keys made at commit
// (Txn.PutKeyAtCommit): the key from a payload and the commit's position, so records
// ordered by position (the event store's indexes) go in the commit that makes them.
type EngineKeyMaker interface {
	PutKeyAtCommit(family EngineFamily, key PositionedValue, payload, value []byte) error
}

// EngineIterator is an iterator of an EngineTxn; its methods are Iterator's.
type EngineIterator interface {
	First()
	Last()
	Seek(key []byte)
	Next()
	Prev()
	Valid() bool
	Key() []byte
	Value() []byte
	Err() error
	Close() error
}

// EngineSubscription is a running subscription of an Engine.
type EngineSubscription interface {
	// Done is closed when the subscription has ended.
	Done() <-chan struct{}
	// Wait returns why it ended: nil after its context ended or Close, or the
	// handler's or a read's error.
	Wait() error
	// Close ends it and waits for its goroutine.
	Close() error
}

// ErrNotSupported is matched by every *NotSupportedError.
var ErrNotSupported = errors.New("rockline: not supported by this engine")

// NotSupportedError reports a call the DB's engine does not offer.
type NotSupportedError struct {
	Op     string // the call, e.g. "DB.Checkpoint"
	Engine string // Engine.Name
}

// Error names the call and the engine.
func (e *NotSupportedError) Error() string {
	return fmt.Sprintf("rockline: %s: not supported by the %s engine", e.Op, e.Engine)
}

// Is reports whether target is ErrNotSupported.
func (e *NotSupportedError) Is(target error) bool { return target == ErrNotSupported }

// OpenEngine returns a DB whose commits e stores. cfg is validated whole (a
// *ConfigError otherwise); of its fields, the engine-independent ones apply:
// MaxAttempts and RetryBackoff (Update), TracerProvider and MeterProvider. The local
// engine's settings (lanes, validation, RocksDB options, Sync) are the engine's
// business and ignored. Close closes e.
func OpenEngine(e Engine, cfg Config) (*DB, error) {
	if e == nil {
		return nil, &ArgumentError{Op: "OpenEngine", Arg: "engine", Reason: "must not be nil"}
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return newFront(e, cfg.withDefaults())
}
