package pipeline

import (
	"fmt"

	"github.com/rockline/rockline/internal/logentry"
	"github.com/rockline/rockline/storage"
)

// ErrReadOnly is returned by every write to a database opened with OpenReadOnly or
// OpenSecondary: a Put, Delete, AddEvents or any other buffered write, a family
// change, Replay, TruncateLog, and Checkpoint on an OpenReadOnly database (a
// secondary can take one).
var ErrReadOnly = storage.ErrReadOnly

// ErrNotSecondary is returned by CatchUp on a database not opened with OpenSecondary.
var ErrNotSecondary = storage.ErrNotSecondary

// OpenReadOnly opens the database in dir for reading, without its write lock: another
// process may hold it and keep writing. Reads, the log readers, stream reads and
// subscriptions see the state at Open; every write fails with ErrReadOnly and nothing
// in the folder changes (a gap a crash left is not filled: the log ends before it). A
// folder that is not a rockline database, or one written before rockline.system
// existed (open it writable once), fails.
func OpenReadOnly(dir string, cfg Config) (*DB, error) {
	return openFront(dir, cfg, openMode{readOnly: true})
}

// OpenSecondary is OpenReadOnly as a RocksDB secondary, whose own files go in
// secondaryDir (created if missing): CatchUp brings it up to what the primary has
// written since, and its subscriptions advance as it does. Families the primary
// creates later are seen after a reopen only.
func OpenSecondary(dir, secondaryDir string, cfg Config) (*DB, error) {
	if secondaryDir == "" {
		return nil, &ArgumentError{Op: "OpenSecondary", Arg: "secondaryDir", Reason: "must not be empty"}
	}
	return openFront(dir, cfg, openMode{readOnly: true, secondary: secondaryDir})
}

// ReadOnly is DB.ReadOnly on the local engine.
func (db *localDB) ReadOnly() bool { return db.store.ReadOnly() }

// CatchUp is DB.CatchUp on the local engine.
func (db *localDB) CatchUp() error {
	db.catchMu.Lock()
	defer db.catchMu.Unlock()
	if err := db.enter(); err != nil {
		return err
	}
	defer db.leave()
	if err := db.store.CatchUp(); err != nil {
		return closedErr(err)
	}
	if err := db.loadTruncation(); err != nil {
		return err
	}
	last := db.seq.Published()
	next := last
	it, err := db.store.NewIterator(db.log, storage.IterOptions{Lower: logentry.Key(last + 1)})
	if err != nil {
		return closedErr(err)
	}
	for it.First(); it.Valid(); it.Next() {
		k, _, err := it.Item()
		if err != nil {
			it.Close()
			return closedErr(err)
		}
		p, err := logentry.ParseKey(k)
		if err != nil || p != next+1 {
			break // a gap (a commit the primary is still writing) or the end
		}
		next = p
	}
	err = it.Err()
	it.Close()
	if err != nil {
		return closedErr(err)
	}
	if next == last {
		return nil
	}
	first, err := db.seq.Assign(int(next - last))
	if err != nil {
		return err
	}
	if first != last+1 {
		return fmt.Errorf("rockline: catch up: positions from %d assigned, want %d", first, last+1)
	}
	return db.seq.Publish(first, next)
}

// writable refuses a write to a read-only database.
func (db *localDB) writable() error {
	if db.store.ReadOnly() {
		return ErrReadOnly
	}
	return nil
}
