package pipeline

// IterOptions bound a transaction iterator: Lower inclusive, Upper exclusive, nil for
// unbounded.
type IterOptions struct {
	Lower, Upper []byte
}

// Iterator walks one family in key order as the transaction sees it: the
// transaction's snapshot merged with its own buffered writes (a buffered delete hides
// the key). First, Seek and Next walk ascending; Last and Prev descending, and either
// step may follow any positioning (a change of direction repositions both sources
// around the current key). Every key it yields is tracked for conflicts, like Get.
// Writes buffered after the iterator was opened are not seen by it. Close it when
// done.
type Iterator struct {
	eng EngineIterator
}

// First moves to the first key.
func (it *Iterator) First() { it.eng.First() }

// Seek moves to the first key at or after key.
func (it *Iterator) Seek(key []byte) { it.eng.Seek(key) }

// Last moves to the last key.
func (it *Iterator) Last() { it.eng.Last() }

// Next moves to the next key (ascending).
func (it *Iterator) Next() { it.eng.Next() }

// Prev moves to the previous key (descending).
func (it *Iterator) Prev() { it.eng.Prev() }

// Valid reports whether the iterator is at a key.
func (it *Iterator) Valid() bool { return it.eng.Valid() }

// Key returns the current key (the caller's copy), or nil.
func (it *Iterator) Key() []byte { return it.eng.Key() }

// Value returns the current value (the caller's copy), or nil.
func (it *Iterator) Value() []byte { return it.eng.Value() }

// Err returns the first error the iterator met.
func (it *Iterator) Err() error { return it.eng.Err() }

// Close frees the iterator; it is idempotent.
func (it *Iterator) Close() { it.eng.Close() }
