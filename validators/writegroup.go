package validators

import (
	"bytes"
	"context"
	"sync"
	"time"

	"github.com/rockline/rockline/storage"
)

// maxGroupBytes caps the data one group leader writes in one batch; members past it
// wait for the next group.
const maxGroupBytes = 64 << 20

// writeGroup is the serial write-group validator.
//
// Invariants:
//   - At most one goroutine leads at a time (leading is true exactly while a leader
//     runs); only the leader touches the table's writers' side and assigns positions.
//   - Members are validated in arrival order; a member conflicts with the table or with
//     the writes of an earlier surviving member of its group.
//   - Every queued member is woken exactly once with its result, or once to lead
//     (after which it is part of the group it leads and gets its result from itself).
type writeGroup struct {
	core
	mu      sync.Mutex
	leading bool
	queue   []*member
	batch   *storage.Batch // the leader's combined batch, reused
	entry   []byte
}

type member struct {
	ctx  context.Context
	c    *Commit
	pos  uint64
	err  error
	wake chan bool // true: lead; false: done
}

func newWriteGroup(o Options) *writeGroup {
	return &writeGroup{core: newCore(o), batch: storage.NewBatch()}
}

func (w *writeGroup) Policy() string { return Serial }

func (w *writeGroup) PoolBytes() int { return 0 }

func (w *writeGroup) Commit(ctx context.Context, c *Commit) (uint64, error) {
	if c.empty() {
		return 0, nil
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	m := &member{ctx: ctx, c: c, wake: make(chan bool, 1)}
	w.mu.Lock()
	w.queue = append(w.queue, m)
	lead := !w.leading
	w.leading = true
	w.mu.Unlock()
	if !lead {
		lead = <-m.wake
	}
	if lead {
		w.lead()
	}
	if m.pos != 0 {
		w.table.maybePrune(w.Sequencer)
	}
	return m.pos, m.err
}

// lead takes the queued members as one group, validates and writes them, wakes them,
// and hands leadership to the next queued member if any.
func (w *writeGroup) lead() {
	w.mu.Lock()
	group, size := w.queue, 0
	cut := len(group)
	for i, m := range group {
		size += m.c.Batch.Size()
		if i > 0 && size > maxGroupBytes {
			cut = i
			break
		}
	}
	group, w.queue = group[:cut], append([]*member(nil), group[cut:]...)
	w.mu.Unlock()

	w.run(group)

	w.mu.Lock()
	var next *member
	if len(w.queue) > 0 {
		next = w.queue[0]
	} else {
		w.leading = false
	}
	w.mu.Unlock()
	// group[0] is the leader itself: the first arrival when nobody led, or the member
	// it was handed to. It reads its result directly.
	for _, m := range group[1:] {
		m.wake <- false
	}
	if next != nil {
		next.wake <- true
	}
}

// run validates group in order and writes the survivors as one batch.
func (w *writeGroup) run(group []*member) {
	if err := w.stopped(); err != nil {
		for _, m := range group {
			m.err = err
		}
		return
	}
	written := make(map[uint64]struct{})
	var overlay *groupView
	if len(w.Checks) > 0 {
		overlay = &groupView{db: w.Store}
	}
	survivors := group[:0:0]
	for _, m := range group {
		if err := m.ctx.Err(); err != nil {
			m.err = err
			continue
		}
		if err := w.validate(m.c, written); err != nil {
			m.err = err
			continue
		}
		if overlay != nil {
			if err := w.runChecks(m.ctx, m.c, overlay); err != nil {
				m.err = err
				continue
			}
			overlay.add(m.c.Ops)
		}
		for _, fp := range m.c.Writes {
			written[fp] = struct{}{}
		}
		survivors = append(survivors, m)
	}
	if len(survivors) == 0 {
		return
	}
	for _, m := range survivors {
		m.c.observe(Validated)
	}
	b := w.batch
	b.Reset()
	err := w.appendDense(b)
	w.Sequencer.pause.RLock() // from assignment until the positions are written or filled
	defer w.Sequencer.pause.RUnlock()
	first := w.Sequencer.next(len(survivors))
	last := first + uint64(len(survivors)) - 1
	now := time.Now()
	for i, m := range survivors {
		if err != nil {
			break
		}
		m.c.Time = now
		b.Append(m.c.Batch)
		if w.entry, err = w.appendEntry(b, m.c, first+uint64(i), w.entry); err != nil {
			break
		}
	}
	if err == nil {
		err = w.Store.Write(b)
	}
	for _, m := range survivors {
		m.c.observe(Written)
	}
	if err != nil {
		w.fill(first, last)
		for _, m := range survivors {
			m.err = err
		}
		return
	}
	for i, m := range survivors {
		m.pos = first + uint64(i)
		w.table.record(m.c.Writes, m.pos)
	}
	w.Sequencer.markDone(first, last)
}

// validate checks c against the table and the writes of earlier group members.
func (w *writeGroup) validate(c *Commit, written map[uint64]struct{}) error {
	for _, set := range [2][]uint64{c.Reads, c.Writes} {
		for _, fp := range set {
			if _, ok := written[fp]; ok {
				return ErrConflict
			}
		}
		if err := w.table.check(set, c.ReadPos); err != nil {
			return err
		}
	}
	return nil
}

// groupView is the committed state plus the writes of earlier members of the group.
type groupView struct {
	db  *storage.DB
	ops []Op
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
	return g.db.Get(f, key, nil)
}
