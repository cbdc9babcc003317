// Package eventstore is rockline's event store: named streams of events, appended
// with an expected revision and read back in order, on top of a pipeline.DB.
//
// A stream is a dense sequence of events, revision 0 first. Append (or AppendTxn,
// inside a transaction that also writes other keys or appends to other streams)
// checks the expectation (Any, NoStream, StreamExists or Revision(n)) against the
// stream's head as the transaction reads it; the head is a tracked read and a
// written key, so of two appends that expect the same revision exactly one commits
// and the other fails with a *WrongExpectedVersionError naming the actual revision.
// Events with IDs make an append idempotent: a retried append whose events are
// already there returns the original result and writes nothing.
//
// An append can be conditioned on streams it does not write (AppendIf, or Require in
// a transaction of one's own): StreamAt(stream, expected) holds while that stream's
// state meets expected. Each condition's head is a tracked read, so a commit that
// changes it before the append commits fails the append with a conflict, and the
// retry reports the condition as a *ConditionFailedError naming it; the append then
// writes nothing, and the condition's stream is never written. This widens a
// consistency boundary past one stream (a decision taken on a course and a student,
// recorded in the course's stream) on both engines, the local one and JetStream's.
//
// Events may carry tags (pipeline.Event.Tags), and a condition may be a query over
// them: NoneMatching(q, after) holds while no event matching q (all of an item's
// tags, one of its types when it names types) was appended after position after,
// the position ReadQuery returned with the events a decision read. Every append of
// an event with a tag also writes the tag's marker, a key holding the position of
// the last such commit, with PutAtCommit (unchecked, so appends sharing a tag never
// conflict with each other); the condition reads the lowest of its item's markers
// with tracking, so an append of a matching event that lands first makes it
// conflict, and scans the log between the allowed position and that marker for a
// match only when the marker moved past it. That is the dynamic consistency
// boundary of Axon Framework 5 and EventSourcingDB, kept in the same commit as the
// append's own expected revision. A query item must name a tag; events added with
// pipeline.Txn.AddEvents write no marker and are not seen by conditions.
//
// A store may keep indexes (Config.Indexes, NewWithConfig): by event type, by the
// stream's category, by tag, or by values a selector function returns. Each append
// writes its events' entries in its own commit, keyed by log position with
// pipeline.Txn.PutKeyAtCommit, so an index is never behind the log; ReadIndex and
// ReadIndexBackward read the events under one value in log order from any place
// (PositionAt turns a time into one), bounded by the position published when they
// start, so reading on never misses or repeats an event. Reclaim deletes entries with
// the records they shadow; Verify recounts them against the log. The indexes of a
// database are fixed, in a process, by its first Store; one declared later is built
// over the stored events before the Store is returned.
//
// A projection (StartProjection) commits its read model with its position, so it
// applies each event exactly once. StartParallelProjection runs one with several
// workers that share its streams (a stream's events stay in order, each worker keeps
// its own position). Rebuild replaces a read model without downtime: the new version
// builds into its own families while readers, resolving the version through an
// alias (Alias) in their transaction, keep reading the old one, and the alias swaps
// in one commit once the new version has caught up.
//
// The events themselves live in the commit's log entry, once: the store keeps per
// stream a head and one small record per event naming the log position and the index
// in the entry, written with the commit through pipeline.Txn.PutAtCommit. So a
// subscriber of the log sees every event exactly once, in commit order, and a replay
// of the log (pipeline.DB.Replay, Rebuild) rebuilds the streams with everything else.
// ReadStream reads the records at a snapshot and waits for the publication of the
// commits they name, so it never returns less than an Append has already seen.
//
// This package uses only the core's public API (pipeline.DB.LayerFamily,
// Txn.Get/Put/AddEvents/PutAtCommit/PutKeyAtCommit, DB.View, DB.Entry, DB.WaitForPosition); the
// core knows nothing of its key layout (see Store).
package eventstore
