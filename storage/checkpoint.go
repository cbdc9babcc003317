package storage

import (
	"bytes"
	"fmt"
	"os"
)

// Checkpoint writes a consistent, openable copy of the whole database into dir, which
// must not exist yet (RocksDB hard-links SST files where it can, so it is cheap on the
// same filesystem). The copy holds every write acknowledged before the call.
func (db *DB) Checkpoint(dir string) error {
	if dir == "" {
		return &OptionsError{Field: "checkpoint dir", Value: `""`, Reason: "must name a folder"}
	}
	if _, err := os.Stat(dir); err == nil {
		return &OptionsError{Field: "checkpoint dir", Value: dir, Reason: "must not exist yet"}
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
// tombstone. start after end is refused (*OptionsError): RocksDB would write the
// tombstone to the WAL, fail to apply it and stop taking writes.
func (db *DB) DeleteRange(f *Family, start, end []byte) error {
	if err := db.check(f); err != nil {
		return err
	}
	if bytes.Compare(start, end) > 0 {
		return &OptionsError{Field: "range", Value: fmt.Sprintf("[%q, %q)", start, end), Reason: "start must not come after end"}
	}
	if err := db.enter(); err != nil {
		return err
	}
	defer db.leave()
	if f.physicallyDropped() {
		return fmt.Errorf("rockline: delete range in dropped family %q: %w", f.name, errRetired)
	}
	return mapError("delete range", db.native.DeleteRangeCF(db.wo, f.handle, start, end))
}
