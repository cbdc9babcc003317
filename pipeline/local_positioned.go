package pipeline

import (
	"fmt"

	"github.com/rockline/rockline/storage"
)

// positionedPut is one PutAtCommit write: key and payload live in the arena; value is
// the codec's Append.
type positionedPut struct {
	family       *storage.Family
	key, payload []byte
	value        func(dst []byte, pos uint64, payload []byte) []byte
}

// PutAtCommit is EngineTxn.PutAtCommit: key and payload copied into the arena, the
// value made at commit (encodeEntry). A NewPositionedValue's function is stored as
// is; another codec's Append as a method value (one small allocation).
func (t *localTxn) PutAtCommit(ef EngineFamily, key, payload []byte, value PositionedValue) error {
	f := storageFamily(ef)
	if err := t.writable(f); err != nil {
		return err
	}
	var appendValue func(dst []byte, pos uint64, payload []byte) []byte
	mark := true
	if fv, ok := value.(funcValue); ok {
		appendValue, mark = fv.fn, !fv.untracked
	} else {
		appendValue = value.Append
	}
	start := len(t.arena)
	t.arena = append(t.arena, key...)
	t.arena = append(t.arena, payload...)
	k := t.arena[start : start+len(key) : start+len(key)]
	p := t.arena[start+len(key) : len(t.arena) : len(t.arena)]
	t.positioned = append(t.positioned, positionedPut{family: f, key: k, payload: p, value: appendValue})
	if mark {
		t.marks = append(t.marks, t.db.fp.Of(f.ID(), key))
	}
	return nil
}

// putPositioned adds the PutAtCommit write p, whose value is v, to b.
func (t *localTxn) putPositioned(b *storage.Batch, p positionedPut, v []byte) error {
	if len(v) > storage.MaxValueSize {
		return &ArgumentError{Op: "Txn.PutAtCommit", Arg: "value", Reason: fmt.Sprintf("%d bytes exceeds the limit of %d", len(v), storage.MaxValueSize), Err: storage.ErrTooLarge}
	}
	if err := b.Put(p.family, p.key, v); err != nil {
		return t.mapBatchErr(p.family, err)
	}
	return nil
}
