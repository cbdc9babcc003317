package storage

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// genPrefix starts the MetaFamily key that records the highest generation a family
// name has had: the prefix followed by the name, its value a uvarint. Without it a
// name dropped (its intent gone) and re-created after a reopen would start again at
// generation 1, and the log could not tell the two generations apart.
var genPrefix = []byte("gen/")

func genKey(name string) []byte { return append(bytes.Clone(genPrefix), name...) }

// recordGeneration durably records gen as the highest generation of name. The caller
// holds the gate (between enter and leave) and db.ddl.
func (db *DB) recordGeneration(name string, gen int) error {
	b := NewBatch()
	if err := b.Put(db.meta, genKey(name), binary.AppendUvarint(nil, uint64(gen))); err != nil {
		return err
	}
	return db.writeEntered(db.syncWO, b)
}

// loadGenerations reads every recorded generation into the registry, at Open.
func (db *DB) loadGenerations() error {
	it, err := db.NewIterator(db.meta, IterOptions{Lower: genPrefix, Upper: PrefixEnd(genPrefix)})
	if err != nil {
		return err
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		k, v, err := it.Item()
		if err != nil {
			return err
		}
		gen, n := binary.Uvarint(v)
		if n <= 0 || gen == 0 || gen > 1<<31 {
			return fmt.Errorf("rockline: generation record %q holds %x: %w", k, v, ErrCorrupt)
		}
		db.families.mu.Lock()
		db.families.noteGen(string(k[len(genPrefix):]), int(gen))
		db.families.mu.Unlock()
	}
	return it.Err()
}
