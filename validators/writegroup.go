package validators

import (
	"context"
)

// maxGroupBytes caps the data one group leader writes in one batch; members past it
// wait for the next group.
const maxGroupBytes = 64 << 20

// writeGroup is the serial write-group validator: every commit goes through one
// leaderQueue whose leader validates the group in arrival order (against the table
// and the earlier members) and writes the survivors as one batch. Only the leader
// touches the table's writer side, so no bucket pool is needed.
type writeGroup struct {
	core
	q leaderQueue
}

func newWriteGroup(env Env, o Options) *writeGroup {
	w := &writeGroup{core: newCore(env, o)}
	w.q = leaderQueue{process: w.runGroup}
	return w
}

func (w *writeGroup) Policy() string { return Serial }

func (w *writeGroup) PoolBytes() int { return 0 }

func (w *writeGroup) Commit(ctx context.Context, c *Commit) (uint64, error) {
	r := &Request{Ctx: ctx, Commit: c}
	w.CommitGroup([]*Request{r})
	return r.Pos, r.Err
}

// CommitGroup queues every request at once, in order, so they are validated in that
// order (usually in one group), and waits for all of them.
func (w *writeGroup) CommitGroup(reqs []*Request) {
	queued := make([]*Request, 0, len(reqs))
	for _, r := range reqs {
		if r.due() {
			queued = append(queued, r)
		}
	}
	w.q.do(queued)
	w.table.maybePrune(w.env.Positions)
}
