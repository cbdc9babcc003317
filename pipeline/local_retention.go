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

func (db *localDB) loadTruncation() error {
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

func (db *localDB) metaUint(key []byte) (uint64, error) {
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

func (db *localDB) putMetaUint(key []byte, x uint64) error {
	b := storage.NewBatch()
	if err := b.Put(db.sys, key, binary.AppendUvarint(nil, x)); err != nil {
		return err
	}
	return closedErr(db.store.Write(b))
}

// Checkpoint is DB.Checkpoint on the local engine.
func (db *localDB) Checkpoint(dir string) (uint64, error) {
	if db.store.Secondary() {
		if err := db.enter(); err != nil {
			return 0, err
		}
		defer db.leave()
		covered := db.seq.Published()
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

// TruncateLog is DB.TruncateLog on the local engine.
func (db *localDB) TruncateLog(_ context.Context, before uint64) error {
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

// CompactRange is DB.CompactRange on the local engine.
func (db *localDB) CompactRange(ef EngineFamily, start, end []byte) error {
	f := storageFamily(ef)
	if err := db.enter(); err != nil {
		return err
	}
	defer db.leave()
	return db.withFlushesSafe(func() error { return closedErr(db.store.CompactRange(f, start, end)) })
}

// withFlushesSafe runs fn, which may make RocksDB start an atomic flush of its own,
// with commits held back when the WAL is off (see CompactRange), so no family gets a
// write between the flush choosing its families and running.
func (db *localDB) withFlushesSafe(fn func() error) error {
	if !db.cfg.DisableWAL {
		return fn()
	}
	return closedErr(db.seq.Quiesce(func(uint64) error { return fn() }))
}

// CompactAll is DB.CompactAll on the local engine.
func (db *localDB) CompactAll(progress func(family string, done, total int)) error {
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
func (db *localDB) compactFamily(n string) error {
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
