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

// groupScratch is what a leader reuses from group to group, before its handoff: the
// bucket indexes and the set of fingerprints written by earlier members. (A group's
// batch is its own: it is written after the handoff, beside the next group's.)
type groupScratch struct {
	idx     []uint32
	written map[uint64]struct{} // validateGroup's, empty between runs
}

// runGroup validates reqs in order, each against the table and the writes of the
// requests before it, and writes the survivors with their log entries as one batch at
// consecutive positions. The caller guarantees exclusivity over every fingerprint of
// reqs (it leads the write group). Empty commits succeed with position 0 and take no
// part. Leadership is handed on once the survivors' positions are assigned and their
// writes recorded, so the next group validates against them; with Checks, which
// read committed state through Env.Read, only after the write is published, so that
// the next group's Checks read it; and with Marks, only after the write, because
// marks are not checked: two groups marking one key may both pass, and written side
// by side their batches could land in either order, the older position's value
// last. (Under the parallel policy the bucket locks, which cover Marks and are held
// until publication, keep such commits apart.)
func (c *core) runGroup(reqs []*Request, sc *groupScratch, handoff func()) {
	survivors := c.validateGroup(reqs, sc)
	if len(c.checks) > 0 || marks(survivors) {
		c.writeSurvivors(survivors, sc, func() {})
		return
	}
	c.writeSurvivors(survivors, sc, handoff)
}

// marks reports whether any request marks a key.
func marks(reqs []*Request) bool {
	for _, r := range reqs {
		if len(r.Commit.Marks) > 0 {
			return true
		}
	}
	return false
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
			for _, fp := range r.Commit.Marks {
				written[fp] = struct{}{}
			}
		}
		survivors = append(survivors, r)
	}
	return survivors
}

// writeSurvivors assigns validated requests consecutive positions, records their
// writes in the table, hands leadership on, and then writes them with their log
// entries as one batch and publishes the positions (see write).
func (c *core) writeSurvivors(survivors []*Request, _ *groupScratch, handoff func()) {
	g, ok := c.assign(survivors)
	handoff()
	if ok {
		c.write(g)
	}
}

// groupWrite is one group carried from its leader's part (assign) to its writing part
// (write), which runs after the handoff, possibly beside later groups' writes.
type groupWrite struct {
	reqs  []*Request
	first uint64
	dense uint64 // the dense watermark to write with the group, 0 for none
	now   time.Time
}

// assign is the leader's part of a group's write, run one group at a time in queue
// order: it reports Validated, opens the assignment of consecutive positions, picks
// the dense watermark the group carries, and records the writes in the table at
// their positions, so the next group is validated against them whether or not this
// one's write has landed. (If the write fails, the recorded positions hold fillers:
// a later commit may conflict with them needlessly, never miss a conflict.) It
// reports false, each request's Err set, when nothing is to be written.
func (c *core) assign(survivors []*Request) (groupWrite, bool) {
	if len(survivors) == 0 {
		return groupWrite{}, false
	}
	if err := c.stopped(); err != nil {
		for _, r := range survivors {
			r.Err = err
		}
		return groupWrite{}, false
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
		return groupWrite{}, false
	}
	g := groupWrite{reqs: survivors, first: first, dense: c.denseDue(), now: time.Now()}
	if c.table != nil { // a Writer's core keeps none
		for i, r := range survivors {
			c.table.record(r.Commit.Writes, first+uint64(i))
			c.table.record(r.Commit.Marks, first+uint64(i))
		}
	}
	return g, true
}

// write is the writing part of a group, run after its leader handed on, beside the
// writes of other groups: it builds the group's batch (one commit's own, or several
// copied into a pooled one) with the log entries and the dense watermark, writes it,
// fills the positions when the write failed, and publishes them, which returns once
// every earlier group is published too. Each request gets its Pos or Err.
func (c *core) write(g groupWrite) {
	reqs := g.reqs
	last := g.first + uint64(len(reqs)) - 1
	b := reqs[0].Commit.Batch
	if len(reqs) > 1 {
		b = c.groupBatch()
		defer c.putGroupBatch(b)
	}
	var err error
	if g.dense > 0 {
		err = c.appendDense(b, g.dense)
	}
	var entry []byte
	for i, r := range reqs {
		if err != nil {
			break
		}
		r.Commit.Time = g.now
		if len(reqs) > 1 {
			b.Append(r.Commit.Batch)
		}
		entry, err = c.appendEntry(b, r.Commit, g.first+uint64(i), entry)
	}
	if err == nil {
		err = c.env.Write(b)
	}
	for _, r := range reqs {
		c.observe(r.Commit, Written)
	}
	if err != nil {
		c.fill(g.first, last)
		for _, r := range reqs {
			r.Err = err
		}
		return
	}
	if err := c.env.Positions.Publish(g.first, last); err != nil {
		for _, r := range reqs {
			r.Err = err
		}
		return
	}
	for i, r := range reqs {
		r.Pos = g.first + uint64(i)
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
