package storage

import (
	"fmt"
)

// Get returns a copy of the value of key in f, at snapshot s or, when s is nil, at the
// latest state. A missing key returns ErrNotFound; an existing empty value returns a
// non-nil empty slice.
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
	v, err := db.native.GetCF(ro, f.handle, key)
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
// state. values[i] is nil when the key is missing and a non-nil copy otherwise.
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
	for i, f := range fams {
		handles[i] = f.handle
	}
	slices, err := db.native.MultiGetCFMultiCF(ro, handles, keys)
	if err != nil {
		return nil, mapError("multiget", err)
	}
	defer slices.Destroy()
	out := make([][]byte, len(keys))
	for i, v := range slices {
		if v.Exists() {
			out[i] = append(make([]byte, 0, v.Size()), v.Data()...)
		}
	}
	return out, nil
}
