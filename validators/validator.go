package validators

import (
	"context"
	"encoding/binary"
	"fmt"
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

// EntryFunc appends the log entry for a commit at position pos, committed at unixNano,
// to dst and returns it. It may also add writes that depend on the position to b (for
// example a stream index); those writes must be part of the entry it encodes.
type EntryFunc func(b *storage.Batch, dst []byte, pos uint64, unixNano int64) ([]byte, error)

// Commit is what a transaction hands to a validator.
type Commit struct {
	// ReadPos is the published position the transaction read at.
	ReadPos uint64
	// Reads are the fingerprints of keys read with tracking; Writes of keys written
	// (one per Op, in Op order). Both are checked; only Writes are recorded.
	Reads, Writes []uint64
	// Ops are the buffered writes, in order; Batch holds the same writes encoded.
	Ops   []Op
	Batch *storage.Batch
	// Entry encodes the commit's log entry; HasRecord says whether the entry carries
	// something beyond Ops (events, a family creation or drop), so that a commit with
	// no Ops still gets a position.
	Entry     EntryFunc
	HasRecord bool
	// System marks a record of rockline's own (a family creation or drop): Checks,
	// which judge application commits, do not run on it.
	System bool
	// Time is set by the validator to the commit time written in the log entry.
	Time time.Time
	// Observe, when set, is called when validation passed (Validated, just before the
	// write) and when the write returned (Written); the pipeline opens its stage spans
	// from it. It runs on the goroutine that writes the commit's group, which is the
	// group's leader and may be another commit's goroutine, so it must be quick and
	// touch only the commit's own state.
	Observe func(Stage)
}

// Stage is a point in a commit's validation step reported to Commit.Observe.
type Stage int

// Stages reported to Commit.Observe.
const (
	Validated Stage = iota + 1
	Written
)

func (c *Commit) observe(s Stage) {
	if c.Observe != nil {
		c.Observe(s)
	}
}

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

// Options configure a validator.
type Options struct {
	Store     *storage.DB
	Log       *storage.Family // the family that holds log entries
	Sequencer *Sequencer
	Buckets   int // parallel only; 0 means DefaultBuckets
	Checks    []Check
	// LogKey appends the storage key of log position pos to dst.
	LogKey func(dst []byte, pos uint64) []byte
	// Filler appends a filler entry for pos to dst.
	Filler func(dst []byte, pos uint64) []byte
}

// New returns the validator for policy ("parallel" or "serial").
func New(policy string, o Options) (Validator, error) {
	switch policy {
	case Parallel, "":
		return newBuckets(o)
	case Serial:
		return newWriteGroup(o), nil
	}
	return nil, fmt.Errorf("%w: %q (want %q or %q)", ErrInvalidPolicy, policy, Parallel, Serial)
}

// core is what both policies share: the store, the table, the sequencer and the checks.
type core struct {
	Options
	table *table
}

func newCore(o Options) core {
	return core{Options: o, table: newTable(o.Sequencer.Published())}
}

func (c *core) runChecks(ctx context.Context, cm *Commit, v View) error {
	for _, check := range c.Checks {
		if err := check(ctx, cm, v); err != nil {
			return err
		}
	}
	return nil
}

// appendEntry adds the log entry of cm at pos to b.
func (c *core) appendEntry(b *storage.Batch, cm *Commit, pos uint64, scratch []byte) ([]byte, error) {
	key := c.LogKey(nil, pos)
	scratch, err := cm.Entry(b, scratch[:0], pos, cm.Time.UnixNano())
	if err != nil {
		return scratch, err
	}
	return scratch, b.Put(c.Log, key, scratch)
}

// DenseKey is the log-family key whose value (a uvarint) is a position through which
// the log is known to be dense. Every commit batch rewrites it with the published
// position at the moment its own position was assigned, so after a crash only the
// positions above it need to be checked for gaps. The empty key sorts before every
// position key.
var DenseKey = []byte{}

// appendDense adds the dense watermark to b.
func (c *core) appendDense(b *storage.Batch) error {
	var buf [binary.MaxVarintLen64]byte
	n := binary.PutUvarint(buf[:], c.Sequencer.Published())
	return b.Put(c.Log, DenseKey, buf[:n])
}

// fill writes filler entries for positions first..last after their commit's write
// failed, and marks them done. If the fillers cannot be written the sequencer stops.
func (c *core) fill(first, last uint64) {
	b := storage.NewBatch()
	var scratch []byte
	for p := first; p <= last; p++ {
		scratch = c.Filler(scratch[:0], p)
		if err := b.Put(c.Log, c.LogKey(nil, p), scratch); err != nil {
			c.Sequencer.stop(p, err)
			return
		}
	}
	if err := c.Store.Write(b); err != nil {
		c.Sequencer.stop(first, err)
		return
	}
	c.Sequencer.markDone(first, last)
}

func (c *core) stopped() error {
	return c.Sequencer.Err()
}
