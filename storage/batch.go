package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/linxGnu/grocksdb"

	"github.com/rockline/rockline/internal/storagefaults"
)

// RocksDB WriteBatch record tags (db/dbformat.h), the format of the write-ahead log.
const (
	tagDeletion         = 0x0
	tagValue            = 0x1
	tagFamilyDeletion   = 0x4
	tagFamilyValue      = 0x5
	tagFamilyRange      = 0xE // kTypeColumnFamilyRangeDeletion
	tagRange            = 0xF // kTypeRangeDeletion
	batchHeaderLen      = 12  // fixed64 sequence, fixed32 count
	defaultFamilyNumber = 0
)

// Batch is an atomic group of writes across families, built in Go memory in RocksDB's
// WriteBatch format and handed to RocksDB in one native call by DB.Write. A Batch is
// not safe for concurrent use; it may be reused after Reset.
type Batch struct {
	rep      []byte
	count    uint32
	families []*Family // distinct families written, checked at Write
}

// NewBatch returns an empty batch.
func NewBatch() *Batch { return &Batch{rep: make([]byte, batchHeaderLen, 256)} }

// Reset empties the batch, keeping its memory.
func (b *Batch) Reset() {
	if cap(b.rep) < batchHeaderLen {
		b.rep = make([]byte, batchHeaderLen, 256)
	}
	b.rep = b.rep[:batchHeaderLen]
	clear(b.rep)
	b.count = 0
	b.families = b.families[:0]
}

// Count returns the number of writes in the batch.
func (b *Batch) Count() int { return int(b.count) }

// Size returns the encoded size of the batch in bytes.
func (b *Batch) Size() int { return len(b.rep) }

// Put adds key=value in f. It fails, adding nothing, when f is nil, of another
// database, or dropped, or when the key or value is past MaxKeySize or MaxValueSize.
func (b *Batch) Put(f *Family, key, value []byte) error {
	if err := b.admit(f, key); err != nil {
		return err
	}
	if len(value) > MaxValueSize {
		return &LimitError{What: "value", Size: len(value), Limit: MaxValueSize}
	}
	b.appendTag(f, tagValue, tagFamilyValue)
	b.rep = appendLenPrefixed(b.rep, key)
	b.rep = appendLenPrefixed(b.rep, value)
	b.count++
	return nil
}

// Delete adds a tombstone for key in f, with the same checks as Put.
func (b *Batch) Delete(f *Family, key []byte) error {
	if err := b.admit(f, key); err != nil {
		return err
	}
	b.appendTag(f, tagDeletion, tagFamilyDeletion)
	b.rep = appendLenPrefixed(b.rep, key)
	b.count++
	return nil
}

// DeleteRange adds one range tombstone for every key of f in [start, end), with the
// checks of Put for both keys. start after end is refused (a *ConfigError naming
// "range start"), adding nothing: RocksDB would fail the whole write.
func (b *Batch) DeleteRange(f *Family, start, end []byte) error {
	if err := b.admit(f, start); err != nil {
		return err
	}
	if err := b.admit(f, end); err != nil {
		return err
	}
	if bytes.Compare(start, end) > 0 {
		return &ConfigError{Field: "range start", Value: start, Expected: fmt.Sprintf("a key not after the range end %q", end)}
	}
	b.appendTag(f, tagRange, tagFamilyRange)
	b.rep = appendLenPrefixed(b.rep, start)
	b.rep = appendLenPrefixed(b.rep, end)
	b.count++
	return nil
}

// Append adds every write of o to b, after b's own.
func (b *Batch) Append(o *Batch) {
	if o.count == 0 {
		return
	}
	b.lazyInit()
	b.rep = append(b.rep, o.rep[batchHeaderLen:]...)
	b.count += o.count
	for _, f := range o.families {
		b.noteFamily(f)
	}
}

// appendTag starts a record for f: the default family's tag, or the other families'
// tag followed by the family's id.
func (b *Batch) appendTag(f *Family, defaultTag, familyTag byte) {
	b.noteFamily(f)
	b.lazyInit()
	if f.id == defaultFamilyNumber {
		b.rep = append(b.rep, defaultTag)
		return
	}
	b.rep = append(b.rep, familyTag)
	b.rep = binary.AppendUvarint(b.rep, uint64(f.id))
}

func (b *Batch) lazyInit() {
	if len(b.rep) < batchHeaderLen {
		b.rep = append(b.rep[:0], make([]byte, batchHeaderLen)...)
	}
}

func (b *Batch) admit(f *Family, key []byte) error {
	if f == nil {
		return fmt.Errorf("rockline: batch write to a nil column family: %w", ErrColumnFamilyNotFound)
	}
	if f.retired.Load() {
		return fmt.Errorf("rockline: batch write to dropped family %q: %w", f.name, errRetired)
	}
	if len(key) > MaxKeySize {
		return &LimitError{What: "key", Size: len(key), Limit: MaxKeySize}
	}
	return nil
}

func (b *Batch) noteFamily(f *Family) {
	for _, g := range b.families {
		if g == f {
			return
		}
	}
	b.families = append(b.families, f)
}

func appendLenPrefixed(dst, p []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(p)))
	return append(dst, p...)
}

// Write applies the batch atomically: all of its writes land or none does. It costs
// three native calls whatever the batch holds. An empty batch is a no-op. A batch
// that names a family dropped physically fails whole; a family that is retired but
// still claimed (its drop pending) is written normally, which is what lets a commit
// admitted before a drop complete.
func (db *DB) Write(b *Batch) error { return db.writeWith(db.wo, b) }

// WriteUnsynced is Write without the fsync that Options.Sync adds: the batch reaches
// the WAL (unless Options.DisableWAL) and the OS, so it survives a process kill, but
// not a power loss until a later SyncWAL returns. Unlike a synced Write, whose
// changes RocksDB makes visible only after the sync, its changes are visible to reads
// (and snapshots) as soon as it returns. Without Options.Sync it is Write.
func (db *DB) WriteUnsynced(b *Batch) error { return db.writeWith(db.unsyncedWO, b) }

func (db *DB) writeWith(wo *grocksdb.WriteOptions, b *Batch) error {
	if db.opts.ReadOnly {
		return ErrReadOnly
	}
	if b == nil || b.count == 0 {
		return nil
	}
	if err := db.enter(); err != nil {
		return err
	}
	defer db.leave()
	return db.writeEntered(wo, b)
}

// writeEntered is writeWith for a caller that already holds the gate (between enter
// and leave). It must not enter again: a Close waiting for the gate's write side
// blocks every new read lock, so a nested enter would wait on itself.
func (db *DB) writeEntered(wo *grocksdb.WriteOptions, b *Batch) error {
	if b == nil || b.count == 0 {
		return nil
	}
	for _, f := range b.families {
		if err := db.check(f); err != nil {
			return err
		}
		if f.physicallyDropped() {
			return fmt.Errorf("rockline: write to dropped family %q: %w", f.name, errRetired)
		}
	}
	if err := db.fault(func(fl *storagefaults.Faults) error {
		if fl.Write != nil {
			return fl.Write()
		}
		return nil
	}); err != nil {
		return fmt.Errorf("rockline: write batch: %w", err)
	}
	binary.LittleEndian.PutUint32(b.rep[8:batchHeaderLen], b.count)
	wb := grocksdb.WriteBatchFrom(b.rep)
	err := db.native.Write(wo, wb)
	wb.Destroy()
	if err != nil {
		db.writeFailed.Store(true)
	}
	return mapError("write batch", err)
}

// ErrWALFailed is matched by SyncWAL's error once a write or a sync of the WAL has
// failed: RocksDB keeps that error and stops writes, and syncing again could trip
// its assertions (see DB.writeFailed), so nothing written since can be made durable.
var ErrWALFailed = errors.New("rockline: an earlier WAL write or sync failed; the WAL cannot be synced")

// SyncWAL makes every write that returned before the call durable on the device (it
// is RocksDB's FlushWAL(sync=true): one fsync of the WAL files, which are sequential,
// so one sync covers every earlier write). Writes may run concurrently; those that
// return during the sync may or may not be covered. With the WAL off, or read-only,
// it does nothing. A failed sync fails every later one (with ErrWALFailed): after a
// failed fsync the kernel may have dropped the unsynced pages, so a retry that
// succeeds would prove nothing.
func (db *DB) SyncWAL() error {
	if db.opts.DisableWAL || db.opts.ReadOnly {
		return nil
	}
	if err := db.enter(); err != nil {
		return err
	}
	defer db.leave()
	if db.writeFailed.Load() {
		return ErrWALFailed
	}
	if err := db.fault(func(fl *storagefaults.Faults) error {
		if fl.Sync != nil {
			return fl.Sync()
		}
		return nil
	}); err != nil {
		db.writeFailed.Store(true)
		return fmt.Errorf("rockline: sync WAL: %w", err)
	}
	if err := db.native.FlushWAL(true); err != nil {
		db.writeFailed.Store(true)
		return mapError("sync WAL", err)
	}
	return nil
}
