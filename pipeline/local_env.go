package pipeline

import (
	"github.com/rockline/rockline/internal/logentry"
	"github.com/rockline/rockline/storage"
	"github.com/rockline/rockline/validators"
)

// Control leaves this package on the commit path at two seams, and comes back
// through them:
//   - the lanes' run function, db.runTasks (local_record.go), on a lane goroutine:
//     lanes is generic over its task, a *commitRecord, and imports nothing of ours,
//     so that is its one callback;
//   - the validator's environment, validators.Env, built here, and each commit's
//     validators.Record, its commitRecord (local_record.go): everything the validator
//     calls back into while it validates, assigns, writes and publishes.

// validatorEnv returns the environment the validator calls back into: the sequencer,
// storage and the log's encodings. Each commit's own callbacks are its commitRecord.
func (db *localDB) validatorEnv() validators.Env {
	st := db.store
	return validators.Env{
		Positions: db.seq,
		Write:     db.writeCommit,
		Read:      func(f *storage.Family, key []byte) ([]byte, error) { return st.Get(f, key, nil) },
		Log:       db.log,
		LogKey:    logentry.AppendKey,
		Filler:    appendFiller,
	}
}
