package storage

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/linxGnu/grocksdb"
)

// A dropped family's native handle is freed, together with what RocksDB keeps for the
// family (its memtables, table readers and metadata), as soon as nothing can read
// through it any more: the family was dropped physically, every read that uses the
// handle has left native code, and no snapshot taken before the drop is still open
// (such a snapshot is a view of the database in which the family exists, so reads
// through it keep working until it is released). From then on a read through the
// *Family fails with an error matching ErrFamilyRetired. Iterators opened before keep
// working until closed: a RocksDB iterator holds the family's data itself, not the
// handle.
//
// Invariants:
//   - handle is read only under hmu's read lock (pin), or by the goroutine that holds
//     the database gate's write side (Close), and set to nil once, under hmu's write
//     lock, by freeHandle; nothing touches a handle after it was destroyed.
//   - A family is in handles.unfreed from its physical drop until its handle is freed,
//     and its handle is freed only while the caller holds the gate (either side).
//   - retiredAt is the retirement's epoch (handles.epoch after the increment), set
//     once under liveMu; a snapshot records the epoch it was taken in under liveMu,
//     and pins every family retired in a later epoch.

// handles is the database's bookkeeping of dropped families' handles.
type handles struct {
	freeMu  sync.Mutex   // serialises frees; guards unfreed
	unfreed []*Family    // dropped physically, handle not yet freed
	held    atomic.Int64 // len(unfreed), read without freeMu
	freed   atomic.Int64 // handles of dropped families freed, cumulative

	// Under DB.liveMu:
	epoch      uint64         // retirements so far
	snapEpochs map[uint64]int // open snapshots by the epoch they were taken in
}

// pin returns f's handle for one native call and holds it until unpin; op names the
// call in the error. It fails with an error matching ErrFamilyRetired once the handle
// was freed.
func (f *Family) pin(op string) (*grocksdb.ColumnFamilyHandle, error) {
	f.hmu.RLock()
	if f.handle == nil {
		f.hmu.RUnlock()
		return nil, fmt.Errorf("rockline: %s: family %q (generation %d) was dropped: %w", op, f.name, f.gen, errRetired)
	}
	return f.handle, nil
}

// unpin ends a pin that succeeded.
func (f *Family) unpin() { f.hmu.RUnlock() }

// freeHandle destroys f's handle once the reads that pinned it are done. It is
// idempotent.
func (f *Family) freeHandle() {
	f.hmu.Lock()
	h := f.handle
	f.handle = nil
	f.hmu.Unlock()
	if h != nil {
		h.Destroy()
	}
}

// noteRetired gives f the next retirement epoch. Snapshots taken before it pin f.
func (db *DB) noteRetired(f *Family) {
	db.liveMu.Lock()
	db.handles.epoch++
	f.retiredAt = db.handles.epoch
	db.liveMu.Unlock()
}

// trackSnapshot records s as open, in the current epoch.
func (db *DB) trackSnapshot(s *Snapshot) {
	db.liveMu.Lock()
	s.epoch = db.handles.epoch
	if db.handles.snapEpochs == nil {
		db.handles.snapEpochs = make(map[uint64]int)
	}
	db.handles.snapEpochs[s.epoch]++
	db.live[s] = struct{}{}
	db.liveMu.Unlock()
}

// untrackSnapshot records s as released.
func (db *DB) untrackSnapshot(s *Snapshot) {
	db.liveMu.Lock()
	if _, ok := db.live[s]; ok {
		delete(db.live, s)
		if db.handles.snapEpochs[s.epoch]--; db.handles.snapEpochs[s.epoch] == 0 {
			delete(db.handles.snapEpochs, s.epoch)
		}
	}
	db.liveMu.Unlock()
}

// oldestSnapshotEpoch returns the epoch of the oldest open snapshot (MaxUint64 when
// none is open): a family retired in a later epoch is pinned by it.
func (db *DB) oldestSnapshotEpoch() uint64 {
	db.liveMu.Lock()
	defer db.liveMu.Unlock()
	oldest := uint64(math.MaxUint64)
	for e := range db.handles.snapEpochs {
		oldest = min(oldest, e)
	}
	return oldest
}

// handleDropped runs after f's physical drop: f's handle is freed now, or when the
// last snapshot that pins it is released. The caller holds the gate.
func (db *DB) handleDropped(f *Family) {
	db.families.forget(f)
	db.handles.freeMu.Lock()
	db.handles.unfreed = append(db.handles.unfreed, f)
	db.handles.held.Add(1)
	db.handles.freeMu.Unlock()
	db.freeUnpinned()
}

// freeUnpinned frees the handles of dropped families that no open snapshot pins. The
// caller holds the gate.
func (db *DB) freeUnpinned() {
	// The caller released its snapshot (if any) before this load: a drop that adds to
	// unfreed after it sees that release when it computes the oldest epoch itself.
	if db.handles.held.Load() == 0 {
		return
	}
	db.handles.freeMu.Lock()
	defer db.handles.freeMu.Unlock()
	oldest := db.oldestSnapshotEpoch()
	keep := db.handles.unfreed[:0]
	for _, f := range db.handles.unfreed {
		if f.retiredAt > oldest {
			keep = append(keep, f)
			continue
		}
		f.freeHandle()
		db.handles.held.Add(-1)
		db.handles.freed.Add(1)
	}
	clear(db.handles.unfreed[len(keep):])
	db.handles.unfreed = keep
}

// freeAllLocked destroys every handle left, live or dropped; Close calls it under the
// gate's write side, when no read is in flight.
func (db *DB) freeAllLocked() {
	for _, f := range db.families.all() {
		f.freeHandle()
	}
	db.handles.freeMu.Lock()
	for _, f := range db.handles.unfreed {
		f.freeHandle()
	}
	db.handles.unfreed = nil
	db.handles.freeMu.Unlock()
}
