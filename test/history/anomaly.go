package history

import (
	"fmt"
	"slices"
	"strings"
)

// Anomaly kinds the checker reports. The dependency cycles are Adya's, as Elle names
// them; the others are what a list-append history shows directly.
const (
	// G0: a cycle of write-write dependencies only (dirty write).
	G0 = "G0"
	// G1a: an OK read saw an element appended by a transaction that failed (aborted read).
	G1a = "G1a"
	// G1b: an OK read ended at an element that was not its writer's last append to the
	// key (intermediate read).
	G1b = "G1b"
	// G1c: a cycle of write-write and write-read dependencies (circular information flow).
	G1c = "G1c"
	// GSingle: a cycle with exactly one read-write anti-dependency (read skew).
	GSingle = "G-single"
	// G2: a cycle with two or more anti-dependencies (write skew and worse).
	G2 = "G2"
	// Realtime is appended to a cycle's kind when the cycle needs a real-time edge (T1
	// completed before T2 was invoked): serializable, not strictly serializable.
	Realtime = "-realtime"

	// Internal: a read inside a transaction did not show the transaction's own earlier
	// appends to that key.
	Internal = "internal"
	// IncompatibleOrder: two OK reads of one key are not prefixes of one another.
	IncompatibleOrder = "incompatible-order"
	// DuplicateElements: a read holds an element twice.
	DuplicateElements = "duplicate-elements"
	// GarbageRead: a read holds an element no transaction appended to that key, or a
	// value that does not decode.
	GarbageRead = "garbage-read"
	// LostAppend: an append of a committed transaction (OK, or unknown but seen by a
	// read) is missing from the final read of its key.
	LostAppend = "lost-append"
	// UntypedError: a Commit error matched no documented sentinel, so the client cannot
	// tell whether the commit landed.
	UntypedError = "untyped-error"

	// MissingFromLog: an acknowledged commit has no log entry at the position returned.
	MissingFromLog = "missing-from-log"
	// PositionNotCommit: the log entry at an acknowledged commit's position is not that
	// commit (a filler or abort marker, or another transaction's writes).
	PositionNotCommit = "position-not-commit"
	// FailedInLog: a log entry holds the writes of a transaction that failed.
	FailedInLog = "failed-in-log"
	// DuplicateInLog: one transaction's writes are in more than one log entry.
	DuplicateInLog = "duplicate-in-log"
	// LogMismatch: a log entry's writes are not one transaction's appends on top of the
	// key's previous value in the log.
	LogMismatch = "log-mismatch"
	// SubscriptionSkip, SubscriptionRepeat, SubscriptionMismatch: a subscriber from
	// position 0 did not deliver the log's entries exactly once, in order, as stored.
	SubscriptionSkip     = "subscription-skip"
	SubscriptionRepeat   = "subscription-repeat"
	SubscriptionMismatch = "subscription-mismatch"
)

// Anomaly is one defect found in a history: its kind, the transactions involved (by
// ID), the key (-1 when none) and what was seen.
type Anomaly struct {
	Kind   string
	Txns   []int
	Key    int
	Detail string
}

// String is a one-line description.
func (a Anomaly) String() string {
	s := a.Kind
	if a.Key >= 0 {
		s += fmt.Sprintf(" key %d", a.Key)
	}
	if len(a.Txns) > 0 {
		var ids []string
		for _, id := range a.Txns {
			ids = append(ids, fmt.Sprintf("T%d", id))
		}
		s += " " + strings.Join(ids, ",")
	}
	return s + ": " + a.Detail
}

// Result is the checker's verdict on a history.
type Result struct {
	Anomalies []Anomaly
	Counts    map[Outcome]int
}

// Valid reports whether no anomaly was found.
func (r *Result) Valid() bool { return len(r.Anomalies) == 0 }

// Add appends anomalies found by another check (the log's, the subscription's).
func (r *Result) Add(as ...Anomaly) { r.Anomalies = append(r.Anomalies, as...) }

// Kinds returns how many anomalies of each kind were found.
func (r *Result) Kinds() map[string]int {
	out := map[string]int{}
	for _, a := range r.Anomalies {
		out[a.Kind]++
	}
	return out
}

// Summary is one line: the outcome counts and the anomaly kinds with their counts.
func (r *Result) Summary() string {
	s := fmt.Sprintf("%d ok, %d failed, %d unknown", r.Counts[OK], r.Counts[Failed], r.Counts[Unknown])
	kinds := r.Kinds()
	if len(kinds) == 0 {
		return s + "; no anomalies"
	}
	var ks []string
	for k, n := range kinds {
		ks = append(ks, fmt.Sprintf("%s×%d", k, n))
	}
	slices.Sort(ks)
	return s + "; anomalies: " + strings.Join(ks, " ")
}

// Involved returns the IDs of the transactions the anomalies name, sorted.
func (r *Result) Involved() []int {
	seen := map[int]bool{}
	var out []int
	for _, a := range r.Anomalies {
		for _, id := range a.Txns {
			if !seen[id] {
				seen[id] = true
				out = append(out, id)
			}
		}
	}
	slices.Sort(out)
	return out
}
