package storage

import (
	"fmt"
	"slices"
)

// Get returns a copy of the value of key in f, at snapshot s or, when s is nil, at the
// latest state. A missing key returns ErrNotFound; an existing empty value returns a
// non-nil empty slice. A family dropped and no longer pinned by a snapshot (Family)
// fails with an error matching ErrFamilyRetired.
func (db *DB) Get(f *Family, key []byte, s *Snapshot) ([]byte, error) {
	if err := db.check(f); err != nil {
		return nil, err
	}
	if len(key) > MaxKeySize {
		return nil, &LimitError{What: "key", Size: len(key), Limit: MaxKeySize}
	}
	if err := db.enter(); err != nil {
		return nil, err
	}
	defer db.leave()
	ro, err := db.readOptions(s)
	if err != nil {
		return nil, err
	}
	defer s.endRead()
	h, err := f.pin("get")
	if err != nil {
		return nil, err
	}
	defer f.unpin()
	v, err := db.native.GetCF(ro, h, key)
	if err != nil {
		return nil, mapError(fmt.Sprintf("get from %q", f.name), err)
	}
	defer v.Free()
	if !v.Exists() {
		return nil, ErrNotFound
	}
	return append(make([]byte, 0, v.Size()), v.Data()...), nil
}

// MultiGet reads keys[i] from fams[i] in one native call, at snapshot s or the latest
// state. values[i] is nil when the key is missing and a non-nil copy otherwise. It
// fails as Get does for a dropped family.
func (db *DB) MultiGet(fams []*Family, keys [][]byte, s *Snapshot) ([][]byte, error) {
	if len(fams) != len(keys) {
		return nil, fmt.Errorf("rockline: multiget: %d families for %d keys: %w", len(fams), len(keys), ErrInvalidConfig)
	}
	if len(keys) == 0 {
		return nil, nil
	}
	for i, f := range fams {
		if err := db.check(f); err != nil {
			return nil, err
		}
		if len(keys[i]) > MaxKeySize {
			return nil, &LimitError{What: "key", Size: len(keys[i]), Limit: MaxKeySize}
		}
	}
	if err := db.enter(); err != nil {
		return nil, err
	}
	defer db.leave()
	ro, err := db.readOptions(s)
	if err != nil {
		return nil, err
	}
	defer s.endRead()
	handles := make(grocksdbHandles, len(fams))
	// Each family is pinned once: a second read lock on it could wait behind a free
	// that waits for the first.
	var pinned []*Family
	var pinnedHandles grocksdbHandles
	defer func() {
		for _, f := range pinned {
			f.unpin()
		}
	}()
	for i, f := range fams {
		if j := slices.Index(pinned, f); j >= 0 {
			handles[i] = pinnedHandles[j]
			continue
		}
		h, err := f.pin("multiget")
		if err != nil {
			return nil, err
		}
		pinned, pinnedHandles = append(pinned, f), append(pinnedHandles, h)
		handles[i] = h
	}
	values, err := db.native.MultiGetCFMultiCF(ro, handles, keys)
	if err != nil {
		return nil, mapError("multiget", err)
	}
	defer values.Destroy()
	out := make([][]byte, len(keys))
	for i, v := range values {
		if v.Exists() {
			out[i] = append(make([]byte, 0, v.Size()), v.Data()...)
		}
	}
	return out, nil
}
