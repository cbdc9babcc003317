package pipeline

import (
	"sync"

	"github.com/rockline/rockline/storage"
	"github.com/rockline/rockline/validators"
)

// txnBuffers are the growable buffers of one transaction, pooled so that a steady
// stream of commits allocates (almost) nothing per key.
type txnBuffers struct {
	batch  *storage.Batch
	arena  []byte
	ops    []validators.Op
	writes []uint64
	reads  []uint64
	index  map[uint64]int32  // Txn.index, empty
	fams   []*storage.Family // Txn.readFams
	// positioned are Txn.positioned, marks Txn.marks.
	positioned []positionedPut
	marks      []uint64
}

// maxPooledBytes keeps a transaction that wrote a lot from pinning its buffers in the pool.
const maxPooledBytes = 1 << 20

var bufferPool = sync.Pool{New: func() any {
	return &txnBuffers{batch: storage.NewBatch(), index: make(map[uint64]int32)}
}}

func getBuffers() *txnBuffers { return bufferPool.Get().(*txnBuffers) }

func putBuffers(b *txnBuffers) {
	if cap(b.arena) > maxPooledBytes || b.batch.Size() > maxPooledBytes || cap(b.ops) > maxPooledBytes/64 ||
		len(b.index) > maxPooledBytes/64 {
		return
	}
	b.batch.Reset()
	clear(b.ops) // drop family pointers
	clear(b.fams)
	clear(b.index)
	clear(b.positioned)
	b.arena, b.ops, b.writes, b.reads, b.fams, b.positioned, b.marks = b.arena[:0], b.ops[:0], b.writes[:0], b.reads[:0], b.fams[:0], b.positioned[:0], b.marks[:0]
	bufferPool.Put(b)
}
