// Package partitioned spreads an event store over a fixed number of partitions, each
// an ordinary rockline database with its own event store, for applications that
// outgrow one database's write path (and, with a replicated engine under each
// partition, one machine).
//
// A Config fixes the number of partitions when the store is created and supplies the
// partition function: streams that must commit together (one tenant's, one aggregate
// family's) must map to one partition. Inside a partition every promise of rockline
// holds: appends with expected revisions, atomic multi-stream transactions
// (Store.Update), a dense ordered log, subscriptions that never skip or repeat.
// Across partitions two are lost, by design, as in KurrentDB's, Axon's or Kafka's
// partitioned stores:
//
//   - Atomicity: one transaction writes one partition. Update refuses streams of two
//     partitions with a *CrossPartitionError.
//   - One dense global log: each partition has its own positions. A subscription to
//     all partitions (Store.SubscribeToAll) delivers each partition's events in order,
//     exactly once, and interleaves partitions in no defined order; it resumes from a
//     Positions vector, one position per partition.
//
// An application crosses partitions with a process manager: a subscription that
// reacts to events of one partition by appending to another, with event IDs derived
// from the source event (its partition and position), so an append repeated after a
// restart from an older Positions vector is recognised and written once
// (eventstore's idempotent appends). See the package example test.
//
// Open keeps partitions in subfolders of one folder (p000, p001, ...) on the local
// engine and records the partition count there, so a reopen with another count fails;
// New takes databases the caller opened, on any engine.
package partitioned
