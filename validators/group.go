package validators

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/rockline/rockline/storage"
)

// Request is one commit of a group handed to Validator.CommitGroup, with its outcome.
type Request struct {
	Ctx    context.Context
	Commit *Commit
	Pos    uint64 // the commit's log position, set on success (0 for an empty commit)
	Err    error  // why the commit failed, or nil
}

// due reports whether r still has to be validated: it writes or records something and
// its context has not ended (when it has, r.Err is set to the context's error). An
// empty commit is done at position 0 without validation.
func (r *Request) due() bool {
	if r.Commit.empty() {
		return false
	}
	if r.Commit.Record == nil {
		r.Err = fmt.Errorf("%w: the commit has no Record", ErrInvalidEnv)
		return false
	}
	if err := r.Ctx.Err(); err != nil {
		r.Err = err
		return false
	}
	return true
}

// groupScratch is what one group run reuses: the combined batch, the entry buffer,
// the bucket indexes and the set of fingerprints written by earlier members.
type groupScratch struct {
	batch   *storage.Batch
	entry   []byte
	idx     []uint32
	written map[uint64]struct{} // validateGroup's, empty between runs
}

// runGroup validates reqs in order, each against the table and the writes of the
// requests before it, and writes the survivors with their log entries as one batch at
// consecutive positions. The caller guarantees exclusivity over every fingerprint of
// reqs (it holds their buckets, or leads the write group). Empty commits succeed with
// position 0 and take no part.
func (c *core) runGroup(reqs []*Request, sc *groupScratch) {
	c.writeSurvivors(c.validateGroup(reqs, sc), sc)
}

// validateGroup returns the requests that pass, in order: not empty, context alive,
// no conflict with the table or with an earlier survivor's writes, every Check passed.
// It sets Err on the others.
func (c *core) validateGroup(reqs []*Request, sc *groupScratch) []*Request {
	if err := c.stopped(); err != nil {
		for _, r := range reqs {
			r.Err = err
		}
		return nil
	}
	var written map[uint64]struct{}
	if len(reqs) > 1 {
		if sc.written == nil {
			sc.written = make(map[uint64]struct{})
		}
		written = sc.written
		defer sc.resetWritten()
	}
	var overlay *groupView
	if len(c.checks) > 0 {
		overlay = &groupView{read: c.env.Read}
	}
	survivors := make([]*Request, 0, len(reqs))
	for _, r := range reqs {
		if !r.due() {
			continue
		}
		if err := c.validate(r.Commit, written); err != nil {
			r.Err = err
			continue
		}
		if overlay != nil && !r.Commit.System {
			if err := c.runChecks(r.Ctx, r.Commit, overlay); err != nil {
				r.Err = err
				continue
			}
			overlay.add(r.Commit.Ops)
		}
		if written != nil {
			for _, fp := range r.Commit.Writes {
				written[fp] = struct{}{}
			}
		}
		survivors = append(survivors, r)
	}
	return survivors
}

// writeSurvivors assigns validated requests consecutive positions and writes them
// with their log entries as one batch, records their writes in the table and
// publishes the positions. A failed write fills the positions and fails every
// request. It runs on the writer queue's leader, so the assignment it opens is the
// only one, and it closes it (Publish or Stop) before it returns.
func (c *core) writeSurvivors(survivors []*Request, sc *groupScratch) {
	if len(survivors) == 0 {
		return
	}
	if err := c.stopped(); err != nil {
		for _, r := range survivors {
			r.Err = err
		}
		return
	}
	for _, r := range survivors {
		c.observe(r.Commit, Validated)
	}
	first, err := c.env.Positions.Assign(len(survivors))
	if err != nil {
		for _, r := range survivors {
			c.observe(r.Commit, Written)
			r.Err = err
		}
		return
	}
	last := first + uint64(len(survivors)) - 1
	// One survivor writes its own batch; several are copied into the group's.
	b := survivors[0].Commit.Batch
	if len(survivors) > 1 {
		b = sc.batch
		b.Reset()
	}
	err = c.appendDense(b, first-1)
	now := time.Now()
	for i, r := range survivors {
		if err != nil {
			break
		}
		r.Commit.Time = now
		if len(survivors) > 1 {
			b.Append(r.Commit.Batch)
		}
		sc.entry, err = c.appendEntry(b, r.Commit, first+uint64(i), sc.entry)
	}
	if err == nil {
		err = c.env.Write(b)
	}
	for _, r := range survivors {
		c.observe(r.Commit, Written)
	}
	if err != nil {
		c.fill(first, last)
		for _, r := range survivors {
			r.Err = err
		}
		return
	}
	if c.table != nil { // a Writer's core keeps none
		for i, r := range survivors {
			c.table.record(r.Commit.Writes, first+uint64(i))
		}
	}
	if err := c.env.Positions.Publish(first, last); err != nil {
		for _, r := range survivors {
			r.Err = err
		}
		return
	}
	for i, r := range survivors {
		r.Pos = first + uint64(i)
	}
}

// validate checks cm against the table and the writes of earlier group members.
func (c *core) validate(cm *Commit, written map[uint64]struct{}) error {
	for _, set := range [2][]uint64{cm.Reads, cm.Writes} {
		for _, fp := range set {
			if _, ok := written[fp]; ok {
				return ErrConflict
			}
		}
		if err := c.table.check(set, cm.ReadPos); err != nil {
			return err
		}
	}
	return nil
}

// groupView is the committed state (read through Env.Read) plus the writes of earlier
// members of the group.
type groupView struct {
	read func(f *storage.Family, key []byte) ([]byte, error)
	ops  []Op
}

func (g *groupView) add(ops []Op) { g.ops = append(g.ops, ops...) }

func (g *groupView) Get(f *storage.Family, key []byte) ([]byte, error) {
	for i := len(g.ops) - 1; i >= 0; i-- {
		op := g.ops[i]
		if op.Family == f && bytes.Equal(op.Key, key) {
			if op.Delete {
				return nil, storage.ErrNotFound
			}
			return bytes.Clone(op.Value), nil
		}
	}
	return g.read(f, key)
}

// maxPooledWritten bounds the set a scratch keeps for the next group; a larger one
// (a group of huge commits) is dropped rather than pinned.
const maxPooledWritten = 1 << 16

func (sc *groupScratch) resetWritten() {
	if len(sc.written) > maxPooledWritten {
		sc.written = nil
		return
	}
	clear(sc.written)
}
