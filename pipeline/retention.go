package pipeline

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/rockline/rockline/internal/logentry"
	"github.com/rockline/rockline/storage"
)

var (
	metaTruncated    = []byte("mtruncated")    // first log position kept
	metaCheckpointed = []byte("mcheckpointed") // highest position covered by a checkpoint
)

// ErrNotCheckpointed is returned by TruncateLog for positions no checkpoint covers.
var ErrNotCheckpointed = errors.New("rockline: log positions not covered by a checkpoint")

func (db *DB) loadTruncation() error {
	v, err := db.store.Get(db.sys, metaTruncated, nil)
	if errors.Is(err, storage.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	t, n := binary.Uvarint(v)
	if n <= 0 {
		return fmt.Errorf("%w: truncation marker %x", ErrCorrupt, v)
	}
	db.truncated.Store(t)
	return nil
}

func (db *DB) metaUint(key []byte) (uint64, error) {
	v, err := db.store.Get(db.sys, key, nil)
	if errors.Is(err, storage.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, closedErr(err)
	}
	x, n := binary.Uvarint(v)
	if n <= 0 {
		return 0, fmt.Errorf("%w: meta record %q holds %x", ErrCorrupt, key, v)
	}
	return x, nil
}

func (db *DB) putMetaUint(key []byte, x uint64) error {
	b := storage.NewBatch()
	if err := b.Put(db.sys, key, binary.AppendUvarint(nil, x)); err != nil {
		return err
	}
	return closedErr(db.store.Write(b))
}

// Checkpoint writes an openable copy of the database into dir (which must not exist)
// and returns the log position it covers: the copy's log is exactly 1..covered, dense,
// because commits pause (after validation) while the copy is taken. The
// log may then be truncated up to that position with TruncateLog; a database opened
// from the copy and given the rest of the log with Replay equals this one. While a
// Replay holds the database it fails with ErrReplaying.
//
// On a secondary (OpenSecondary) the copy is taken from the files as the secondary
// last caught up with them plus the primary's write-ahead log, as a crash of the
// primary would leave them: it holds at least positions 1..returned (what the
// secondary sees) and possibly later commits, which an Open of the copy completes as it
// would after a crash. A secondary writes nothing, so this does not record the
// checkpoint in the primary and does not allow TruncateLog there. It fails when the
// primary deleted a file meanwhile: CatchUp and try again. On an OpenReadOnly database
// it fails with ErrReadOnly.
func (db *DB) Checkpoint(dir string) (uint64, error) {
	if err := db.errIfRemote("DB.Checkpoint"); err != nil {
		return 0, err
	}
	if db.store.Secondary() {
		if err := db.enter(); err != nil {
			return 0, err
		}
		defer db.leave()
		covered := db.LastPosition()
		if err := db.store.Checkpoint(dir); err != nil {
			return 0, closedErr(err)
		}
		return covered, nil
	}
	if err := db.writable(); err != nil {
		return 0, err
	}
	if db.closing.Load() {
		return 0, ErrClosed
	}
	// No family is half created or dropped (changed but not yet in the log) in the copy.
	db.familyMu.Lock()
	defer db.familyMu.Unlock()
	// Nor a family a Replay has created ahead of its entry: a Replay holds the database
	// alone, so the read position is refused while one runs (and a Replay started
	// meanwhile fails with ErrNotExclusive).
	readPos, err := db.seq.Acquire()
	if err != nil {
		return 0, err
	}
	defer db.seq.Release(readPos)
	var covered uint64
	err = db.seq.Quiesce(func(assigned uint64) error {
		covered = assigned
		return db.store.Checkpoint(dir)
	})
	if err != nil {
		return 0, closedErr(err)
	}
	if err := db.seq.Wait(covered); err != nil {
		return 0, err
	}
	prev, err := db.metaUint(metaCheckpointed)
	if err != nil {
		return 0, err
	}
	if covered > prev {
		if err := db.putMetaUint(metaCheckpointed, covered); err != nil {
			return 0, err
		}
	}
	return covered, nil
}

// TruncateLog removes log entries below position before, which a checkpoint must cover
// (before-1 <= the highest position a Checkpoint returned); otherwise it fails with
// ErrNotCheckpointed. Reads of removed positions then fail with ErrLogTruncated, also
// reads that began before the call. Stream events whose entries were removed can no
// longer be read. Concurrent calls are serialised; the largest before wins.
func (db *DB) TruncateLog(before uint64) error {
	if db.remote != nil {
		if err := db.enter(); err != nil {
			return err
		}
		defer db.leave()
		return db.remote.eng.TruncateLog(context.Background(), before)
	}
	if err := db.writable(); err != nil {
		return err
	}
	if db.closing.Load() {
		return ErrClosed
	}
	// Concurrent calls run one at a time, so the marker never ends below what a
	// larger truncation deleted.
	db.truncMu.Lock()
	defer db.truncMu.Unlock()
	covered, err := db.metaUint(metaCheckpointed)
	if err != nil {
		return err
	}
	if before == 0 || before-1 > covered {
		return fmt.Errorf("%w: truncating below %d needs a checkpoint covering %d (latest covers %d)", ErrNotCheckpointed, before, before-1, covered)
	}
	if before <= db.truncated.Load() {
		return nil
	}
	if err := db.putMetaUint(metaTruncated, before); err != nil {
		return err
	}
	db.truncated.Store(before)
	return closedErr(db.store.DeleteRange(db.log, logentry.Key(0), logentry.Key(before)))
}

// CompactRange compacts the keys of cf in [start, end) (nil for an unbounded end) down
// to RocksDB's bottommost level and returns when it is done: deleted and overwritten
// data is dropped and the family's space on disk (StorageStats: SSTBytes) shrinks to
// its live data. It is not a commit: the log and the data are unchanged. With
// Config.DisableWAL it holds commits back (after validation) while it runs: RocksDB
// 7.8 can leave a family that receives a write meanwhile out of the atomic flush
// CompactRange starts, and with the WAL off a crash then loses that write while the
// log keeps it (facebook/rocksdb#11148, fixed in 8.1; test/crash reproduces it without
// this). Errors: ErrReadOnly, a *ConfigError for start after end, ErrClosed.
func (db *DB) CompactRange(cf *ColumnFamily, start, end []byte) error {
	if err := db.errIfRemote("DB.CompactRange"); err != nil {
		return err
	}
	if err := db.writable(); err != nil {
		return err
	}
	f, err := db.checkFamily("CompactRange", cf)
	if err != nil {
		return err
	}
	if err := db.enter(); err != nil {
		return err
	}
	defer db.leave()
	return db.withFlushesSafe(func() error { return closedErr(db.store.CompactRange(f, start, end)) })
}

// withFlushesSafe runs fn, which may make RocksDB start an atomic flush of its own,
// with commits held back when the WAL is off (see CompactRange), so no family gets a
// write between the flush choosing its families and running.
func (db *DB) withFlushesSafe(fn func() error) error {
	if !db.cfg.DisableWAL {
		return fn()
	}
	return closedErr(db.seq.Quiesce(func(uint64) error { return fn() }))
}

// CompactAll compacts every live family, rockline's own included (the log family after
// TruncateLog is where most space comes back), one at a time, as CompactRange does for
// one. progress, when set, is called before each family with its name, the families
// done and their number. With Config.DisableWAL it holds commits back during each
// family's compaction, as CompactRange does. Errors as CompactRange's.
func (db *DB) CompactAll(progress func(family string, done, total int)) error {
	if err := db.errIfRemote("DB.CompactAll"); err != nil {
		return err
	}
	if err := db.writable(); err != nil {
		return err
	}
	names, err := db.store.Families()
	if err != nil {
		return closedErr(err)
	}
	for i, n := range names {
		if progress != nil {
			progress(n, i, len(names))
		}
		if err := db.compactFamily(n); err != nil {
			return err
		}
	}
	return nil
}

// compactFamily compacts the live family named n (gone meanwhile: nothing to do).
func (db *DB) compactFamily(n string) error {
	if err := db.enter(); err != nil {
		return err
	}
	defer db.leave()
	f, err := db.store.Family(n)
	if errors.Is(err, storage.ErrColumnFamilyNotFound) {
		return nil
	}
	if err != nil {
		return closedErr(err)
	}
	err = db.withFlushesSafe(func() error { return db.store.CompactRange(f, nil, nil) })
	if errors.Is(err, storage.ErrColumnFamilyNotFound) {
		return nil // dropped meanwhile
	}
	return closedErr(err)
}
