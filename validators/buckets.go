package validators

import (
	"context"
	"fmt"
	"math/bits"
	"slices"
	"sync"
)

// buckets is the parallel bucket validator.
//
// Invariants:
//   - A commit locks the buckets of all its fingerprints in ascending index order,
//     each once, so two commits never deadlock on each other.
//   - It holds them from before the conflict check until after its writes are recorded
//     in the table, so for any one key, check, write and record are serialised.
//   - The write itself goes through writer, shared by every lane: a commit waits there
//     with its buckets held, which cannot deadlock because the writer's leader takes no
//     bucket; it only assigns positions, writes, records and wakes.
//   - The pool is private to one database and sized once at New.
type buckets struct {
	core
	pool    []sync.Mutex
	scratch sync.Pool   // *groupScratch, one per concurrent CommitGroup
	writer  leaderQueue // groups the writes of validated commits across lanes
}

func newBuckets(env Env, o Options) (*buckets, error) {
	n := o.Buckets
	if n == 0 {
		n = DefaultBuckets
	}
	if n < MinBuckets || n > MaxBuckets {
		return nil, fmt.Errorf("validators: buckets = %d: must be between %d and %d", n, MinBuckets, MaxBuckets)
	}
	b := &buckets{core: newCore(env, o), pool: make([]sync.Mutex, n)}
	b.scratch.New = func() any { return &groupScratch{} }
	b.writer = leaderQueue{process: b.writeSurvivors}
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
	r := &Request{Ctx: ctx, Commit: c}
	b.CommitGroup([]*Request{r})
	return r.Pos, r.Err
}

// CommitGroup locks the union of the requests' buckets (ascending, once each),
// validates them in order, and hands the survivors to the shared writer queue, which
// writes the survivors of every lane that are waiting at that moment in one batch;
// then it unlocks. Validation runs in parallel across lanes (only commits sharing a
// bucket wait for each other); the write is grouped, so one WAL write serves many
// commits.
func (b *buckets) CommitGroup(reqs []*Request) {
	sc := b.scratch.Get().(*groupScratch)
	defer b.scratch.Put(sc)
	idx := sc.idx[:0]
	for _, r := range reqs {
		if r.Commit.empty() {
			continue
		}
		for _, fp := range r.Commit.Reads {
			idx = append(idx, b.index(fp))
		}
		for _, fp := range r.Commit.Writes {
			idx = append(idx, b.index(fp))
		}
		for _, fp := range r.Commit.Marks {
			idx = append(idx, b.index(fp))
		}
	}
	slices.Sort(idx)
	idx = slices.Compact(idx)
	sc.idx = idx
	for _, i := range idx {
		b.pool[i].Lock()
	}
	b.writer.do(b.validateGroup(reqs, sc))
	for _, i := range idx {
		b.pool[i].Unlock()
	}
	b.table.maybePrune(b.env.Positions)
}
