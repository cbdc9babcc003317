package pipeline

import (
	"bytes"
	"context"
	"errors"
	"slices"

	"github.com/rockline/rockline/storage"
	"github.com/rockline/rockline/validators"
)

// localTxn is the local engine's transaction (EngineTxn): a RocksDB snapshot at its
// read position (under Config.Sync the shared durable view) and its writes buffered
// in pooled Go buffers until Commit.
//
// Invariants:
//   - done goes false->true once, at Commit or Discard; release runs exactly then,
//     returning the read position, the snapshot and the buffers.
//   - ops, writes (one fingerprint per op) and batch hold the same Puts and Deletes,
//     in call order; index, once built, maps a fingerprint to its latest op.
type localTxn struct {
	db      *localDB
	readPos uint64
	snap    *storage.Snapshot
	view    *view // under Config.Sync: the shared view snap belongs to (released through the sequencer)
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
	// streamEvents counts the events added with a stream (AddStreamEvents);
	// taggedEvents those with tags.
	streamEvents, taggedEvents int
	// readFams are the droppable families read with tracking (see noteRead).
	readFams []*storage.Family
	// positioned are the PutAtCommit writes, made at commit (see local_positioned.go);
	// marks their keys' fingerprints (but for NewUntrackedPositionedValue's): the validator records them as
	// written, so a transaction that read one of those keys with tracking conflicts,
	// as it does on the JetStream engine, but does not check them (validators.Commit).
	positioned []positionedPut
	marks      []uint64
	// ranges are the DeleteRange deletions, written after the other writes (local_ranges.go).
	ranges []rangeDelete
}

var (
	_ EngineTxn          = (*localTxn)(nil)
	_ EngineRangeDeleter = (*localTxn)(nil)
	_ inlineCommitter    = (*localTxn)(nil)
)

// Begin is Engine.Begin: a transaction at the current published log position. It
// fails with ErrClosed, and with ErrReplaying while a Replay holds the database.
func (db *localDB) Begin(context.Context) (EngineTxn, error) {
	t, err := db.begin()
	if err != nil {
		return nil, err
	}
	return t, nil
}

func (db *localDB) begin() (*localTxn, error) {
	if db.closing.Load() {
		return nil, ErrClosed
	}
	t := &localTxn{db: db}
	var err error
	if t.readPos, t.view, err = db.seq.AcquireView(); err != nil {
		return nil, err
	}
	if t.view != nil {
		t.snap = t.view.snap // Config.Sync: the durable view (local_view.go)
	} else {
		snap, err := db.store.NewSnapshot()
		if err != nil {
			db.seq.Release(t.readPos)
			return nil, closedErr(err)
		}
		t.snap = snap
	}
	b := getBuffers()
	t.bufs = b
	t.batch, t.arena, t.ops, t.writes, t.reads, t.index, t.readFams, t.positioned, t.marks = b.batch, b.arena, b.ops, b.writes, b.reads, b.index, b.fams, b.positioned, b.marks
	return t, nil
}

// ReadPosition is EngineTxn.ReadPosition.
func (t *localTxn) ReadPosition() uint64 { return t.readPos }

// Get is EngineTxn.Get: the transaction's own latest write of key, else the snapshot.
func (t *localTxn) Get(_ context.Context, ef EngineFamily, key []byte, track bool) ([]byte, bool, error) {
	if t.done {
		return nil, false, ErrTxnDone
	}
	f := storageFamily(ef)
	fp := t.db.fp.Of(f.ID(), key)
	if track {
		t.reads = append(t.reads, fp)
		t.noteRead(f)
	}
	if i, ok := t.ownWrite(f, key, fp); ok {
		if t.ops[i].Delete {
			return nil, false, nil
		}
		return bytes.Clone(t.ops[i].Value), true, nil
	}
	v, err := t.db.store.Get(f, key, t.snap)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, readErr(f, err)
	}
	return v, true, nil
}

// noteRead remembers a family the transaction read with tracking, so the commit can
// claim it: a tracked read of a family dropped before the commit fails the commit, as
// a write to it would (the drop removed every key the read saw). Families that cannot
// be dropped (the default family, rockline's own) are not noted.
func (t *localTxn) noteRead(f *storage.Family) {
	if f.Name() == storage.DefaultFamily || isReserved(f.Name()) || slices.Contains(t.readFams, f) {
		return
	}
	t.readFams = append(t.readFams, f)
}

// ownWrite finds the latest buffered write of key in f, whose fingerprint is fp. Short
// write sets are scanned; longer ones get an index from fingerprint to the latest op
// with it, built on first use and kept up to date by write. A fingerprint shared by
// two keys (a collision) falls back to the scan, so the answer is always exact.
func (t *localTxn) ownWrite(f *storage.Family, key []byte, fp uint64) (int, bool) {
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
func (t *localTxn) scanWrites(f *storage.Family, key []byte, fp uint64) (int, bool) {
	for i := len(t.ops) - 1; i >= 0; i-- {
		if t.writes[i] == fp && t.ops[i].Family == f && bytes.Equal(t.ops[i].Key, key) {
			return i, true
		}
	}
	return 0, false
}

// Put is EngineTxn.Put.
func (t *localTxn) Put(f EngineFamily, key, value []byte) error {
	return t.write("Txn.Put", storageFamily(f), key, value, false)
}

// Delete is EngineTxn.Delete.
func (t *localTxn) Delete(f EngineFamily, key []byte) error {
	return t.write("Txn.Delete", storageFamily(f), key, nil, true)
}

// writable refuses a write to a dropped family.
func (t *localTxn) writable(f *storage.Family) error {
	if t.done {
		return ErrTxnDone
	}
	if f.Dropped() {
		return &DroppedError{Family: f.Name()}
	}
	return nil
}

func (t *localTxn) write(op string, f *storage.Family, key, value []byte, del bool) error {
	if err := t.writable(f); err != nil {
		return err
	}
	if len(t.ranges) > 0 {
		if err := t.inDeletedRange(op, f, key); err != nil {
			return err
		}
	}
	var err error
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

func (t *localTxn) mapBatchErr(f *storage.Family, err error) error {
	if f.Dropped() {
		return &DroppedError{Family: f.Name()}
	}
	return err
}

// Discard is EngineTxn.Discard; it is safe to call more than once and after Commit.
func (t *localTxn) Discard() {
	if t.done {
		return
	}
	t.done = true
	t.release()
}

// AddEvents is EngineTxn.AddEvents: events the front checked, copied into the
// transaction.
func (t *localTxn) AddEvents(stream string, first uint64, events []Event) error {
	if t.done {
		return ErrTxnDone
	}
	t.addStreamEvents(stream, first, events)
	return nil
}

// release returns the transaction's read position and snapshot, and its buffers to
// the pool. Nothing outside the Txn holds the buffers by then: the validator has
// returned, and Get and iterators hand out copies.
func (t *localTxn) release() {
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
		b.batch, b.arena, b.ops, b.writes, b.reads, b.index, b.fams, b.positioned, b.marks = t.batch, t.arena, t.ops, t.writes, t.reads, t.index, t.readFams, t.positioned, t.marks
		putBuffers(b)
		t.bufs, t.batch, t.arena, t.ops, t.writes, t.reads, t.index, t.indexed, t.readFams, t.positioned, t.marks = nil, nil, nil, nil, nil, nil, nil, false, nil, nil, nil
	}
}
