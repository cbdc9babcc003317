package pipeline

import (
	"bytes"
	"fmt"

	"github.com/rockline/rockline/storage"
)

// rangeDelete is one DeleteRange of a transaction: keys in [start, end) of family.
type rangeDelete struct {
	family     *storage.Family
	start, end []byte
}

// DeleteRange is EngineRangeDeleter.DeleteRange: the range copied, refused when the
// transaction writes a key inside it (see Txn.DeleteRange).
func (t *localTxn) DeleteRange(ef EngineFamily, start, end []byte) error {
	const op = "Txn.DeleteRange"
	f := storageFamily(ef)
	if err := t.writable(f); err != nil {
		return err
	}
	for _, o := range t.ops {
		if o.Family == f && bytes.Compare(o.Key, start) >= 0 && bytes.Compare(o.Key, end) < 0 {
			return &ArgumentError{Op: op, Arg: "start", Reason: fmt.Sprintf("the range [%q, %q) holds %q, which the transaction writes", start, end, o.Key)}
		}
	}
	s := len(t.arena)
	t.arena = append(t.arena, start...)
	t.arena = append(t.arena, end...)
	r := rangeDelete{family: f, start: t.arena[s : s+len(start) : s+len(start)], end: t.arena[s+len(start) : len(t.arena) : len(t.arena)]}
	t.ranges = append(t.ranges, r)
	return nil
}

// inDeletedRange returns an error when the transaction deletes a range of f holding
// key (see DeleteRange).
func (t *localTxn) inDeletedRange(op string, f *storage.Family, key []byte) error {
	for _, r := range t.ranges {
		if r.family == f && bytes.Compare(key, r.start) >= 0 && bytes.Compare(key, r.end) < 0 {
			return &ArgumentError{Op: op, Arg: "key", Reason: fmt.Sprintf("%q is in the range [%q, %q) the transaction deletes", key, r.start, r.end)}
		}
	}
	return nil
}
