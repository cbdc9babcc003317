package pipeline

import (
	"fmt"

	"github.com/rockline/rockline/storage"
)

// positionedPut is one PutAtCommit or PutKeyAtCommit write: key and payload live in
// the arena. For PutAtCommit, fn is the value codec's Append over payload; for
// PutKeyAtCommit (keyed), fn is the key codec's Append over key, which holds the
// key's payload, and payload is the value.
type positionedPut struct {
	family       *storage.Family
	key, payload []byte
	fn           func(dst []byte, pos uint64, payload []byte) []byte
	keyed        bool
}

// PutAtCommit is EngineTxn.PutAtCommit: key and payload copied into the arena, the
// value made at commit (encodeEntry). A NewPositionedValue's function is stored as
// is; another codec's Append as a method value (one small allocation).
func (t *localTxn) PutAtCommit(ef EngineFamily, key, payload []byte, value PositionedValue) error {
	f := storageFamily(ef)
	if err := t.writable(f); err != nil {
		return err
	}
	appendValue, mark := codecFunc(value)
	t.addPositioned(f, key, payload, appendValue, false)
	if mark {
		t.marks = append(t.marks, t.db.fp.Of(f.ID(), key))
	}
	return nil
}

// PutKeyAtCommit is EngineKeyMaker.PutKeyAtCommit: payload and value copied into the
// arena, the key made at commit (encodeEntry). Keys made at commit are never read
// with tracking, so the write carries no conflict mark.
func (t *localTxn) PutKeyAtCommit(ef EngineFamily, key PositionedValue, payload, value []byte) error {
	f := storageFamily(ef)
	if err := t.writable(f); err != nil {
		return err
	}
	appendKey, _ := codecFunc(key)
	t.addPositioned(f, payload, value, appendKey, true)
	return nil
}

// codecFunc returns a codec's function, stored as is for a NewPositionedValue's (an
// Append method value would cost an allocation), and whether its writes are marked
// for conflicts.
func codecFunc(v PositionedValue) (func(dst []byte, pos uint64, payload []byte) []byte, bool) {
	if fv, ok := v.(funcValue); ok {
		return fv.fn, !fv.untracked
	}
	return v.Append, true
}

// addPositioned copies a and b into the arena and records the write.
func (t *localTxn) addPositioned(f *storage.Family, a, b []byte, fn func(dst []byte, pos uint64, payload []byte) []byte, keyed bool) {
	start := len(t.arena)
	t.arena = append(t.arena, a...)
	t.arena = append(t.arena, b...)
	k := t.arena[start : start+len(a) : start+len(a)]
	p := t.arena[start+len(a) : len(t.arena) : len(t.arena)]
	t.positioned = append(t.positioned, positionedPut{family: f, key: k, payload: p, fn: fn, keyed: keyed})
}

// putPositioned makes the PutAtCommit or PutKeyAtCommit write p for position pos in
// scratch, adds it to b and returns its key and value (valid until scratch is reused).
func (t *localTxn) putPositioned(b *storage.Batch, p positionedPut, pos uint64, scratch []byte) (key, value, out []byte, err error) {
	if p.keyed {
		out = p.fn(scratch[:0], pos, p.key)
		key, value = out, p.payload
		if len(key) == 0 || len(key) > storage.MaxKeySize {
			return nil, nil, out, &ArgumentError{Op: "Txn.PutKeyAtCommit", Arg: "key", Reason: fmt.Sprintf("%d bytes made at commit, not 1..%d", len(key), storage.MaxKeySize), Err: storage.ErrTooLarge}
		}
	} else if out = p.fn(scratch[:0], pos, p.payload); len(out) > storage.MaxValueSize {
		return nil, nil, out, &ArgumentError{Op: "Txn.PutAtCommit", Arg: "value", Reason: fmt.Sprintf("%d bytes exceeds the limit of %d", len(out), storage.MaxValueSize), Err: storage.ErrTooLarge}
	} else {
		key, value = p.key, out
	}
	if err := b.Put(p.family, key, value); err != nil {
		return nil, nil, out, t.mapBatchErr(p.family, err)
	}
	return key, value, out, nil
}
