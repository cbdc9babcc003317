package pipeline

// The commit path, top to bottom.
//
// A commit moves through these stages, each a span under rockline.commit and a
// rockline.commit.duration stage:
//
//	admit     claim every family the transaction writes or read with tracking
//	          (Txn.claim); a dropped family fails the commit whole, before anything
//	          is assigned.
//	lane      Commit hands the commit to one of Config.Lanes bounded FIFO lanes
//	          (rockline.lane.wait), or runs the lane's work on the caller when the
//	          lane is idle; CommitInline skips the lane and runs on the caller.
//	validate  the validator checks the commit's reads and writes against the
//	          positions of later writes (rockline.validate) and runs Config.Checks.
//	write     the shared writer queue's leader assigns the next dense positions to
//	          the validated commits of every lane, hands the queue on, and writes
//	          their data, stream index and log entries as one RocksDB batch
//	          (rockline.write), beside the next leader's group.
//	publish   the commit waits until every position up to its own is written
//	          (rockline.publish), then returns; a transaction begun afterwards sees
//	          it. With Config.Sync the write carried no fsync: the commit waits for
//	          an fsync that began after its write, run by the first waiter that finds
//	          none running (sequencer.go), so while one group's fsync runs the next
//	          groups are validated and written. Claims are released on the way out.
//
// Invariants:
//   - Position order = assignment order = publication order: positions are assigned by
//     the writer queue's leader, one group at a time, and published in order by the
//     sequencer (local_sequencer.go). Writes of different groups may overlap in
//     RocksDB (so they share its write group and insert into the memtable on several
//     threads); a group's commits return only once every earlier group is written.
//     Overlapping groups never share a key: under the parallel policy each holds its
//     keys' buckets until it is published, under the serial policy a group is
//     validated against the conflict table, where the earlier groups' writes are
//     recorded at assignment, before they are written.
//   - A snapshot may hold a later group's writes without an earlier one's while both
//     are unpublished: snapshots are prefixes of RocksDB's order of writes, which
//     differs from position order only for groups in flight together. Its read
//     position is below both, so a transaction that read a key of either conflicts
//     at commit, and the groups touch different keys, so either order of them is a
//     serial order; log reads stop at the published position.
//   - A commit is visible (its position published) only once every lower position is
//     written: a reader never sees position p without p-1. With Config.Sync, published
//     also means durable: every position up to it was covered by a successful fsync.
//     A failed fsync stops the database (*SyncError); nothing is published after it.
//   - With Config.Sync a transaction never reads a commit that is not durable: RocksDB
//     makes a write visible as soon as it returns, before the fsync, so Begin does not
//     take a snapshot of its own but shares the view the sequencer took before the
//     last successful fsync (view.go).
//   - A commit is all or nothing: its data writes and its log entry are one batch. A
//     batch that fails after its positions were assigned leaves filler entries, so the
//     log stays dense; if even the fillers fail the database stops (ErrStopped).
//   - Claims are taken before the lane and released after the write, on every path,
//     so a family's physical drop never races a write that was admitted.
//   - Once validation has begun the outcome is reported whatever ctx does.
//
// Rejected alternatives:
//   - With Config.Sync, a sync=true RocksDB write per group: the writer queue's leader
//     then sits in the fsync while the next group waits behind it (2-3 commits per
//     fsync from 8 appenders, measured). RocksDB's own write grouping does not help:
//     the writer queue hands it one batch at a time.
//   - A syncer goroutine owned by the DB: every commit of a lone worker would pay two
//     goroutine hand-offs; the waiter that finds no fsync running runs it instead.
//   - Validating and writing each commit on its own goroutine, in parallel, without a
//     writer queue: RocksDB then orders the writes and positions would be assigned
//     after the fact; the queue assigns them in order and groups the commits that
//     arrive together into one batch. (Groups do overlap in RocksDB: see above.)
//   - The leader writing its group before handing the queue on, the design until
//     the third performance round: one thread inserted each group into the
//     memtable, and with one commit in flight per worker the groups held one commit
//     each, written one after another where a raw batch's writers share RocksDB's
//     write group.
//   - A per-bucket version number as the conflict record: two keys in a bucket would
//     conflict on every write. The table records the last write position per 64-bit
//     key fingerprint (see validators).
//   - Taking the snapshot lazily, at the first read: cheaper for blind writes, but a
//     transaction's reads would no longer be at its read position.

import (
	"context"
	"errors"
	"slices"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/rockline/rockline/internal/logentry"
	"github.com/rockline/rockline/lanes"
	"github.com/rockline/rockline/storage"
	"github.com/rockline/rockline/tracing"
	"github.com/rockline/rockline/validators"
)

// Commit is EngineTxn.Commit: the stages above, through a commit lane. The front
// started rockline.commit in ctx and records the outcome and total duration.
func (t *localTxn) Commit(ctx context.Context) (uint64, error) { return t.commit(ctx, false) }

// commitInline is the commit on the caller's goroutine (Txn.CommitInline): the same
// stages, concurrently with the lanes, without the lane's span or queue.
func (t *localTxn) commitInline(ctx context.Context) (uint64, error) { return t.commit(ctx, true) }

// commit runs the stages in the header above and reports the commit's position (0 for
// a transaction that wrote nothing and carried no events). The transaction is done,
// and its buffers released, whatever the outcome.
func (t *localTxn) commit(ctx context.Context, inline bool) (pos uint64, err error) {
	if t.done {
		return 0, ErrTxnDone
	}
	t.done = true
	defer t.release()
	db := t.db
	span := trace.SpanFromContext(ctx)
	if span.IsRecording() {
		span.SetAttributes(tracing.AttrReads.Int(len(t.reads)), tracing.AttrBytes.Int(t.batch.Size()))
	}
	r := t.record()
	claimed, err := t.claim() // admit
	if err != nil {
		return 0, err
	}
	defer release(claimed)
	if h := db.cfg.hooks; h != nil && h.AfterAdmit != nil {
		h.AfterAdmit()
	}
	if inline {
		pos, err = db.commitInline(ctx, r) // validate, write
	} else {
		pos, err = db.commitInLane(ctx, span, r) // lane, validate, write
	}
	if err != nil {
		return 0, closedErr(err)
	}
	return pos, db.publish(ctx, pos)
}

// commitInline validates and writes r on the caller's goroutine, holding the gate so
// Close waits for it.
func (db *localDB) commitInline(ctx context.Context, r *commitRecord) (uint64, error) {
	if err := db.enter(); err != nil {
		return 0, err
	}
	defer db.leave()
	return db.validate(ctx, r)
}

// commitInLane hands r to a lane (or runs the lane's work here when it is idle) and
// waits for its outcome. A full lane blocks until ctx ends; a closed one fails with
// ErrClosed, nothing written.
func (db *localDB) commitInLane(ctx context.Context, span trace.Span, r *commitRecord) (uint64, error) {
	r.req.Ctx, r.done, r.queuedAt = ctx, make(chan struct{}), time.Now()
	r.queued = db.stageSpan(ctx, tracing.SpanLaneWait)
	var afterSubmit func(lane int) // a test hook (internal/testhooks)
	if h := db.cfg.hooks; h != nil {
		afterSubmit = h.AfterSubmit
	}
	var lane int
	var err error
	if afterSubmit != nil {
		lane, err = db.lanes.Submit(ctx, r) // the hook wants to see every commit queued
	} else {
		lane, _, err = db.lanes.SubmitOrRun(ctx, r)
	}
	if err != nil {
		r.queued.End()
		if errors.Is(err, lanes.ErrClosed) {
			err = ErrClosed
		}
		return 0, err
	}
	span.SetAttributes(tracing.AttrLane.Int(lane))
	if afterSubmit != nil {
		afterSubmit(lane)
	}
	<-r.done
	return r.req.Pos, r.req.Err
}

// publish waits until pos, and every position below it, is published.
func (db *localDB) publish(ctx context.Context, pos uint64) error {
	if pos == 0 {
		return nil
	}
	ps := db.stageSpan(ctx, tracing.SpanPublish)
	if ps.IsRecording() {
		ps.SetAttributes(tracing.AttrPosition.Int64(int64(pos)))
	}
	waitStart := time.Now()
	err := db.seq.Wait(pos)
	db.metrics.stage(ctx, stagePublish, time.Since(waitStart))
	ps.End()
	return err
}

// claim admits the commit: it claims every family the transaction writes or read with
// tracking, so none of them is dropped physically before the write. A family dropped
// since the writes were buffered or the reads made refuses the claim and the whole
// commit fails with a *DroppedError; nothing is written and no log position is used.
// (A tracked read of a dropped family fails the commit because optimistic validation
// asks whether what the transaction read still holds at commit, and a drop removed
// every key of the family.)
func (t *localTxn) claim() ([]*storage.Family, error) {
	var claimed []*storage.Family
	take := func(f *storage.Family) error {
		if slices.Contains(claimed, f) {
			return nil
		}
		if err := f.Claim(); err != nil {
			release(claimed)
			return &DroppedError{Family: f.Name()}
		}
		claimed = append(claimed, f)
		return nil
	}
	for _, op := range t.ops {
		if err := take(op.Family); err != nil {
			return nil, err
		}
	}
	for _, p := range t.positioned {
		if err := take(p.family); err != nil {
			return nil, err
		}
	}
	for _, r := range t.ranges {
		if err := take(r.family); err != nil {
			return nil, err
		}
	}
	for _, f := range t.readFams {
		if err := take(f); err != nil {
			return nil, err
		}
	}
	return claimed, nil
}

// release ends the claims of a commit; the last release of a dropped family runs its
// physical drop here.
func release(claimed []*storage.Family) {
	for _, f := range claimed {
		f.Release()
	}
}

// record builds the transaction's commit record.
func (t *localTxn) record() *commitRecord {
	r := newRecord(t.encodeEntry)
	r.c.ReadPos, r.c.Reads, r.c.Writes, r.c.Marks, r.c.Ops, r.c.Batch = t.readPos, t.reads, t.writes, t.marks, t.ops, t.batch
	r.c.HasRecord = len(t.events) > 0 || len(t.positioned) > 0 || len(t.ranges) > 0
	return r
}

// encodeEntry is the transaction's Env.Entry: it encodes the log entry with every event
// and write, and adds to b (after the ops it holds) the DeleteRange deletions and the
// PutAtCommit writes, which need the position.
func (t *localTxn) encodeEntry(b *storage.Batch, dst []byte, pos uint64, unixNano int64) ([]byte, error) {
	var enc logentry.Encoder
	nWrites := len(t.ops) + len(t.ranges) + len(t.positioned)
	switch {
	case t.taggedEvents > 0:
		enc = logentry.NewTaggedEncoder(dst, pos, unixNano, t.streamEvents > 0, len(t.events), nWrites)
	case t.streamEvents > 0:
		enc = logentry.NewStreamEncoder(dst, pos, unixNano, len(t.events), nWrites)
	default:
		enc = logentry.NewEncoder(dst, pos, unixNano, false, len(t.events), nWrites)
	}
	for i := range t.events {
		e := &t.events[i]
		enc.TaggedEvent(e.stream, e.rev, e.ID, e.Type, e.Data, e.Metadata, e.Tags)
	}
	for _, op := range t.ops {
		enc.Write(op.Family.QualifiedName(), op.Key, op.Value, op.Delete)
	}
	for _, r := range t.ranges { // after the ops in the batch too: b holds them already
		if err := b.DeleteRange(r.family, r.start, r.end); err != nil {
			return nil, t.mapBatchErr(r.family, err)
		}
		enc.DeleteRange(r.family.QualifiedName(), r.start, r.end)
	}
	var scratch []byte
	for _, p := range t.positioned {
		k, v, out, err := t.putPositioned(b, p, pos, scratch)
		scratch = out
		if err != nil {
			return nil, err
		}
		enc.Write(p.family.QualifiedName(), k, v, false)
	}
	return enc.Finish(), nil
}

// validate runs the validator on one commit with its stage spans and metrics.
func (db *localDB) validate(ctx context.Context, r *commitRecord) (uint64, error) {
	st := db.newStageTrace(ctx, r)
	pos, err := db.val.Commit(ctx, &r.c)
	st.finish(err)
	return pos, err
}

// stageTrace times a commit's validate and write stages (metrics, and spans under a
// recording commit span). The validator reports the stage boundaries through the
// commit record's Observe, on the goroutine that writes the commit's group; finish
// runs after the validator returned, so the fields need no lock.
type stageTrace struct {
	db             *localDB
	ctx            context.Context
	c              *validators.Commit
	vs, ws         trace.Span // validate (nil once ended), write (nil until started)
	start, checked time.Time
}

// newStageTrace opens the validate span and hangs the trace on r, whose Observe
// reports to it.
func (db *localDB) newStageTrace(ctx context.Context, r *commitRecord) *stageTrace {
	st := &stageTrace{db: db, ctx: ctx, c: &r.c, vs: db.stageSpan(ctx, tracing.SpanValidate), start: time.Now()}
	r.trace = st
	return st
}

func (st *stageTrace) observe(s validators.Stage) {
	switch s {
	case validators.Validated:
		st.checked = time.Now()
		st.db.metrics.stage(st.ctx, stageValidate, st.checked.Sub(st.start))
		st.vs.End()
		st.vs = nil
		st.ws = st.db.stageSpan(st.ctx, tracing.SpanWrite)
		if st.ws.IsRecording() {
			st.ws.SetAttributes(tracing.AttrBytes.Int(st.c.Batch.Size()))
		}
	case validators.Written:
		st.db.metrics.stage(st.ctx, stageWrite, time.Since(st.checked))
		st.ws.End()
	}
}

// finish ends the validate span if validation never passed, marking it with err.
func (st *stageTrace) finish(err error) {
	if st.vs == nil {
		return
	}
	if err != nil && st.vs.IsRecording() {
		st.vs.SetStatus(codes.Error, err.Error())
		st.vs.SetAttributes(tracing.AttrErrorType.String(errorType(err)))
	}
	st.vs.End()
}

// stageSpan starts a stage span under the commit span in ctx. Under a commit span
// that is not recording (no SDK, or sampled out) it starts nothing and returns that
// span, whose methods do nothing: a child of an unsampled parent would not be
// recorded by a parent-based sampler either, and skipping it saves an allocation or
// two per stage on every untraced commit.
func (db *localDB) stageSpan(ctx context.Context, name string) trace.Span {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return parent
	}
	_, s := db.tracer.Start(ctx, name)
	return s
}
