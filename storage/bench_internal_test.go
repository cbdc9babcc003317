package storage

import (
	"encoding/binary"
	"path/filepath"
	"testing"

	"github.com/linxGnu/grocksdb"
)

const (
	benchKeys      = 64
	benchValueSize = 100
)

// benchDB opens a database (WAL on, no sync) with a family "bench" to write to.
func benchDB(b *testing.B) (*DB, *Family) {
	b.Helper()
	db, err := Open(filepath.Join(b.TempDir(), "db"), Options{Families: map[string]FamilyOptions{"bench": {}}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := db.Close(); err != nil {
			b.Error(err)
		}
	})
	f, err := db.Family("bench")
	if err != nil {
		b.Fatal(err)
	}
	return db, f
}

// BenchmarkWriteBatch64 commits 64 keys x 100-byte values per op through Batch.
func BenchmarkWriteBatch64(b *testing.B) {
	db, f := benchDB(b)
	key := make([]byte, 16)
	value := make([]byte, benchValueSize)
	batch := NewBatch()
	b.ReportAllocs()
	b.SetBytes(benchKeys * (16 + benchValueSize))
	var n uint64
	for b.Loop() {
		batch.Reset()
		for range benchKeys {
			n++
			binary.BigEndian.PutUint64(key, n)
			binary.BigEndian.PutUint64(value, n)
			if err := batch.Put(f, key, value); err != nil {
				b.Fatal(err)
			}
		}
		if err := db.Write(batch); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGrocksdbPutCF64 does the same through grocksdb's own WriteBatch, one
// PutCF cgo call per key, with the same create/write/destroy per commit.
func BenchmarkGrocksdbPutCF64(b *testing.B) {
	db, f := benchDB(b)
	key := make([]byte, 16)
	value := make([]byte, benchValueSize)
	b.ReportAllocs()
	b.SetBytes(benchKeys * (16 + benchValueSize))
	var n uint64
	for b.Loop() {
		wb := grocksdb.NewWriteBatch()
		for range benchKeys {
			n++
			binary.BigEndian.PutUint64(key, n)
			binary.BigEndian.PutUint64(value, n)
			wb.PutCF(f.handle, key, value)
		}
		if err := db.native.Write(db.wo, wb); err != nil {
			b.Fatal(err)
		}
		wb.Destroy()
	}
}
