package validators

import (
	"fmt"

	"github.com/rockline/rockline/storage"
)

// Env is everything a validator calls back into, given once to New: storage writes
// and reads, the log's key and filler encodings, and the source of log positions.
// Each commit's own callbacks (its log entry, its stage reports) are its Record. The pipeline builds one per database; a
// test builds a fake, so what a validator decides, assigns, writes and fills can be
// checked without RocksDB (as Pebble tests its commit pipeline against a commitEnv).
//
// Where the fields run: a validator is called concurrently by the lanes and by
// inline committers. Fields marked "writer" are called by the goroutine that writes a
// group of commits: the writer queue's leader (leader.go), which assigns the group's
// positions and hands leadership on, then writes the group while the next leader
// assigns the next one. So writer calls for different groups may run at once (each
// group's on one goroutine, in order), while the group holds its commits' bucket locks
// (parallel) or was validated by the queue's leader (serial). A writer call must be
// quick, must not wait for another commit and must not call into the validator. The
// fields named required must be set; New refuses an Env without them.
type Env struct {
	// Positions hands out the log's dense positions and publishes them (see
	// Positions). Required.
	Positions Positions
	// Write applies b to storage atomically: every write in it lands or none does.
	// Writer: one call per group of validated commits, and one per batch of fillers
	// after a failed write; calls for different groups may overlap, so it must be
	// safe for concurrent use. An error fails the group's commits with that error,
	// once their positions are filled. Required.
	Write func(b *storage.Batch) error
	// Read returns the committed value of key in f, or an error matching
	// storage.ErrNotFound. Checks read through it (their View adds the writes of
	// earlier members of the group). It runs where Checks run: on the validating
	// goroutine, concurrently for different commits under the parallel policy, so it
	// must be safe for concurrent use. Required when Options.Checks is not empty.
	Read func(f *storage.Family, key []byte) ([]byte, error)
	// Log is the family that holds log entries and DenseKey. Required.
	Log *storage.Family
	// LogKey appends the Log key of position pos to dst and returns it. Writer;
	// it must not fail. Required.
	LogKey func(dst []byte, pos uint64) []byte
	// Filler appends the log entry of a filler (no events, no writes) at pos to dst
	// and returns it. Writer; it must not fail. Required.
	Filler func(dst []byte, pos uint64) []byte
}

// Positions is the source of log positions as a validator sees it: the pipeline's
// sequencer, which publishes positions to readers (Pebble's visible sequence number,
// Badger's oracle). A validator assigns positions to one group at a time, from the
// writer queue's leader, and closes every assignment with exactly one Publish or Stop.
// Several assignments may be open at once (groups written side by side); they are
// published in the order they were assigned.
type Positions interface {
	// Published returns the highest position p such that every position up to p is
	// written and visible. Any goroutine.
	Published() uint64
	// Oldest returns the lowest read position of any open transaction, or Published
	// when none is open: no open or future transaction reads below it. Any goroutine;
	// the conflict table is pruned up to it.
	Oldest() uint64
	// Err returns the error, matching ErrStopped, that stopped the positions, or nil.
	// Any goroutine.
	Err() error
	// Assign opens an assignment of the n (>= 1) positions after the last assigned
	// and returns the first. Called by the writer queue's leader only, so one
	// assignment at a time, in order; earlier ones may still be open. It may wait (a
	// checkpoint holds new assignments back), and it fails with the stop error once
	// the positions are stopped.
	Assign(n int) (first uint64, err error)
	// Publish closes the open assignment first..last once all of it is in storage
	// (data and entry, or fillers), and returns once every earlier assignment is
	// closed too: the positions become visible in order and their waiters wake.
	// Writer. It fails, with an error matching ErrStopped, once the positions are
	// stopped (also while it waits for earlier ones), and stops them itself when
	// first..last is not an open assignment.
	Publish(first, last uint64) error
	// Stop closes the open assignment when position pos (one of it) can be neither
	// written nor filled: waiters wake, and Err and every later Assign return an
	// error matching ErrStopped that wraps cause. Writer.
	Stop(pos uint64, cause error)
}

// check reports the first required field e lacks, with an error matching
// ErrInvalidEnv.
func (e *Env) check(checks bool) error {
	missing := ""
	switch {
	case e.Positions == nil:
		missing = "Positions"
	case e.Write == nil:
		missing = "Write"
	case e.Log == nil:
		missing = "Log"
	case e.LogKey == nil:
		missing = "LogKey"
	case e.Filler == nil:
		missing = "Filler"
	case checks && e.Read == nil:
		missing = "Read (Options.Checks are set)"
	default:
		return nil
	}
	return fmt.Errorf("%w: Env.%s is not set", ErrInvalidEnv, missing)
}
