package storage

import (
	"bytes"
	"fmt"
	"os"

	"github.com/linxGnu/grocksdb"
)

// Checkpoint writes a consistent, openable copy of the whole database into dir, which
// must not exist yet (RocksDB hard-links SST files where it can, so it is cheap on the
// same filesystem). The copy holds every write acknowledged before the call. On a
// secondary (Options.Secondary) it copies the primary's files as this secondary last
// caught up with them, plus the primary's write-ahead log: what a crash of the primary
// would leave, so it holds at least what the secondary sees; RocksDB fails it when the
// primary has deleted a file meanwhile (CatchUp and try again). A read-only open fails
// with ErrReadOnly.
func (db *DB) Checkpoint(dir string) error {
	if db.opts.ReadOnly && db.opts.Secondary == "" {
		return ErrReadOnly
	}
	if dir == "" {
		return &ConfigError{Field: "checkpoint dir", Value: dir, Expected: "a folder name"}
	}
	if _, err := os.Stat(dir); err == nil {
		return &ConfigError{Field: "checkpoint dir", Value: dir, Expected: "a folder that does not exist yet"}
	}
	if err := db.enter(); err != nil {
		return err
	}
	defer db.leave()
	cp, err := db.native.NewCheckpoint()
	if err != nil {
		return mapError("checkpoint", err)
	}
	defer cp.Destroy()
	return mapError(fmt.Sprintf("checkpoint into %s", dir), cp.CreateCheckpoint(dir, 0))
}

// DeleteRange deletes every key of f in [start, end) atomically, with one range
// tombstone. start after end is refused (*ConfigError naming "range start"): RocksDB would write the
// tombstone to the WAL, fail to apply it and stop taking writes.
func (db *DB) DeleteRange(f *Family, start, end []byte) error {
	if db.opts.ReadOnly {
		return ErrReadOnly
	}
	if err := db.check(f); err != nil {
		return err
	}
	if bytes.Compare(start, end) > 0 {
		return &ConfigError{Field: "range start", Value: start, Expected: fmt.Sprintf("a key not after the range end %q", end)}
	}
	if err := db.enter(); err != nil {
		return err
	}
	defer db.leave()
	h, err := f.pin("delete range")
	if err != nil {
		return err
	}
	defer f.unpin()
	if f.physicallyDropped() {
		return fmt.Errorf("rockline: delete range in dropped family %q: %w", f.name, errRetired)
	}
	return mapError("delete range", db.native.DeleteRangeCF(db.wo, h, start, end))
}

// CompactRange compacts the keys of f in [start, end) (nil for unbounded ends) down to
// the bottommost level, waiting until it is done: deleted and overwritten data and
// tombstones are dropped, and the family's space on disk shrinks to its live data. It
// fails with ErrReadOnly on a read-only database.
func (db *DB) CompactRange(f *Family, start, end []byte) error {
	if db.opts.ReadOnly {
		return ErrReadOnly
	}
	if err := db.check(f); err != nil {
		return err
	}
	if start != nil && end != nil && bytes.Compare(start, end) > 0 {
		return &ConfigError{Field: "range start", Value: start, Expected: fmt.Sprintf("a key not after the range end %q", end)}
	}
	if err := db.enter(); err != nil {
		return err
	}
	defer db.leave()
	h, err := f.pin("compact")
	if err != nil {
		return err
	}
	defer f.unpin()
	if f.physicallyDropped() {
		return fmt.Errorf("rockline: compact dropped family %q: %w", f.name, errRetired)
	}
	db.native.CompactRangeCF(h, grocksdb.Range{Start: start, Limit: end})
	return nil
}
