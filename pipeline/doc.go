// Package pipeline is rockline's public API: an embeddable, transactional write
// pipeline for event-sourced applications on RocksDB.
//
// # Transactions
//
// Open a database, Begin a transaction, read with Get (tracked for conflicts) or
// GetUntracked, write with Put and Delete (buffered in Go), and Commit. A transaction
// reads a snapshot that holds every commit published before Begin, merged with its own
// writes. Commit fails with ErrConflict when any key the transaction read with Get, or
// wrote, was written by another commit after Begin: no lost update, no write skew.
// That is stronger than RocksDB's own optimistic transactions, which validate writes
// only, and matches Badger. Update runs a function in a transaction and retries
// conflicts with jittered backoff; View runs a read-only one.
//
// # The commit path
//
// Commit claims the column families the transaction writes (a dropped family refuses
// the claim and the commit fails whole with ErrColumnFamilyDropped), hands the commit
// to one of Config.Lanes commit lanes (a full lane blocks until the context ends) and
// waits. The lane runs the validator (on the committing goroutine itself when the lane
// is idle, which saves two goroutine hand-offs under light load; queued behind the
// lane's earlier commits otherwise), which checks the commit against the last-write
// positions of recently written keys and, only if it holds, assigns the next dense log
// position and writes the data and the log entry in one RocksDB batch. The position
// is published once every lower one is, and Commit returns: a transaction begun after
// that sees the commit. CommitInline runs the same stages on the caller's goroutine.
// The parallel validator (default) lets commits on different keys validate
// concurrently, each holding its keys' bucket locks; the serial one validates a group of
// commits in arrival order. Under both, validated commits of every lane go through one
// shared writer queue, whose leader assigns their positions one group at a time and
// hands the queue on; each group is written as one batch, beside the next groups'
// writes (RocksDB groups them into one WAL write), and published in position order.
//
// Each stage opens a span (rockline.commit, rockline.lane.wait, rockline.validate,
// rockline.write, rockline.publish) through Config.TracerProvider and records
// rockline.commit.duration through Config.MeterProvider; both default to otel's global
// providers, which rockline never sets.
//
// # The log, and layers over it
//
// Every commit gets one log entry holding its events (AddEvents) and its write set, and
// every family creation and drop gets an entry of its own naming the generation, so
// the log alone can rebuild every family with its generations (Rebuild, Replay). Replay
// holds the database alone: while it runs no transaction can begin. ReadLog and
// LogIterator return published entries only, deliver the intact entries before a
// corrupt one, and report positions removed by a concurrent TruncateLog as
// ErrLogTruncated; Subscribe catches up from the log and then follows
// publication, and never slows a writer. Checkpoint and TruncateLog bound the log's
// size.
//
// Layers are built on this API alone. The event store (package eventstore: streams,
// expected revisions, idempotent appends) keeps its records in a family of its own
// (LayerFamily), reads and writes a stream's head through the transaction like any
// key, and writes the records that point at their own commit with PutAtCommit, the
// one hook that sees the commit's log position; the core knows nothing of its key
// layout. An application that only runs transactions imports pipeline alone; one
// that appends to streams imports eventstore too (it cannot be re-exported here, as
// it is built on this package).
//
// # Engines
//
// Everything above describes the local engine, the one Open gives. DB, Txn,
// Iterator, ColumnFamily and Subscription are a front, in the shape of database/sql
// over its driver package: each holds one engine-side value (engine.go). Open puts
// the local engine behind it (the local*.go files); OpenEngine puts any other Engine
// there: the JetStream engine, in module github.com/rockline/rockline/jetstream, is
// one. The public API, argument checks, Update's retries, the commit span and
// metrics, subscriptions and every layer on this API are written once, in the front;
// snapshot reads, conflict checks, the atomic commit and the log are the engine's.
// The local engine's maintenance and DeleteRange are optional interfaces the front
// asserts; an engine without them fails the call with a *NotSupportedError. An
// engine's positions increase in commit order without being consecutive on every
// engine but the local one.
//
// The front is this package, not the module's root (no rockline.Open): a root package
// could only re-export pipeline's and eventstore's names as aliases, so every type
// would have two names and two doc pages, and the layers built on the front
// (eventstore, partitioned) would still be imported by their own paths.
//
// # Column families and close
//
// DropColumnFamily returns at once; commits admitted before it complete, and RocksDB
// drops the family when the last of them releases it, or at the next Open after a
// crash. A commit that read a dropped family with tracking fails like one that writes
// it: what it read no longer holds. Close stops admitting commits, drains the lanes,
// waits for subscriptions and CommitInline calls, performs pending drops, and frees every
// native handle; in-flight commits either finish or fail with ErrClosed. A drop that a
// commit still held at Close is reported as ErrDropPending and completed by the next
// Open. Open also makes the log agree with the families on disk after a crash between
// a family change and its log entry (the change is durable first; its entry is written
// then).
//
// # What was chosen where the design is silent
//
//   - A transaction's snapshot may also include commits that were completing while it
//     began (written, not yet published). That can only cause a false conflict,
//     never a missed one; WaitForPosition lets a layer that found a record of such a
//     commit wait until its entry is published.
//   - Empty keys are refused (*ArgumentError); keys are at most 64 KiB and values at
//     most 1 GiB (MaxKeySize, MaxValueSize).
//   - A write that fails after its position was assigned leaves a filler entry at that
//     position (Filler is true, no events, no writes); if even that fails the database
//     stops (ErrStopped) and the next Open fills the gap.
package pipeline
