// Package lockvalidator is a commit validator written outside rockline's validators
// package, plugged into a database through pipeline.Config.Validator: the proof that
// the validator contract is one an outside package can implement. The conformance
// suite and the model test run a database on it beside the built-in policies.
//
// Its policy is the plainest one that keeps the contract: every group of commits is
// decided and written under one mutex. A commit conflicts when a key it read with
// tracking or writes was written at a position above its read position (its own
// last-write map, by the fingerprints the transaction carries) or by an earlier
// commit of the same group; the survivors go to a validators.Writer, which assigns
// their positions, writes them with their log entries and publishes them; their
// writes are recorded before the mutex is released, so no commit is decided against
// a map that lacks a write already published. Nothing runs in parallel: it is a
// reference, not a contender.
package lockvalidator

import (
	"bytes"
	"context"
	"fmt"
	"sync"

	"github.com/rockline/rockline/storage"
	"github.com/rockline/rockline/validators"
)

// Policy is the validator's name, the database's Policy.
const Policy = "lock"

// pruneAt is how many recorded keys trigger a prune of those no open transaction
// can conflict with.
const pruneAt = 4096

// Validator decides and writes commits under one mutex.
//
// Invariants:
//   - mu is held from a group's first decision until its survivors' writes are
//     recorded in last, so every decision sees every published write above floor.
//   - last maps a key fingerprint to the position of its latest write, for writes
//     above floor; floor only grows, to the oldest read position of any open
//     transaction (no transaction reads below it, so no decision needs what was
//     pruned).
type Validator struct {
	env    validators.Env
	checks []validators.Check
	w      *validators.Writer

	mu    sync.Mutex
	last  map[uint64]uint64
	floor uint64
}

var _ validators.Validator = (*Validator)(nil)

// New is a validators.Factory: the validator over env, running o.Checks. o.Buckets
// is ignored (there is one lock).
func New(env validators.Env, o validators.Options) (validators.Validator, error) {
	if len(o.Checks) > 0 && env.Read == nil {
		return nil, fmt.Errorf("lockvalidator: Options.Checks are set but Env.Read is not: %w", validators.ErrInvalidEnv)
	}
	w, err := validators.NewWriter(env)
	if err != nil {
		return nil, err
	}
	return &Validator{env: env, checks: o.Checks, w: w, last: make(map[uint64]uint64), floor: env.Positions.Published()}, nil
}

// Policy returns "lock".
func (v *Validator) Policy() string { return Policy }

// PoolBytes returns 0: there is no lock pool.
func (v *Validator) PoolBytes() int { return 0 }

// Commit decides and writes one commit.
func (v *Validator) Commit(ctx context.Context, c *validators.Commit) (uint64, error) {
	r := &validators.Request{Ctx: ctx, Commit: c}
	v.CommitGroup([]*validators.Request{r})
	return r.Pos, r.Err
}

// CommitGroup decides reqs in order, each against the last-write map and the writes
// of the survivors before it, writes the survivors together and records their
// writes. An empty commit succeeds at position 0 without being decided.
func (v *Validator) CommitGroup(reqs []*validators.Request) {
	v.mu.Lock()
	defer v.mu.Unlock()
	var due []*validators.Request
	written := make(map[uint64]bool)
	view := &groupView{read: v.env.Read}
	for _, r := range reqs {
		c := r.Commit
		if len(c.Ops) == 0 && !c.HasRecord {
			continue
		}
		if err := r.Ctx.Err(); err != nil {
			r.Err = err
			continue
		}
		if err := v.env.Positions.Err(); err != nil {
			r.Err = err
			continue
		}
		if c.ReadPos < v.floor {
			r.Err = validators.ErrTxnTooOld
			continue
		}
		if v.conflicts(c, written) {
			r.Err = validators.ErrConflict
			continue
		}
		if !c.System {
			if err := v.runChecks(r, view); err != nil {
				r.Err = err
				continue
			}
			view.ops = append(view.ops, c.Ops...)
		}
		for _, set := range [2][]uint64{c.Writes, c.Marks} {
			for _, fp := range set {
				written[fp] = true
			}
		}
		due = append(due, r)
	}
	if len(due) == 0 {
		return
	}
	v.w.Write(due)
	for _, r := range due {
		if r.Err == nil {
			for _, set := range [2][]uint64{r.Commit.Writes, r.Commit.Marks} {
				for _, fp := range set {
					v.last[fp] = r.Pos
				}
			}
		}
	}
	if len(v.last) >= pruneAt {
		v.prune()
	}
}

// conflicts reports whether a key c read with tracking or writes was written after
// its read position, or by an earlier survivor of the group.
func (v *Validator) conflicts(c *validators.Commit, written map[uint64]bool) bool {
	for _, set := range [2][]uint64{c.Reads, c.Writes} {
		for _, fp := range set {
			if written[fp] {
				return true
			}
			if p, ok := v.last[fp]; ok && p > c.ReadPos {
				return true
			}
		}
	}
	return false
}

func (v *Validator) runChecks(r *validators.Request, view validators.View) error {
	for _, check := range v.checks {
		if err := check(r.Ctx, r.Commit, view); err != nil {
			return err
		}
	}
	return nil
}

// prune drops the writes at or below the oldest read position of any open
// transaction.
func (v *Validator) prune() {
	floor := v.env.Positions.Oldest()
	if floor <= v.floor {
		return
	}
	v.floor = floor
	for fp, p := range v.last {
		if p <= floor {
			delete(v.last, fp)
		}
	}
}

// groupView is the committed state plus the writes of the group's earlier
// survivors: what a Check of a later one sees.
type groupView struct {
	read func(f *storage.Family, key []byte) ([]byte, error)
	ops  []validators.Op
}

func (g *groupView) Get(f *storage.Family, key []byte) ([]byte, error) {
	for i := len(g.ops) - 1; i >= 0; i-- {
		if op := g.ops[i]; op.Family == f && bytes.Equal(op.Key, key) {
			if op.Delete {
				return nil, storage.ErrNotFound
			}
			return bytes.Clone(op.Value), nil
		}
	}
	return g.read(f, key)
}
