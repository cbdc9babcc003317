// Package jetstream is rockline's second engine: one partition of a rockline
// database stored in one NATS JetStream stream, replicated by JetStream's Raft (3
// replicas by default), with the same commit shape as the local engine: tracked reads,
// writes checked against the version read, events, one atomic write per commit, a
// dense ordered log, snapshot reads at a log position and subscriptions that never
// skip or repeat. Engine implements pipeline.Engine over a Partition (engine.go), so
// pipeline.OpenEngine, or OpenDB here, gives a *pipeline.DB on JetStream and every
// layer on the core's public API runs on it unchanged: the event store, projections,
// the partitioned store (package partitioned, one rockline database per partition),
// the fx module (package jetstreamfx). The module's README.md summarises the study
// behind it: why JetStream, what a partition gives up, the durability it needs.
//
// # Packaging
//
// This package is its own Go module, github.com/rockline/rockline/jetstream, with a
// replace directive to the core in the parent folder. NATS (nats-server for the
// embedded test cluster, nats.go for the client, and their 9 indirect modules) is in
// this module's go.mod only, so an application that uses the local engine does not
// download, build or link NATS: `go list -deps ./pipeline` in the core shows no
// nats-io. A package inside the core module could keep NATS out of the binary too,
// but not out of the core's go.mod and go.sum, nor out of MVS, where nats-server's
// requirements (golang.org/x/crypto, klauspost/compress) would raise the core's. The
// module imports the core for its error sentinels (ErrConflict, ErrClosed, ...) and
// event type, so errors.Is works the same for both engines.
//
// # Subjects and messages
//
// A partition's stream holds every subject under its prefix P (Config.Subject):
// P.k.<family>.<key> per key, P.e.<stream> per event stream, P.m for read markers,
// P.c for commit markers and P.x for probes (see subjects.go). A commit is one atomic
// batch (Nats-Batch-Id, -Sequence, -Commit) of, in order: its events (Nats-Msg-Id
// "e:"+ID when the event has an ID; the first event of a checked stream carries the
// stream's expectation), its writes (Nats-Expected-Last-Subject-Sequence = the version
// read, on the key's only message in the batch; none for a blind write), one read
// marker per key read but not written and per stream checked without events
// (Nats-Expected-Last-Subject-Sequence-Subject naming it), and last a commit marker on
// P.c carrying Rl-Txn and Nats-Msg-Id "c:"+batch ID. At most 1,000 messages; each at
// most the server's max_payload (headers included); subjects at most MaxSubjectLen.
// Input that does not fit is refused before anything is sent, with a *LimitError
// naming the field and the limit.
//
// # Positions
//
// A version is a stream sequence: a key's version is the sequence of its last
// message (0: never written), a stream's the sequence of its last event. A commit's
// position is its commit marker's sequence. A batch is stored at consecutive
// sequences, so commits partition the sequence space: positions increase, and the
// messages between two consecutive positions are exactly one commit (dense in
// messages, not in commits).
//
// # Snapshot reads
//
// Get and StreamHead at position P are one Direct Get with multi_last over the
// subjects asked for plus P.c, and up_to_seq P. Scan and Iterator (scan.go) list the
// family's subjects from the stream leader (STREAM.INFO subjects_filter, 100,000 a
// page), sort the keys, and read values in windows of up to MaxMultiGet-1 subjects
// the same way, forward or backward, so a family of any size can be read. JetStream serves direct gets from
// every replica, isolated from batch commits, but a follower may not have applied P
// yet; the commit marker is the fence: its last sequence at or below P must be P
// itself, otherwise the read is retried (backing off) until Config.ReadTimeout.
// Position asks the stream leader (STREAM.MSG.GET last_by_subj P.c), so it is current.
//
// # Conflicts and the pitfalls of the server
//
// 10071 (wrong last sequence) is a conflict: the engine re-reads the checked subjects
// to name the key or stream in the *ConflictError. 10164 (subject in flight) also
// comes right after another commit's ack, because the server clears its in-flight
// mark after acking: the engine re-reads, and sends a new batch only if every version
// it expects is unchanged (up to Config.InFlightRetries times), else reports the
// conflict. A conflict is reported only after the refused batch is fenced by an abort
// marker (see the known limits: a refusal may come from a stale leader). 10201 (a message ID already stored, with no sequence): each event ID is
// looked up with a probe (a publish carrying the ID and an expectation that always
// fails: the server checks IDs first and answers a duplicate with the original's
// sequence, and stores nothing otherwise); when all belong to one commit, that
// commit's position is returned, so a retry within the dedupe window is idempotent.
// A publish that times out may have landed and is never sent again: the engine
// publishes an abort marker with the commit marker's message ID; answered as a
// duplicate, it yields the commit's position; stored, it proves the commit can no
// longer land (ErrTimeout); unresolved by Config.ResolveTimeout, ErrOutcomeUnknown.
// A duplicate answer is read back first: an earlier abort marker of the same batch
// (an attempt whose answer was lost but which was stored) carries the same message
// ID, and then the batch was fenced out there, never landed. Every error of Commit
// says through a sentinel whether the commit was written (see Partition.Commit).
//
// # Durability, and the server settings rockline requires
//
// A commit is acknowledged once a quorum of the stream's replicas has written it;
// nats-server fsyncs a file store only every 2 minutes unless sync_interval: always
// is set, so by default "written" means in the OS page cache. Jepsen's analysis of
// NATS 2.12.1 (December 2025) lost acknowledged writes to a coordinated power loss
// under the default, and to one node's OS crash combined with pauses or partitions;
// process crashes alone lost nothing. What an acknowledged commit survives:
//
//	                                 R3, sync always   R3, default sync   R1, sync always
//	one process killed (SIGKILL)     yes               yes                yes, once it restarts
//	every process killed             yes               yes                yes
//	OS crash / power loss, minority  yes               not always (1)     no, if it is the node
//	OS crash / power loss, all       yes               no                 yes
//	a minority's files corrupted     detected (2)      detected (2)       detected (2), not repaired
//
//	(1) lost when combined with pauses or a partition (Jepsen, nats-server 7564, 7567).
//	(2) a read of a corrupted message fails with *CorruptMessageError; a read that
//	    reaches a replica with a sound copy succeeds.
//
// rockline requires: nats-server 2.12 or later with JetStream (atomic batch publish;
// tested with 2.15.3), file storage, Config.Replicas 3 (or 5) for availability and
// for surviving a node's loss, and sync_interval: always on every node for an
// acknowledged commit to survive an OS crash or power loss. The test clusters
// (jstest), make demo-cluster and the benchmark harness run always; the harness's
// cluster scenario measures the default beside it. A client of an ordinary account
// cannot read a server's sync setting (it is in the server's varz, which only the
// system account sees), so Open does not check it: it is the operator's to set.
//
// JetStream does not check the content of what it replicates: a bit flip in one
// replica's files is served as it is. Every key and event message a commit writes
// carries a CRC-32C of its subject, meaningful headers and data (checksum.go), and
// every reader verifies it, so such a message is a *CorruptMessageError
// (pipeline.ErrCorrupt), never wrong data.
//
// # Subscriptions
//
// Subscribe reads with an ordered consumer from the position after the one given, and
// regroups each commit's consecutive messages into one Entry, delivered when its
// commit marker arrives. The ordered consumer recreates itself on a gap from the last
// stream sequence it delivered, so nothing is skipped or repeated; the subscription
// checks that sequences only increase and that a commit's messages share its batch ID.
//
// # Transactions and the conformance suite
//
// Partition.Begin returns a Txn with the local engine's rules on top of Commit: reads
// at the position it began at, each tracked (its version becomes a read check or the
// expectation of the key's write); blind writes read their key's version at Commit,
// so they conflict as on the local engine; Append checks an expected revision against
// the stream's tail at the position (StreamTail) and its version at Commit, and
// recognises an append already made (all event IDs at the revisions expected), with
// the event store's own rules (package eventstore/revision, which the engine imports
// instead of the event store: the engine stays below the layers built on pipeline);
// CheckStream checks a stream's revision the same way without appending to it, and
// its version at Commit (the event store's StreamAt condition). ReadStream reads a
// stream's events with an ordered consumer. The core's conformance suite (github.com/rockline/rockline/test/conformance)
// runs against a Partition through these, and through the public API on a DB from
// OpenDB with the same adapter as the local engine's run (conformance_test.go).
//
// # Positioned writes, entries by position, family generations
//
// Write.AtCommit stores a payload whose value is made, on every read, from the
// commit's position: the message carries its distance to the commit marker
// (positioned.go). Entry and ReadLog read commits by position with Direct Get by
// sequence and return the Entry a subscription delivers (log.go). Families have
// generations, recorded in a catalog inside the stream; a Txn checks the catalog, so
// a drop fails every commit that read or wrote the family before it (families.go).
// A layer's family ("rockline." prefix) can be neither created nor dropped, and is
// not checked.
//
// # Retention
//
// Truncate drops the log (events, markers) up to a position and records the point in
// the stream's metadata; keys keep their history, because the latest version of a
// key is its value. PurgeFamily removes a family's keys (generation 1) at every
// position; PurgeGeneration a dropped generation's.
//
// # Known limits of this foundation
//
//   - A hot key, written or only read, allows one commit in flight: concurrent checks
//     of one subject meet 10164 and are re-read and re-sent.
//   - Scan and Iterator list every key the family ever had (tombstones included) on
//     each open: the cost grows with the family, not with the range read.
//   - Idempotence by event ID holds within the dedupe window and one partition; every
//     commit also keeps one message ID (its marker's) in the server's dedupe map for
//     that window.
//   - Every key is a subject, and JetStream keeps per-subject state in memory; key
//     history is never compacted (Truncate keeps it).
//   - R1 file streams commit far slower than R3 (see Config.Replicas).
//   - Only acks need a quorum, refusals do not: a leader cut off from the others
//     keeps leading its old term for up to 10 s (nats-server's lostQuorumInterval)
//     and, once the partition heals, can refuse a batch the new leader stores, and
//     answer first. So Commit never reports a refusal (10071, or 10164 with the
//     expectations changed) as a conflict before fencing the batch with an abort
//     marker carrying its commit marker's message ID, as for a timeout: a duplicate
//     answer means the batch landed (its position is returned, Stats.StaleRefusals
//     counts it); a stored marker means it never will. The price is one replicated
//     write, and one empty Aborted log entry, per conflict. A batch the new leader is
//     still proposing when the marker is checked is not in its dedupe map, so both
//     land, the batch first: after a stored marker the engine reads the commit
//     markers just below it and reports the batch committed if its Rl-Txn is there
//     (fence.go, Stats.LandedBelow): those between the transaction's read position
//     and the marker; for a raw Commit without Commit.After, those younger than the
//     batch's first send less 2 s (a client clock more than 2 s ahead of the server's
//     could stop that search early). A refusal with "subject in flight" is re-sent
//     under the same batch ID, so if the refused copy landed after all, the re-send
//     is answered as a duplicate of its commit marker and its position returned.
//   - Through a cut-off leader, commits fail as ErrOutcomeUnknown (a timeout that
//     cannot be resolved) and then, as their subject stays marked in flight, as
//     *ConflictError after InFlightRetries re-sends, with Expected equal to Actual.
package jetstream
