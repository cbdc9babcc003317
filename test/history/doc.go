// Package history is rockline's history test in the manner of Jepsen, with a checker
// in the manner of Elle, for every engine behind pipeline.DB.
//
// Concurrent clients run list-append transactions through the public API (Begin, Get,
// Put, CommitPosition): each reads keys that hold lists of integers and appends unique
// elements to them. A Recorder keeps every transaction with its invoke and completion
// times, its operations and its outcome: ok, failed (definitely not committed) or
// unknown, from the engine's Classifier of Commit errors (an error matching no
// documented sentinel is reported as untyped). After the faults and a recovery, a final
// read of every key ends the history.
//
// Check (check.go) derives each key's version order from the longest read, builds the
// write-write, write-read and read-write dependencies between the committed
// transactions as Elle does (and real-time edges for strict serializability), finds
// cycles with Tarjan's strongly connected components and classifies each by its
// weakest cycle: G0, G1c, G-single, G2 (graph.go, cycles.go). It also reports aborted
// (G1a) and intermediate (G1b) reads, garbage and duplicate elements, incompatible
// orders, reads that miss the transaction's own appends, lost appends and untyped
// errors. CheckLog, CheckPositions and CheckSubscription (logcheck.go) hold the log to
// the history: every acknowledged commit in the log once, at the position Commit
// returned, nothing of a failed one, and a subscriber from position 0 that delivered
// the log exactly once, in order.
//
// The local engine's test (local_test.go) runs the workload in child processes on one
// RocksDB folder and SIGKILLs them; the JetStream engine's (jetstream/history_test.go
// in the jetstream module) runs it on a 3-node cluster under stops, SIGKILLs,
// network partitions and cut connections. Short forms run in `make test`; the long
// form, ROCKLINE_HISTORY_RUNS=20, in `make crash`. A failing run prints its seed
// (ROCKLINE_HISTORY_SEED replays the generator and the fault schedule) and writes its
// history as JSON lines.
package history
