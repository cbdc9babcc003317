package pipeline

import (
	"context"

	"github.com/rockline/rockline/storage"
	"github.com/rockline/rockline/validators"
)

// Check is an application rule that runs inside the validation step of every commit,
// after the conflict check and before the write: it sees what the commit writes
// (CommitInfo) and the state the commit applies to (CheckView). Returning an error
// rejects the commit with that error, unchanged, and nothing of it is written. A Check
// runs on the goroutine that validates the commit's group and must be quick; it must
// not begin transactions or commit. Under the parallel policy only the commit's own
// keys are locked while it runs, so a rule that depends on other keys should read
// them in the transaction instead, where they are tracked for conflicts.
type Check func(ctx context.Context, c CommitInfo, v CheckView) error

// CommitInfo is what a Check learns about the commit it judges. Its slices are valid
// only while the Check runs and must not be modified.
type CommitInfo struct {
	// ReadPosition is the published log position the transaction read at.
	ReadPosition uint64
	// Writes are the transaction's buffered writes, in order (a key written twice
	// appears twice; the later write wins).
	Writes []CheckWrite
}

// CheckWrite is one buffered write of a commit: a put of Value, or a Delete, of Key in
// Family.
type CheckWrite struct {
	Family *ColumnFamily
	Key    []byte
	Value  []byte
	Delete bool
}

// CheckView reads the state a commit applies to: the latest committed state plus,
// under the serial policy, the writes of earlier commits validated in the same group.
// It reads any family of the database, not only the ones the commit writes.
type CheckView struct {
	db *localDB
	v  validators.View
}

// Get returns the value of key in cf as the commit will see it, or ErrNotFound. A
// family of another database fails with an *ArgumentError.
func (v CheckView) Get(cf *ColumnFamily, key []byte) ([]byte, error) {
	f, err := v.db.front.family("CheckView.Get", cf)
	if err != nil {
		return nil, err
	}
	if err := checkKey("CheckView.Get", key); err != nil {
		return nil, err
	}
	val, err := v.v.Get(storageFamily(f), key)
	return val, closedErr(err)
}

// validatorChecks adapts the configured Checks to the validator's form.
func (db *localDB) validatorChecks() []validators.Check {
	out := make([]validators.Check, len(db.cfg.Checks))
	for i, check := range db.cfg.Checks {
		out[i] = func(ctx context.Context, c *validators.Commit, v validators.View) error {
			return check(ctx, db.commitInfo(c), CheckView{db: db, v: v})
		}
	}
	return out
}

// commitInfo builds a Check's read-only facts about c.
func (db *localDB) commitInfo(c *validators.Commit) CommitInfo {
	info := CommitInfo{ReadPosition: c.ReadPos, Writes: make([]CheckWrite, len(c.Ops))}
	var last *storage.Family
	var cf *ColumnFamily
	for i, op := range c.Ops {
		if op.Family != last {
			last, cf = op.Family, db.front.wrap(op.Family)
		}
		info.Writes[i] = CheckWrite{Family: cf, Key: op.Key, Value: op.Value, Delete: op.Delete}
	}
	return info
}
