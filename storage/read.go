package storage

import (
	"fmt"
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
