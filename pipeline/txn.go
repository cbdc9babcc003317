package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	"github.com/rockline/rockline/storage"
	"github.com/rockline/rockline/validators"
)

// Txn is an optimistic transaction. It reads a consistent snapshot (every commit
// published before Begin, and possibly commits that were completing concurrently with
// it; with Config.Sync only commits already durable) merged with its own buffered writes, and buffers its writes in Go until Commit.
// A Txn is single-use and not safe for concurrent use: after Commit, CommitInline or
// Discard every method returns ErrTxnDone.
//
// Keys read with Get (and keys returned by an iterator) are tracked: the commit fails
// with ErrConflict if any of them, or any key the transaction writes, was written by
// another commit after Begin. That prevents lost updates and write skew.
type Txn struct {
	db      *DB
	readPos uint64
	snap    *storage.Snapshot
	view    *view // under Config.Sync: the shared view snap belongs to (released through the sequencer)
	err     error // set when Begin failed
	done    bool

	bufs    *txnBuffers // where the buffers below came from and go back to
	batch   *storage.Batch
	ops     []validators.Op
	writes  []uint64 // fingerprints, one per op
	reads   []uint64
	arena   []byte
	index   map[uint64]int32 // write fingerprint -> latest op with it (pooled, empty)
	indexed bool             // index is built; see ownWrite
	events  []txnEvent
	// streamEvents counts the events added with a stream (AddStreamEvents).
	streamEvents int
	// readFams are the droppable families read with tracking (see noteRead).
	readFams []*storage.Family
	// positioned are the PutAtCommit writes, made at commit (see positioned.go).
	positioned []positionedPut
	// ranges are the DeleteRange deletions, written after the other writes (ranges.go).
	ranges []rangeDelete

	// rt is set in a transaction of a DB opened with OpenEngine (remote_txn.go); the
	// fields from snap to ranges are the local engine's and unused then.
	rt *remoteTxn
}

// Begin starts a transaction at the current published log position. It never fails
// itself: on a closed database the transaction's calls return ErrClosed, and while a
// Replay holds the database they return ErrReplaying.
func (db *DB) Begin() *Txn { return db.begin(context.Background()) }

// begin is Begin; ctx bounds a remote engine's reads (the local engine's need none).
func (db *DB) begin(ctx context.Context) *Txn {
	if db.remote != nil {
		return db.beginRemote(ctx)
	}
	t := &Txn{db: db}
	if db.closing.Load() {
		t.err, t.done = ErrClosed, true
		return t
	}
	var err error
	if t.readPos, t.view, err = db.seq.AcquireView(); err != nil {
		t.err, t.done = err, true
		return t
	}
	if t.view != nil {
		t.snap = t.view.snap // Config.Sync: the durable view (view.go)
	} else {
		snap, err := db.store.NewSnapshot()
		if err != nil {
			db.seq.Release(t.readPos)
			t.err, t.done = closedErr(err), true
			return t
		}
		t.snap = snap
	}
	b := getBuffers()
	t.bufs = b
	t.batch, t.arena, t.ops, t.writes, t.reads, t.index, t.readFams, t.positioned = b.batch, b.arena, b.ops, b.writes, b.reads, b.index, b.fams, b.positioned
	return t
}

// DB returns the database the transaction belongs to.
func (t *Txn) DB() *DB { return t.db }

// ReadPosition returns the published log position the transaction reads at.
func (t *Txn) ReadPosition() uint64 { return t.readPos }

func (t *Txn) usable() error {
	if t.err != nil {
		return t.err
	}
	if t.done {
		return ErrTxnDone
	}
	return nil
}

func checkKey(op string, key []byte) error {
	if len(key) == 0 {
		return &ArgumentError{Op: op, Arg: "key", Reason: "must not be empty"}
	}
	if len(key) > storage.MaxKeySize {
		return &ArgumentError{Op: op, Arg: "key", Reason: fmt.Sprintf("%d bytes exceeds the limit of %d", len(key), storage.MaxKeySize), Err: storage.ErrTooLarge}
	}
	return nil
}

// Get returns the value of key in cf as the transaction sees it, or ErrNotFound. The
// read is tracked for conflicts. The returned slice is the caller's.
func (t *Txn) Get(cf *ColumnFamily, key []byte) ([]byte, error) {
	return t.get("Txn.Get", cf, key, true)
}

// GetUntracked is Get without conflict tracking: a later change to the key by another
// commit does not fail this transaction.
func (t *Txn) GetUntracked(cf *ColumnFamily, key []byte) ([]byte, error) {
	return t.get("Txn.GetUntracked", cf, key, false)
}

func (t *Txn) get(op string, cf *ColumnFamily, key []byte, track bool) ([]byte, error) {
	if err := t.usable(); err != nil {
		return nil, err
	}
	if t.rt != nil {
		return t.remoteGet(op, cf, key, track)
	}
	f, err := t.db.checkFamily(op, cf)
	if err != nil {
		return nil, err
	}
	if err := checkKey(op, key); err != nil {
		return nil, err
	}
	fp := t.db.fp.Of(f.ID(), key)
	if track {
		t.reads = append(t.reads, fp)
		t.noteRead(f)
	}
	if i, ok := t.ownWrite(f, key, fp); ok {
		if t.ops[i].Delete {
			return nil, ErrNotFound
		}
		return bytes.Clone(t.ops[i].Value), nil
	}
	v, err := t.db.store.Get(f, key, t.snap)
	return v, readErr(f, err)
}

// noteRead remembers a family the transaction read with tracking, so the commit can
// claim it: a tracked read of a family dropped before the commit fails the commit, as
// a write to it would (the drop removed every key the read saw). Families that cannot
// be dropped (the default family, rockline's own) are not noted.
func (t *Txn) noteRead(f *storage.Family) {
	if f.Name() == storage.DefaultFamily || isReserved(f.Name()) || slices.Contains(t.readFams, f) {
		return
	}
	t.readFams = append(t.readFams, f)
}

// ownWrite finds the latest buffered write of key in f, whose fingerprint is fp. Short
// write sets are scanned; longer ones get an index from fingerprint to the latest op
// with it, built on first use and kept up to date by write. A fingerprint shared by
// two keys (a collision) falls back to the scan, so the answer is always exact.
func (t *Txn) ownWrite(f *storage.Family, key []byte, fp uint64) (int, bool) {
	if len(t.ops) <= 8 && !t.indexed {
		return t.scanWrites(f, key, fp)
	}
	if !t.indexed {
		for i, w := range t.writes {
			t.index[w] = int32(i)
		}
		t.indexed = true
	}
	i, ok := t.index[fp]
	if !ok {
		return 0, false
	}
	if op := t.ops[i]; op.Family == f && bytes.Equal(op.Key, key) {
		return int(i), true
	}
	return t.scanWrites(f, key, fp)
}

// scanWrites is ownWrite by a backward scan.
func (t *Txn) scanWrites(f *storage.Family, key []byte, fp uint64) (int, bool) {
	for i := len(t.ops) - 1; i >= 0; i-- {
		if t.writes[i] == fp && t.ops[i].Family == f && bytes.Equal(t.ops[i].Key, key) {
			return i, true
		}
	}
	return 0, false
}

// Put buffers key=value in cf. The key must be 1..64 KiB and the value at most 1 GiB
// (storage.MaxKeySize, storage.MaxValueSize); key and value are copied.
func (t *Txn) Put(cf *ColumnFamily, key, value []byte) error {
	return t.write("Txn.Put", cf, key, value, false)
}

// Delete buffers a deletion of key in cf.
func (t *Txn) Delete(cf *ColumnFamily, key []byte) error {
	return t.write("Txn.Delete", cf, key, nil, true)
}

// writable checks the transaction, family and key of a write and returns the family.
func (t *Txn) writable(op string, cf *ColumnFamily, key []byte) (*storage.Family, error) {
	if err := t.usable(); err != nil {
		return nil, err
	}
	if err := t.db.writable(); err != nil {
		return nil, err
	}
	f, err := t.db.checkFamily(op, cf)
	if err != nil {
		return nil, err
	}
	if f.Dropped() {
		return nil, &DroppedError{Family: f.Name()}
	}
	return f, checkKey(op, key)
}

func (t *Txn) write(op string, cf *ColumnFamily, key, value []byte, del bool) error {
	if t.rt != nil {
		if err := t.usable(); err != nil {
			return err
		}
		return t.remoteWrite(op, cf, key, value, del)
	}
	f, err := t.writable(op, cf, key)
	if err != nil {
		return err
	}
	if len(t.ranges) > 0 {
		if err := t.inDeletedRange(op, f, key); err != nil {
			return err
		}
	}
	if len(value) > storage.MaxValueSize {
		return &ArgumentError{Op: op, Arg: "value", Reason: fmt.Sprintf("%d bytes exceeds the limit of %d", len(value), storage.MaxValueSize), Err: storage.ErrTooLarge}
	}
	if del {
		err = t.batch.Delete(f, key)
	} else {
		err = t.batch.Put(f, key, value)
	}
	if err != nil {
		return t.mapBatchErr(f, err)
	}
	start := len(t.arena)
	t.arena = append(t.arena, key...)
	t.arena = append(t.arena, value...)
	k := t.arena[start : start+len(key) : start+len(key)]
	var v []byte
	if !del {
		v = t.arena[start+len(key) : len(t.arena) : len(t.arena)]
	}
	t.ops = append(t.ops, validators.Op{Family: f, Key: k, Value: v, Delete: del})
	fp := t.db.fp.Of(f.ID(), key)
	t.writes = append(t.writes, fp)
	if t.indexed {
		t.index[fp] = int32(len(t.ops) - 1)
	}
	return nil
}

func (t *Txn) mapBatchErr(f *storage.Family, err error) error {
	if f.Dropped() {
		return &DroppedError{Family: f.Name()}
	}
	return err
}

// Discard ends the transaction without committing. It is safe to call more than once
// and after Commit.
func (t *Txn) Discard() {
	if t.done {
		return
	}
	t.done = true
	t.release()
}

// release returns the transaction's read position and snapshot, and its buffers to
// the pool. Nothing outside the Txn holds the buffers by then: the validator has
// returned, and Get and iterators hand out copies.
func (t *Txn) release() {
	if t.rt != nil {
		t.rt.eng.Discard()
		return
	}
	switch {
	case t.view != nil:
		t.db.seq.ReleaseView(t.readPos, t.view)
		t.view, t.snap = nil, nil
	case t.snap != nil:
		t.snap.Release()
		t.snap = nil
		t.db.seq.Release(t.readPos)
	}
	if t.batch != nil {
		b := t.bufs
		b.batch, b.arena, b.ops, b.writes, b.reads, b.index, b.fams, b.positioned = t.batch, t.arena, t.ops, t.writes, t.reads, t.index, t.readFams, t.positioned
		putBuffers(b)
		t.bufs, t.batch, t.arena, t.ops, t.writes, t.reads, t.index, t.indexed, t.readFams, t.positioned = nil, nil, nil, nil, nil, nil, nil, false, nil, nil
	}
}

// Len returns the number of buffered writes (0 once the transaction is done).
func (t *Txn) Len() int {
	if t.rt != nil && !t.done {
		return t.rt.writes
	}
	return len(t.ops)
}
