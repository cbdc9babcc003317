package validators

import (
	"context"
	"fmt"
	"math/bits"
	"slices"
	"sync"
	"time"
)

// buckets is the parallel bucket validator.
//
// Invariants:
//   - A commit locks the buckets of all its fingerprints in ascending index order,
//     each once, so two commits never deadlock on each other.
//   - It holds them from before the conflict check until after its writes are recorded
//     in the table, so for any one key, check, write and record are serialised.
//   - The pool is private to one database and sized once at New.
type buckets struct {
	core
	pool    []sync.Mutex
	scratch sync.Pool // *commitScratch
}

type commitScratch struct {
	idx   []uint32
	entry []byte
}

func newBuckets(o Options) (*buckets, error) {
	n := o.Buckets
	if n == 0 {
		n = DefaultBuckets
	}
	if n < MinBuckets || n > MaxBuckets {
		return nil, fmt.Errorf("validators: buckets = %d: must be between %d and %d", n, MinBuckets, MaxBuckets)
	}
	b := &buckets{core: newCore(o), pool: make([]sync.Mutex, n)}
	b.scratch.New = func() any { return new(commitScratch) }
	return b, nil
}

func (b *buckets) Policy() string { return Parallel }

func (b *buckets) PoolBytes() int { return len(b.pool) * BucketBytes }

// index maps a fingerprint to a bucket with Lemire's multiply-shift range reduction.
func (b *buckets) index(fp uint64) uint32 {
	hi, _ := bits.Mul64(fp, uint64(len(b.pool)))
	return uint32(hi)
}

func (b *buckets) Commit(ctx context.Context, c *Commit) (uint64, error) {
	if c.empty() {
		return 0, nil
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	sc := b.scratch.Get().(*commitScratch)
	defer b.scratch.Put(sc)
	idx := sc.idx[:0]
	for _, fp := range c.Reads {
		idx = append(idx, b.index(fp))
	}
	for _, fp := range c.Writes {
		idx = append(idx, b.index(fp))
	}
	slices.Sort(idx)
	idx = slices.Compact(idx)
	sc.idx = idx
	for _, i := range idx {
		b.pool[i].Lock()
	}
	pos, err := b.validateAndWrite(ctx, c, sc)
	for _, i := range idx {
		b.pool[i].Unlock()
	}
	if pos != 0 {
		b.Sequencer.markDone(pos, pos)
	}
	b.table.maybePrune(b.Sequencer)
	return pos, err
}

// validateAndWrite runs with c's buckets held. A non-zero position means one was
// assigned (and written, or filled on failure) and must be marked done.
func (b *buckets) validateAndWrite(ctx context.Context, c *Commit, sc *commitScratch) (uint64, error) {
	if err := b.stopped(); err != nil {
		return 0, err
	}
	if err := b.table.check(c.Reads, c.ReadPos); err != nil {
		return 0, err
	}
	if err := b.table.check(c.Writes, c.ReadPos); err != nil {
		return 0, err
	}
	if len(b.Checks) > 0 {
		if err := b.runChecks(ctx, c, storeView{b.Store}); err != nil {
			return 0, err
		}
	}
	c.observe(Validated)
	err := b.appendDense(c.Batch)
	b.Sequencer.pause.RLock() // from assignment until the position is written or filled
	pos := b.Sequencer.next(1)
	c.Time = time.Now()
	if err == nil {
		sc.entry, err = b.appendEntry(c.Batch, c, pos, sc.entry)
	}
	if err == nil {
		err = b.Store.Write(c.Batch)
	}
	c.observe(Written)
	if err != nil {
		b.fillUnlocked(pos)
		b.Sequencer.pause.RUnlock()
		return 0, err
	}
	b.Sequencer.pause.RUnlock()
	b.table.record(c.Writes, pos)
	return pos, nil
}

// fillUnlocked fills pos after a failed write; the position is then already marked
// done (or the sequencer stopped), so the caller must not mark it again.
func (b *buckets) fillUnlocked(pos uint64) { b.fill(pos, pos) }
