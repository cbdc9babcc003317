package validators

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"time"

	"github.com/rockline/rockline/storage"
)

// Policy names accepted by New.
const (
	Parallel = "parallel"
	Serial   = "serial"
)

// Bucket pool bounds and default for the parallel policy.
const (
	DefaultBuckets = 65536
	MinBuckets     = 16
	MaxBuckets     = 16 << 20
	// BucketBytes is the memory of one bucket: a sync.Mutex.
	BucketBytes = 8
)

// Validator validates a commit and, only if it holds, writes it, as one atomic step.
// Implementations are safe for concurrent use by the commit lanes and CommitInline
// callers.
type Validator interface {
	// Commit validates c against every commit published after c.ReadPos and writes it.
	// It returns the commit's log position, or ErrConflict, ErrTxnTooOld, a Check's
	// error, ctx's error (only before validation started), or a storage error; on any
	// error nothing of c is visible. A commit with no writes and no events is not
	// validated and gets position 0.
	Commit(ctx context.Context, c *Commit) (uint64, error)
	// CommitGroup commits several requests as Commit would, validated in slice order
	// (a later request conflicts with an earlier one's writes), writing the survivors
	// together where the policy allows. It sets each request's Pos and Err.
	CommitGroup(reqs []*Request)
	// Policy returns the policy name.
	Policy() string
	// PoolBytes returns the memory held by the bucket pool (0 for serial).
	PoolBytes() int
}

// Op is one buffered write of a commit.
type Op struct {
	Family *storage.Family
	Key    []byte
	Value  []byte
	Delete bool
}

// Commit is what a transaction hands to a validator.
type Commit struct {
	// ReadPos is the published position the transaction read at.
	ReadPos uint64
	// Reads are the fingerprints of keys read with tracking; Writes of keys written
	// (one per Op, in Op order). Both are checked; only Writes are recorded.
	Reads, Writes []uint64
	// Marks are the fingerprints of keys the commit writes without checking them
	// (pipeline.Txn.PutAtCommit's keys, whose values Record.Entry makes): recorded
	// as Writes are, so a later commit that read one with tracking before this one
	// was published conflicts with it, but never checked, so two commits marking one
	// key do not conflict with each other. A validator that ignores Marks lets such a
	// reader commit: an external one (Config.Validator) must record them too.
	Marks []uint64
	// Ops are the buffered writes, in order; Batch holds the same writes encoded.
	Ops   []Op
	Batch *storage.Batch
	// HasRecord says whether the commit's log entry (Env.Entry) carries something
	// beyond Ops (events, a family creation or drop), so that a commit with no Ops
	// still gets a position.
	HasRecord bool
	// System marks a record of rockline's own (a family creation or drop): Checks,
	// which judge application commits, do not run on it.
	System bool
	// Time is set by the validator to the commit time written in the log entry.
	Time time.Time
	// Record is the caller's side of the commit, which the writer calls back into:
	// the encoder of its log entry and the observer of its stages. Required: a
	// request whose commit has none fails with ErrInvalidEnv.
	Record Record
}

// Record is the caller's side of one commit (the local engine's commit record, which
// travels the whole commit path). Both methods are writer calls (see Env): they run
// on the goroutine writing the commit's group, possibly beside other groups' writer
// calls, and must touch only the commit's own state.
type Record interface {
	// Entry appends the commit's log entry at position pos, committed at unixNano, to
	// dst and returns it. It may add to b writes that need the position (the
	// caller's positioned writes); the entry it encodes must list them. It is called
	// once the commit passed validation and its position was assigned, in position
	// order; an error fails the whole group's write, which is then filled.
	Entry(b *storage.Batch, dst []byte, pos uint64, unixNano int64) ([]byte, error)
	// Observe is told of the commit's stages: Validated just before its group is
	// assigned positions and written, then Written once the write returned or was
	// given up (whatever the outcome), once each, in that order. The pipeline opens
	// its validate and write stage spans from it.
	Observe(s Stage)
}

// Stage is a point in a commit's validation step reported to Env.Observe.
type Stage int

// Stages reported to Env.Observe.
const (
	Validated Stage = iota + 1
	Written
)

func (c *Commit) empty() bool { return len(c.Ops) == 0 && !c.HasRecord }

// View reads the state a commit applies to, for Checks.
type View interface {
	// Get returns the value of key in f as the commit will see it, or an error matching
	// storage.ErrNotFound.
	Get(f *storage.Family, key []byte) ([]byte, error)
}

// Check is an application rule run inside the validation step. Returning an error
// rejects the commit with that error; nothing is written.
type Check func(ctx context.Context, c *Commit, v View) error

// Options configure a validator's policy; what it calls back into is its Env.
type Options struct {
	// Buckets is the size of the parallel policy's lock pool, MinBuckets..MaxBuckets;
	// 0 means DefaultBuckets. The serial policy ignores it.
	Buckets int
	// Checks run in order inside the validation of every commit that is not System,
	// after its conflict check and before its write; the first error rejects it.
	Checks []Check
}

// New returns the validator for policy ("parallel" or "serial"), calling back into
// env. It fails with ErrInvalidPolicy for another policy, and with an error matching
// ErrInvalidEnv when env lacks a required field.
func New(policy string, env Env, o Options) (Validator, error) {
	if err := env.check(len(o.Checks) > 0); err != nil {
		return nil, err
	}
	switch policy {
	case Parallel, "":
		return newBuckets(env, o)
	case Serial:
		return newWriteGroup(env, o), nil
	}
	return nil, fmt.Errorf("%w: %q (want %q or %q)", ErrInvalidPolicy, policy, Parallel, Serial)
}

// core is what both policies share: the environment, the checks and the table.
type core struct {
	env    Env
	checks []Check
	table  *table
	// dense is the last dense watermark a group was given to write; only the
	// writer queue's leader, before its handoff, reads or sets it (denseDue).
	dense uint64
}

func newCore(env Env, o Options) core {
	return core{env: env, checks: o.Checks, table: newTable(env.Positions.Published())}
}

func (c *core) runChecks(ctx context.Context, cm *Commit, v View) error {
	for _, check := range c.checks {
		if err := check(ctx, cm, v); err != nil {
			return err
		}
	}
	return nil
}

func (c *core) observe(cm *Commit, s Stage) { cm.Record.Observe(s) }

// appendEntry adds the log entry of cm at pos to b.
func (c *core) appendEntry(b *storage.Batch, cm *Commit, pos uint64, scratch []byte) ([]byte, error) {
	key := c.env.LogKey(nil, pos)
	scratch, err := cm.Record.Entry(b, scratch[:0], pos, cm.Time.UnixNano())
	if err != nil {
		return scratch, err
	}
	return scratch, b.Put(c.env.Log, key, scratch)
}

// DenseKey is the log-family key whose value (a uvarint) is a position through which
// the log is known to be dense, so that after a crash only the positions above it need
// to be checked for gaps. A group rewrites it, with the published position at the
// moment its own positions were assigned, once that position is denseEvery past the
// value last written: every position up to it was written before the group's batch
// was built, so it precedes that batch in the WAL and survives whenever the batch
// does. The empty key sorts before every position key.
var DenseKey = []byte{}

// denseEvery is how far the published position moves before a group rewrites
// DenseKey. Writing it with every group cost a third RocksDB key per 1-key commit;
// every denseEvery positions, recovery reads at most about denseEvery entries more
// (well under a millisecond).
const denseEvery = 1024

// denseDue returns the dense watermark the group being assigned should write, or 0
// when the last one written is recent enough. Leader only (see core.dense).
func (c *core) denseDue() uint64 {
	p := c.env.Positions.Published()
	if p < c.dense+denseEvery {
		return 0
	}
	c.dense = p
	return p
}

// appendDense adds the dense watermark, position dense, to b.
func (c *core) appendDense(b *storage.Batch, dense uint64) error {
	var buf [binary.MaxVarintLen64]byte
	n := binary.PutUvarint(buf[:], dense)
	return b.Put(c.env.Log, DenseKey, buf[:n])
}

// groupBatches pools the batches several commits of a group are copied into. A
// batch over maxPooledBatch is dropped rather than pinned.
var groupBatches = sync.Pool{New: func() any { return storage.NewBatch() }}

const maxPooledBatch = 4 << 20

func (c *core) groupBatch() *storage.Batch {
	b := groupBatches.Get().(*storage.Batch)
	b.Reset()
	return b
}

func (c *core) putGroupBatch(b *storage.Batch) {
	if b.Size() <= maxPooledBatch {
		groupBatches.Put(b)
	}
}

// fill writes filler entries for positions first..last after their commit's write
// failed, and publishes them. If the fillers cannot be written the positions stop.
func (c *core) fill(first, last uint64) {
	b := storage.NewBatch()
	var scratch []byte
	for p := first; p <= last; p++ {
		scratch = c.env.Filler(scratch[:0], p)
		if err := b.Put(c.env.Log, c.env.LogKey(nil, p), scratch); err != nil {
			c.env.Positions.Stop(p, err)
			return
		}
	}
	if err := c.env.Write(b); err != nil {
		c.env.Positions.Stop(first, err)
		return
	}
	// An out-of-order Publish stops the positions itself; the commits fail with their
	// write's error either way.
	_ = c.env.Positions.Publish(first, last)
}

func (c *core) stopped() error {
	return c.env.Positions.Err()
}
