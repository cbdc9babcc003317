package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/rockline/rockline/tracing"
)

// Txn is an optimistic transaction. It reads a consistent snapshot (every commit
// published before Begin, and possibly commits that were completing concurrently with
// it; with Config.Sync only commits already durable) merged with its own buffered
// writes, and buffers its writes until Commit. A Txn is single-use and not safe for
// concurrent use: after Commit, CommitInline or Discard every method returns
// ErrTxnDone.
//
// Keys read with Get (and keys returned by an iterator) are tracked: the commit fails
// with ErrConflict if any of them, or any key the transaction writes, was written by
// another commit after Begin. That prevents lost updates and write skew.
type Txn struct {
	db      *DB
	eng     EngineTxn
	ctx     context.Context // bounds the engine's reads: Update's, or Background
	readPos uint64
	err     error // set when Begin failed
	done    bool
	writes  int // Puts and Deletes buffered
	events  int // events added
}

// Begin starts a transaction at the current published log position. It never fails
// itself: on a closed database the transaction's calls return ErrClosed, and while a
// Replay holds the database they return ErrReplaying.
func (db *DB) Begin() *Txn { return db.begin(context.Background()) }

// begin is Begin; ctx bounds a remote engine's reads (the local engine's need none).
func (db *DB) begin(ctx context.Context) *Txn {
	t := &Txn{db: db, ctx: ctx}
	if db.closing.Load() {
		t.err, t.done = ErrClosed, true
		return t
	}
	et, err := db.eng.Begin(ctx)
	if err != nil {
		t.err, t.done = err, true
		return t
	}
	t.eng, t.readPos = et, et.ReadPosition()
	db.saw(t.readPos)
	return t
}

// DB returns the database the transaction belongs to.
func (t *Txn) DB() *DB { return t.db }

// ReadPosition returns the published log position the transaction reads at.
func (t *Txn) ReadPosition() uint64 { return t.readPos }

func (t *Txn) usable() error {
	if t.err != nil {
		return t.err
	}
	if t.done {
		return ErrTxnDone
	}
	return nil
}

func checkKey(op string, key []byte) error {
	if len(key) == 0 {
		return &ArgumentError{Op: op, Arg: "key", Reason: "must not be empty"}
	}
	if len(key) > MaxKeySize {
		return &ArgumentError{Op: op, Arg: "key", Reason: fmt.Sprintf("%d bytes exceeds the limit of %d", len(key), MaxKeySize), Err: ErrTooLarge}
	}
	return nil
}

func checkValue(op string, value []byte) error {
	if len(value) > MaxValueSize {
		return &ArgumentError{Op: op, Arg: "value", Reason: fmt.Sprintf("%d bytes exceeds the limit of %d", len(value), MaxValueSize), Err: ErrTooLarge}
	}
	return nil
}

// Get returns the value of key in cf as the transaction sees it, or ErrNotFound. The
// read is tracked for conflicts. The returned slice is the caller's.
func (t *Txn) Get(cf *ColumnFamily, key []byte) ([]byte, error) {
	return t.get("Txn.Get", cf, key, true)
}

// GetUntracked is Get without conflict tracking: a later change to the key by another
// commit does not fail this transaction.
func (t *Txn) GetUntracked(cf *ColumnFamily, key []byte) ([]byte, error) {
	return t.get("Txn.GetUntracked", cf, key, false)
}

func (t *Txn) get(op string, cf *ColumnFamily, key []byte, track bool) ([]byte, error) {
	if err := t.usable(); err != nil {
		return nil, err
	}
	f, err := t.db.family(op, cf)
	if err != nil {
		return nil, err
	}
	if err := checkKey(op, key); err != nil {
		return nil, err
	}
	v, found, err := t.eng.Get(t.ctx, f, key, track)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, ErrNotFound
	}
	return v, nil
}

// writable checks the transaction, the database and the family of a write and
// returns the engine's family.
func (t *Txn) writable(op string, cf *ColumnFamily) (EngineFamily, error) {
	if err := t.usable(); err != nil {
		return nil, err
	}
	if err := t.db.writable(); err != nil {
		return nil, err
	}
	return t.db.family(op, cf)
}

// Put buffers key=value in cf. The key must be 1..64 KiB and the value at most 1 GiB
// (MaxKeySize, MaxValueSize); key and value are copied.
func (t *Txn) Put(cf *ColumnFamily, key, value []byte) error {
	return t.write("Txn.Put", cf, key, value, false)
}

// Delete buffers a deletion of key in cf.
func (t *Txn) Delete(cf *ColumnFamily, key []byte) error {
	return t.write("Txn.Delete", cf, key, nil, true)
}

// write is Put (a value) and Delete (del) after their checks.
func (t *Txn) write(op string, cf *ColumnFamily, key, value []byte, del bool) error {
	f, err := t.writable(op, cf)
	if err != nil {
		return err
	}
	if err := checkKey(op, key); err != nil {
		return err
	}
	if del {
		err = t.eng.Delete(f, key)
	} else if err = checkValue(op, value); err == nil {
		err = t.eng.Put(f, key, value)
	}
	if err == nil {
		t.writes++
	}
	return err
}

// DeleteRange buffers the deletion of every key of cf in [start, end), as one RocksDB
// range tombstone on the local engine: the cheap way to delete many keys at once. It
// is part of the commit as any write is (the same atomic batch, and the log entry's
// writes, so Replay and Rebuild reproduce it), with three differences: it is not
// checked for conflicts (a key another commit writes inside the range meanwhile is
// deleted or not by commit order), the transaction's own reads do not see it, and a
// transaction may not also Put or Delete a key inside a range it deletes (an
// *ArgumentError, from whichever call comes second), so the order of the calls never
// matters. start must not be after end; both are copied. Engines that cannot delete
// a range atomically refuse it with a *NotSupportedError.
func (t *Txn) DeleteRange(cf *ColumnFamily, start, end []byte) error {
	const op = "Txn.DeleteRange"
	if err := t.usable(); err != nil {
		return err
	}
	rd, ok := t.eng.(EngineRangeDeleter)
	if !ok {
		return t.db.notSupported(op)
	}
	f, err := t.writable(op, cf)
	if err != nil {
		return err
	}
	if err := checkKey(op, start); err != nil {
		return err
	}
	if err := checkKey(op, end); err != nil {
		return err
	}
	if bytes.Compare(start, end) > 0 {
		return &ArgumentError{Op: op, Arg: "start", Reason: fmt.Sprintf("%q is after the range end %q", start, end)}
	}
	return rd.DeleteRange(f, start, end)
}

// PutAtCommit buffers a put of key in cf whose value is made at commit by value, from
// payload and the commit's log position. The write is part of the commit as any Put
// is: in the same atomic batch, and in the log entry's writes (after the Puts and
// Deletes), so Replay and Rebuild reproduce it. Unlike a Put it is not checked for
// conflicts (two transactions putting one key at commit both commit), but it counts
// as a write for others: a transaction that read the key with tracking before this
// commit was published fails with ErrConflict, on every engine (unless value was made
// by NewUntrackedPositionedValue, for keys never read with tracking). The transaction's own
// reads (Get, iterators) do not see it; a layer
// uses it for records whose key is owned by a write that is checked (the event store
// writes a stream's head with Put and the head's new events with PutAtCommit). A
// transaction with only PutAtCommit writes still gets a position. key and payload are
// copied; key and the value made must fit MaxKeySize and MaxValueSize (a value over
// the limit fails the commit with an *ArgumentError).
func (t *Txn) PutAtCommit(cf *ColumnFamily, key, payload []byte, value PositionedValue) error {
	const op = "Txn.PutAtCommit"
	f, err := t.writable(op, cf)
	if err != nil {
		return err
	}
	if err := checkKey(op, key); err != nil {
		return err
	}
	if value == nil {
		return &ArgumentError{Op: op, Arg: "value", Reason: "must not be nil"}
	}
	if fv, ok := value.(funcValue); ok && fv.fn == nil {
		return &ArgumentError{Op: op, Arg: "value", Reason: "has a nil function"}
	}
	return t.eng.PutAtCommit(f, key, payload, value)
}

// PutKeyAtCommit buffers a put of value in cf under a key made at commit by key, from
// payload and the commit's log position: records ordered by the position of the
// commit that wrote them (the event store's index entries) are written with it, in
// the same atomic batch and in the log entry's writes (after the PutAtCommit writes),
// so Replay and Rebuild reproduce them. Keys made at commit are never read with
// tracking: the write is not checked for conflicts and fails no other commit. Two
// writes of one commit must make distinct keys (the last one wins otherwise). payload
// and value are copied; value must fit MaxValueSize and the key made MaxKeySize (a
// longer one fails the commit with an *ArgumentError). An engine without keys made at
// commit (the JetStream engine) refuses with a *NotSupportedError.
func (t *Txn) PutKeyAtCommit(cf *ColumnFamily, key PositionedValue, payload, value []byte) error {
	const op = "Txn.PutKeyAtCommit"
	if err := t.usable(); err != nil {
		return err
	}
	km, ok := t.eng.(EngineKeyMaker)
	if !ok {
		return t.db.notSupported(op)
	}
	f, err := t.writable(op, cf)
	if err != nil {
		return err
	}
	if key == nil {
		return &ArgumentError{Op: op, Arg: "key", Reason: "must not be nil"}
	}
	if fv, ok := key.(funcValue); ok && fv.fn == nil {
		return &ArgumentError{Op: op, Arg: "key", Reason: "has a nil function"}
	}
	if len(payload) > MaxKeySize {
		return &ArgumentError{Op: op, Arg: "payload", Reason: fmt.Sprintf("%d bytes exceeds the key limit of %d", len(payload), MaxKeySize), Err: ErrTooLarge}
	}
	if err := checkValue(op, value); err != nil {
		return err
	}
	return km.PutKeyAtCommit(f, key, payload, value)
}

// AddEvents attaches events to the transaction's log entry. They are recorded at the
// commit's log position, in order, and delivered to subscribers; a transaction with
// events but no writes still gets a position. Every event is checked first; on an
// *ArgumentError none is added.
func (t *Txn) AddEvents(events ...Event) error {
	if err := t.usable(); err != nil {
		return err
	}
	if err := t.db.writable(); err != nil {
		return err
	}
	if err := CheckEvents("Txn.AddEvents", events); err != nil {
		return err
	}
	if err := t.eng.AddEvents("", 0, events); err != nil {
		return err
	}
	t.events += len(events)
	return nil
}

// AddStreamEvents attaches events to the transaction's log entry, as AddEvents does,
// recorded as the events of stream at revisions first, first+1, and so on: every
// reader then hands them out with that stream and revision. It is the hook of a layer
// that keeps streams (package eventstore): the core records the names and revisions
// it is given and checks neither against anything. stream must not be empty; every
// event is checked first, and on an *ArgumentError none is added.
func (t *Txn) AddStreamEvents(stream string, first uint64, events ...Event) error {
	const op = "Txn.AddStreamEvents"
	if err := t.usable(); err != nil {
		return err
	}
	if err := t.db.writable(); err != nil {
		return err
	}
	if stream == "" {
		return &ArgumentError{Op: op, Arg: "stream", Reason: "must not be empty"}
	}
	if err := CheckEvents(op, events); err != nil {
		return err
	}
	if err := t.eng.AddEvents(stream, first, events); err != nil {
		return err
	}
	t.events += len(events)
	return nil
}

// EventCount returns the number of events the transaction carries so far: the index,
// within the commit's log entry, that the next event added will have.
func (t *Txn) EventCount() int { return t.events }

// Len returns the number of Puts and Deletes buffered (0 once the transaction is
// done).
func (t *Txn) Len() int {
	if t.done {
		return 0
	}
	return t.writes
}

// Discard ends the transaction without committing. It is safe to call more than once
// and after Commit.
func (t *Txn) Discard() {
	if t.done {
		return
	}
	t.done = true
	t.eng.Discard()
}

// NewIterator opens an iterator on cf. Position it with First or Seek.
func (t *Txn) NewIterator(cf *ColumnFamily, o IterOptions) (*Iterator, error) {
	const op = "Txn.NewIterator"
	if err := t.usable(); err != nil {
		return nil, err
	}
	f, err := t.db.family(op, cf)
	if err != nil {
		return nil, err
	}
	it, err := t.eng.NewIterator(t.ctx, f, o)
	if err != nil {
		return nil, err
	}
	return &Iterator{eng: it}, nil
}

// Commit hands the transaction to the engine and waits for the outcome. On the local
// engine it goes to a commit lane (when the lane is idle, its work runs on the
// caller's goroutine, saving two hand-offs; the outcome and the lane's order are the
// same); while the lane is full it blocks until ctx ends, then returns ctx.Err() with
// nothing written, and a commit whose ctx ends while it waits in the queue is skipped
// with ctx.Err(). Once validation has begun the outcome is reported whatever ctx does.
// It returns nil once the commit is written and its log position published, so a
// transaction begun after Commit returns sees it. Errors: ErrConflict, ErrTxnTooOld,
// ErrTxnDone, ErrClosed, ErrColumnFamilyDropped, a Check's error, a storage error. The
// transaction is done whatever the outcome.
func (t *Txn) Commit(ctx context.Context) error {
	_, err := t.commit(ctx, false)
	return err
}

// CommitInline runs the same stages as Commit on the caller's goroutine, concurrently
// with the lanes (no lane span, no queue). It was called CommitSync; "sync" in rockline
// now means only what it means to Pebble and bbolt, an fsync (Config.Sync). Engines
// without lanes commit as Commit does.
func (t *Txn) CommitInline() error {
	_, err := t.commit(context.Background(), true)
	return err
}

// CommitInlineContext is CommitInline with a context: its span becomes the parent of the
// commit's spans, and a context that has already ended fails the commit with its
// error before validation.
func (t *Txn) CommitInlineContext(ctx context.Context) error {
	_, err := t.commit(ctx, true)
	return err
}

// CommitPosition is Commit that also returns the commit's log position (0 when the
// transaction wrote nothing and carried no events).
func (t *Txn) CommitPosition(ctx context.Context) (uint64, error) {
	return t.commit(ctx, false)
}

// inlineCommitter is an EngineTxn with a commit on the caller's goroutine beside
// its ordinary one (the local engine's, which skips the lanes).
type inlineCommitter interface {
	commitInline(ctx context.Context) (uint64, error)
}

// commit is every Commit variant: the rockline.commit span and the commit metrics
// around the engine's commit (the local engine's stages, in local_commit.go, are
// spans under it). The transaction is done whatever the outcome.
func (t *Txn) commit(ctx context.Context, inline bool) (pos uint64, err error) {
	if err := t.usable(); err != nil {
		return 0, err
	}
	t.done = true
	db := t.db
	defer t.eng.Discard()
	ctx, span := db.tracer.Start(ctx, tracing.SpanCommit)
	if span.IsRecording() {
		span.SetAttributes(
			tracing.AttrPolicy.String(db.name),
			tracing.AttrInline.Bool(inline),
			tracing.AttrKeys.Int(t.writes),
			tracing.AttrEvents.Int(t.events),
		)
	}
	start := time.Now()
	defer func() {
		endCommitSpan(span, pos, err)
		db.metrics.outcome(ctx, err)
		db.metrics.stage(ctx, stageTotal, time.Since(start))
	}()
	if db.closing.Load() {
		return 0, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	var ic inlineCommitter
	if inline {
		ic, _ = t.eng.(inlineCommitter)
	}
	if ic != nil {
		pos, err = ic.commitInline(ctx)
	} else {
		pos, err = t.eng.Commit(ctx)
	}
	if err != nil {
		return 0, err
	}
	db.saw(pos)
	return pos, nil
}

func endCommitSpan(span trace.Span, pos uint64, err error) {
	if !span.IsRecording() {
		span.End()
		return
	}
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		span.SetAttributes(tracing.AttrOutcome.String(tracing.OutcomeFailed), tracing.AttrErrorType.String(errorType(err)))
	} else {
		span.SetAttributes(tracing.AttrOutcome.String(tracing.OutcomeCommitted), attribute.Int64(string(tracing.AttrPosition), int64(pos)))
	}
	span.End()
}
