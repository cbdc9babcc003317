package benchmarks

import (
	"context"
	"encoding/binary"
	"sync/atomic"
	"testing"

	"github.com/linxGnu/grocksdb"

	"github.com/rockline/rockline/pipeline"
)

// engine commits one transaction that writes every key with value.
type engine interface {
	commit(keys [][]byte, value []byte) error
	close()
}

// rockline commits through the lanes with Commit.
type rocklineEngine struct {
	db *pipeline.DB
	cf *pipeline.ColumnFamily
}

func openRockline(b *testing.B, policy string) engine {
	db, err := pipeline.Open(b.TempDir(), pipeline.Config{Validation: policy})
	if err != nil {
		b.Fatal(err)
	}
	cf, err := db.CreateColumnFamily("data")
	if err != nil {
		b.Fatal(err)
	}
	return &rocklineEngine{db: db, cf: cf}
}

func (e *rocklineEngine) commit(keys [][]byte, value []byte) error {
	tx := e.db.Begin()
	for _, k := range keys {
		if err := tx.Put(e.cf, k, value); err != nil {
			tx.Discard()
			return err
		}
	}
	return tx.Commit(context.Background())
}

func (e *rocklineEngine) close() { e.db.Close() }

// native is RocksDB's OptimisticTransactionDB with its default (parallel) validation:
// each transaction takes a snapshot, puts every key, adds the log record, commits.
type nativeEngine struct {
	db       *grocksdb.OptimisticTransactionDB
	cfs      []*grocksdb.ColumnFamilyHandle
	opts     []*grocksdb.Options
	wo       *grocksdb.WriteOptions
	to       *grocksdb.OptimisticTransactionOptions
	sequence atomic.Uint64
}

func openNative(b *testing.B) engine {
	opts := grocksdb.NewDefaultOptions()
	opts.SetCreateIfMissing(true)
	opts.SetCreateIfMissingColumnFamilies(true)
	cfo := grocksdb.NewDefaultOptions()
	db, cfs, err := grocksdb.OpenOptimisticTransactionDbColumnFamilies(opts, b.TempDir(),
		[]string{"default", "data", "log"}, []*grocksdb.Options{opts, cfo, cfo})
	if err != nil {
		b.Fatal(err)
	}
	to := grocksdb.NewDefaultOptimisticTransactionOptions()
	to.SetSetSnapshot(true)
	return &nativeEngine{db: db, cfs: cfs, opts: []*grocksdb.Options{opts, cfo}, wo: grocksdb.NewDefaultWriteOptions(), to: to}
}

func (e *nativeEngine) commit(keys [][]byte, value []byte) error {
	tx := e.db.TransactionBegin(e.wo, e.to, nil)
	defer tx.Destroy()
	for _, k := range keys {
		if err := tx.PutCF(e.cfs[1], k, value); err != nil {
			return err
		}
	}
	if err := tx.PutCF(e.cfs[2], logKey(e.sequence.Add(1)), logRecord(keys, value)); err != nil {
		return err
	}
	return tx.Commit()
}

func (e *nativeEngine) close() {
	for _, h := range e.cfs {
		h.Destroy()
	}
	e.db.Close()
	e.wo.Destroy()
	e.to.Destroy()
	for _, o := range e.opts {
		o.Destroy()
	}
}

// raw writes one WriteBatch per commit on a plain DB: no validation, no snapshot.
type rawEngine struct {
	db       *grocksdb.DB
	cfs      []*grocksdb.ColumnFamilyHandle
	opts     []*grocksdb.Options
	wo       *grocksdb.WriteOptions
	sequence atomic.Uint64
}

func openRaw(b *testing.B) engine {
	opts := grocksdb.NewDefaultOptions()
	opts.SetCreateIfMissing(true)
	opts.SetCreateIfMissingColumnFamilies(true)
	cfo := grocksdb.NewDefaultOptions()
	db, cfs, err := grocksdb.OpenDbColumnFamilies(opts, b.TempDir(),
		[]string{"default", "data", "log"}, []*grocksdb.Options{opts, cfo, cfo})
	if err != nil {
		b.Fatal(err)
	}
	return &rawEngine{db: db, cfs: cfs, opts: []*grocksdb.Options{opts, cfo}, wo: grocksdb.NewDefaultWriteOptions()}
}

func (e *rawEngine) commit(keys [][]byte, value []byte) error {
	wb := grocksdb.NewWriteBatch()
	defer wb.Destroy()
	for _, k := range keys {
		wb.PutCF(e.cfs[1], k, value)
	}
	wb.PutCF(e.cfs[2], logKey(e.sequence.Add(1)), logRecord(keys, value))
	return e.db.Write(e.wo, wb)
}

func (e *rawEngine) close() {
	for _, h := range e.cfs {
		h.Destroy()
	}
	e.db.Close()
	e.wo.Destroy()
	for _, o := range e.opts {
		o.Destroy()
	}
}

func logKey(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }

// logRecord is the write set, length-prefixed: what rockline's log entry holds.
func logRecord(keys [][]byte, value []byte) []byte {
	out := make([]byte, 0, len(keys)*(len(value)+32)+16)
	out = binary.AppendUvarint(out, uint64(len(keys)))
	for _, k := range keys {
		out = append(out, 4, 'd', 'a', 't', 'a')
		out = binary.AppendUvarint(out, uint64(len(k)))
		out = append(out, k...)
		out = binary.AppendUvarint(out, uint64(len(value)))
		out = append(out, value...)
	}
	return out
}
