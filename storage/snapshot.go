package storage

import (
	"errors"
	"sync"

	"github.com/linxGnu/grocksdb"
)

// ErrReleased is returned by reads through a snapshot or iterator after its Release or Close.
var ErrReleased = errors.New("rockline: snapshot or iterator already released")

// Snapshot is a consistent, read-only view of the database at the moment it was taken.
// It must be released; Close releases snapshots still open. Families dropped after it
// was taken stay readable through their *Family while it is open (their native
// handles are freed after its release).
//
// Invariant: ro and snap are valid while released is false; they are freed under
// mu's write lock, and readers hold mu for reading.
type Snapshot struct {
	db       *DB
	mu       sync.RWMutex
	released bool
	snap     *grocksdb.Snapshot
	ro       *grocksdb.ReadOptions
	epoch    uint64 // the drop epoch it was taken in (handles.go)
}

// NewSnapshot pins the current state of the database. A secondary (Options.Secondary)
// has no snapshots in RocksDB 7.8: its Snapshot reads the state as of the last
// CatchUp, which only CatchUp changes.
func (db *DB) NewSnapshot() (*Snapshot, error) {
	if err := db.enter(); err != nil {
		return nil, err
	}
	defer db.leave()
	s := &Snapshot{db: db, ro: grocksdb.NewDefaultReadOptions()}
	if db.opts.Secondary == "" {
		s.snap = db.native.NewSnapshot()
		s.ro.SetSnapshot(s.snap)
	}
	db.trackSnapshot(s)
	return s, nil
}

// Release frees the snapshot, and the handles of dropped families only it still
// pinned. It is idempotent and safe after the database closed.
func (s *Snapshot) Release() {
	if s == nil || s.db.enter() != nil {
		return // Close already released it.
	}
	defer s.db.leave()
	s.db.untrackSnapshot(s)
	s.releaseLocked()
	s.db.freeUnpinned()
}

// releaseLocked frees the native objects; the caller holds the database gate.
func (s *Snapshot) releaseLocked() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.released {
		return
	}
	s.released = true
	s.ro.Destroy()
	if s.snap != nil {
		s.db.native.ReleaseSnapshot(s.snap)
	}
}

// readOptions returns the read options for s (the database's default when s is nil);
// it fails when s was released or belongs to another database. On success s (if not
// nil) is held for reading until the caller calls s.endRead, so Release waits for the
// read to leave native code.
func (db *DB) readOptions(s *Snapshot) (*grocksdb.ReadOptions, error) {
	if s == nil {
		return db.ro, nil
	}
	if s.db != db {
		return nil, ErrForeignSnapshot
	}
	s.mu.RLock()
	if s.released {
		s.mu.RUnlock()
		return nil, ErrReleased
	}
	return s.ro, nil
}

// endRead ends a read that readOptions(s) started; it does nothing for a nil s.
func (s *Snapshot) endRead() {
	if s != nil {
		s.mu.RUnlock()
	}
}
