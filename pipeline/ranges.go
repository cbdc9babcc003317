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

// DeleteRange buffers the deletion of every key of cf in [start, end), as one RocksDB
// range tombstone: the cheap way to delete many keys at once. It is part of the commit
// as any write is (the same atomic batch, and the log entry's writes, so Replay and
// Rebuild reproduce it), with three differences: it is not checked for conflicts (a
// key another commit writes inside the range meanwhile is deleted or not by commit
// order), the transaction's own reads do not see it, and a transaction may not also
// Put or Delete a key inside a range it deletes (an *ArgumentError, from whichever
// call comes second), so the order of the calls never matters. start must not be
// after end; both are copied.
func (t *Txn) DeleteRange(cf *ColumnFamily, start, end []byte) error {
	const op = "Txn.DeleteRange"
	if t.rt != nil {
		if err := t.usable(); err != nil {
			return err
		}
		return t.db.notSupported(op)
	}
	f, err := t.writable(op, cf, start)
	if err != nil {
		return err
	}
	if err := checkKey(op, end); err != nil {
		return err
	}
	if bytes.Compare(start, end) > 0 {
		return &ArgumentError{Op: op, Arg: "start", Reason: fmt.Sprintf("%q is after the range end %q", start, end)}
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
func (t *Txn) inDeletedRange(op string, f *storage.Family, key []byte) error {
	for _, r := range t.ranges {
		if r.family == f && bytes.Compare(key, r.start) >= 0 && bytes.Compare(key, r.end) < 0 {
			return &ArgumentError{Op: op, Arg: "key", Reason: fmt.Sprintf("%q is in the range [%q, %q) the transaction deletes", key, r.start, r.end)}
		}
	}
	return nil
}
