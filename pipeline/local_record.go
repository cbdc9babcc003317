package pipeline

import (
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/rockline/rockline/storage"
	"github.com/rockline/rockline/validators"
)

// commitRecord is one commit on its way through the local engine, from admission to
// publication, as Pebble's *Batch travels its commit pipeline: the validator's view of
// it (c, whose Record is the record itself), its place in a validator group (req,
// whose Commit is &c), how its log entry is encoded, the trace of its stages and, on
// the lane path, the span of its wait in the lane and the channel its committer
// waits on. No copy of the commit is made on the way.
//
// The committing goroutine owns it until the lane takes it, the lane's goroutine
// from runTasks until it closes done, and the committing goroutine again afterwards;
// the validator's writer calls Entry and Observe in between, while it holds the
// commit's group.
type commitRecord struct {
	c   validators.Commit
	req validators.Request
	// entry encodes the log entry: a transaction's (localTxn.encodeEntry) or a family
	// change's (recordFamily).
	entry func(b *storage.Batch, dst []byte, pos uint64, unixNano int64) ([]byte, error)
	trace *stageTrace // set once the commit enters the validator

	queuedAt time.Time
	queued   trace.Span    // rockline.lane.wait, ended when the lane picks the record up
	done     chan struct{} // closed by the lane once req holds the outcome
}

// newRecord returns a record whose log entry entry encodes; the caller fills c.
func newRecord(entry func(b *storage.Batch, dst []byte, pos uint64, unixNano int64) ([]byte, error)) *commitRecord {
	r := &commitRecord{entry: entry}
	r.c.Record = r
	r.req.Commit = &r.c
	return r
}

// Entry is validators.Record.Entry.
func (r *commitRecord) Entry(b *storage.Batch, dst []byte, pos uint64, unixNano int64) ([]byte, error) {
	return r.entry(b, dst, pos, unixNano)
}

// Observe is validators.Record.Observe: the stage spans and metrics.
func (r *commitRecord) Observe(s validators.Stage) {
	if r.trace != nil {
		r.trace.observe(s)
	}
}

// maxLaneBatch bounds how many queued commits a lane hands the validator at once.
const maxLaneBatch = 64

// runTasks is the lanes' run function, on the lane's goroutine: it hands the commits
// queued in the lane to the validator as one group (validated in queue order, written
// together where the policy allows) and wakes each committer.
func (db *localDB) runTasks(_ int, recs []*commitRecord) {
	reqs := make([]*validators.Request, len(recs))
	for i, r := range recs {
		r.queued.End()
		db.metrics.stage(r.req.Ctx, stageLaneWait, time.Since(r.queuedAt))
		r.trace = db.newStageTrace(r.req.Ctx, r)
		reqs[i] = &r.req
	}
	db.val.CommitGroup(reqs)
	for _, r := range recs {
		r.trace.finish(r.req.Err)
		close(r.done)
	}
}
