package pipeline

import (
	"errors"

	"github.com/rockline/rockline/internal/logentry"
	"github.com/rockline/rockline/storage"
	"github.com/rockline/rockline/validators"
)

// Control leaves this package on the commit path at two seams, and comes back
// through them:
//   - the lanes' run function, db.runTasks (commit.go's caller on a lane goroutine:
//     lanes is generic over a task and imports nothing of ours, so that is its one
//     callback);
//   - the validator's environment, validators.Env, built here: everything the
//     validator calls back into while it validates, assigns, writes and publishes.

// commitOwner is what the pipeline hangs on validators.Commit.Owner, so that the
// environment's per-commit callbacks find their commit's state: how its log entry is
// encoded (a transaction's, or a family change's record) and the trace of its stages
// (set once the commit enters the validator; nil until then).
type commitOwner struct {
	entry func(b *storage.Batch, dst []byte, pos uint64, unixNano int64) ([]byte, error)
	trace *stageTrace
}

// errNoOwner reports a commit handed to the validator without a *commitOwner, a bug
// of this package; its group's write fails (and is filled) rather than panicking.
var errNoOwner = errors.New("rockline: internal error: a commit without its owner reached the validator")

// validatorEnv returns the environment the validator calls back into: the sequencer,
// storage, the log's encodings, and the per-commit callbacks, which reach the commit's
// state through its commitOwner.
func (db *localDB) validatorEnv() validators.Env {
	st := db.store
	return validators.Env{
		Positions: db.seq,
		Write:     db.writeCommit,
		Read:      func(f *storage.Family, key []byte) ([]byte, error) { return st.Get(f, key, nil) },
		Log:       db.log,
		LogKey:    logentry.AppendKey,
		Filler:    appendFiller,
		Entry: func(c *validators.Commit, b *storage.Batch, dst []byte, pos uint64, unixNano int64) ([]byte, error) {
			o, ok := c.Owner.(*commitOwner)
			if !ok || o.entry == nil {
				return dst, errNoOwner
			}
			return o.entry(b, dst, pos, unixNano)
		},
		Observe: func(c *validators.Commit, s validators.Stage) {
			if o, ok := c.Owner.(*commitOwner); ok && o.trace != nil {
				o.trace.observe(s)
			}
		},
	}
}
