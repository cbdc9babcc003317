package validators

import (
	"fmt"
)

// Factory makes a validator over the environment and options the local engine gives
// it: New's signature without the policy name, the form in which a validator written
// outside this package is plugged into a database (pipeline.Config.Validator).
type Factory func(env Env, o Options) (Validator, error)

// Writer is the writer queue the built-in policies write through, for a validator
// written outside this package: it takes validated commits, assigns them the next
// dense log positions, writes them with their log entries (and the dense watermark)
// as one batch, fills the positions when the write fails, publishes them, and reports
// the Validated and Written stages to Env.Observe. Commits handed to Write by
// different goroutines at the same time are grouped, so one storage write serves
// several of them.
//
// What stays the validator's: deciding which commits may land (conflicts, Checks,
// context), and recording the positions at which the written ones landed for later
// decisions. Write returns only after the commits' positions are published, so a
// validator that records after Write returns must keep every commit that could
// conflict with one of them from being decided until it has recorded (the built-in
// policies hold the commits' bucket locks, or the queue's leadership, across the
// write for the same reason).
type Writer struct {
	c core // env only: a Writer keeps no conflict table
	q leaderQueue
}

// NewWriter returns the writer queue over env. It fails with an error matching
// ErrInvalidEnv when env lacks a field a write needs (Positions, Write, Log, LogKey,
// Filler).
func NewWriter(env Env) (*Writer, error) {
	if err := env.check(false); err != nil {
		return nil, err
	}
	w := &Writer{c: core{env: env}}
	w.q = leaderQueue{process: w.c.writeSurvivors}
	return w, nil
}

// Write writes reqs, in order, at consecutive positions, and returns once their
// positions are published or the write failed: it sets each request's Pos on success
// and Err otherwise (the write's error, or one matching ErrStopped once the positions
// are stopped). Every request must have passed the caller's validation and must not
// be empty (a Commit with no Ops and no HasRecord gets position 0 without a write, and
// is not to be handed here) and must carry its Record (ErrInvalidEnv otherwise). Write
// is safe for concurrent use.
func (w *Writer) Write(reqs []*Request) {
	due := make([]*Request, 0, len(reqs))
	for i, r := range reqs {
		switch {
		case r.Commit.empty():
			r.Err = fmt.Errorf("validators: Writer.Write: request %d is an empty commit, which has nothing to write", i)
		case r.Commit.Record == nil:
			r.Err = fmt.Errorf("%w: Writer.Write: request %d has no Record", ErrInvalidEnv, i)
		default:
			due = append(due, r)
		}
	}
	w.q.do(due)
}
