package jetstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/nats-io/nats.go"

	"github.com/rockline/rockline/eventstore/revision"
	"github.com/rockline/rockline/pipeline"
)

// Txn is an optimistic transaction on a Partition with the local engine's rules: it
// reads the partition as of the position it began at (every read tracked), buffers its
// writes and appends, and Commit sends them as one Commit whose checks fail it if any
// key it read or wrote, or any stream it appended to, changed after that position.
// A Txn is not safe for concurrent use, and is done after Commit or Discard.
//
// Invariants:
//   - at is a position the stream leader reported (Begin's Position), so every read
//     at it is a leaderPos read: a replica behind it is waited for without asking the
//     leader first (read.go, posOrigin).
//   - reads holds the version, as of at, of every key read; a written key's
//     expectation is that version (read now if the key was written without a read),
//     so blind writes conflict as on the local engine.
//   - streams holds, per stream appended to or checked (CheckStream), the version
//     and revision as of at and the revisions assigned so far, so several appends to
//     one stream in one Txn continue each other; each becomes a StreamCheck at
//     Commit, so an append to it by another commit after at fails this one.
//   - fams holds, per family read or written, its catalog state as of at (one copy
//     of the record, shard); each becomes a FamilyCheck at Commit, so a drop or
//     re-creation after at fails the commit (families.go), except a reserved family's
//     (a layer's, "rockline." prefix), whose record nothing ever changes, so the check
//     could not fail. Keys are read and written in the generation current at at.
type Txn struct {
	p          *Partition
	at         uint64
	reads      map[string]Read  // by family and key (txnKey)
	writes     map[string]Write // by family and key: the last write of each key
	order      []string         // txnKeys in first-write order
	positioned []Write          // PutAtCommit writes, in order
	fams       map[string]*FamilyState
	shard      int
	streams    map[string]*txnStream
	events     []Event
	already    uint64 // the position of appends found already made (see Append)
	done       bool
}

// txnKey identifies a key within a Txn, whatever its family's generation.
func txnKey(family string, key []byte) string { return family + "\x00" + string(key) }

type txnStream struct {
	version uint64 // the stream's version as of at (0: no events)
	next    uint64 // the revision the next event gets
	checked bool   // CheckStream made the transaction conditional on it
}

// ErrTxnDone is returned by a Txn's methods after Commit or Discard.
var ErrTxnDone = pipeline.ErrTxnDone

// Begin starts a transaction at the partition's latest position.
func (p *Partition) Begin(ctx context.Context) (*Txn, error) {
	at, err := p.Position(ctx)
	if err != nil {
		return nil, err
	}
	return &Txn{p: p, at: at, reads: map[string]Read{}, writes: map[string]Write{}, streams: map[string]*txnStream{},
		fams: map[string]*FamilyState{}, shard: rand.IntN(FamilyShards)}, nil
}

// Position returns the position the transaction reads at.
func (t *Txn) Position() uint64 { return t.at }

// Get returns key of family as the transaction sees it (its own writes first) and
// whether it exists; the read is tracked.
func (t *Txn) Get(ctx context.Context, family string, key []byte) ([]byte, bool, error) {
	if t.done {
		return nil, false, ErrTxnDone
	}
	k := txnKey(family, key)
	if w, ok := t.writes[k]; ok {
		return bytes.Clone(w.Value), !w.Delete, nil
	}
	it, found, err := t.read(ctx, family, key)
	if err != nil {
		return nil, false, err
	}
	t.reads[k] = Read{Family: family, Key: bytes.Clone(key), Version: it.Version, Generation: it.Generation}
	return it.Value, found, nil
}

// read reads key of family at the transaction's position, in the family's generation
// there. The first read of a family also reads its catalog record in the same request
// (guessing the generation from the last one the partition saw), so resolving the
// generation costs no round trip unless it changed. A dropped family fails with a
// *pipeline.DroppedError.
func (t *Txn) read(ctx context.Context, family string, key []byte) (Item, bool, error) {
	p := t.p
	fs, known := t.fams[family]
	if known {
		if fs.Dropped && !t.revive(ctx, fs) {
			return Item{}, false, &pipeline.DroppedError{Family: family}
		}
		return p.getGen(ctx, family, fs.Generation, key, t.at, leaderPos)
	}
	guess := p.genHint(family)
	if n := p.subj.keyGenLen(family, guess, key); n > MaxSubjectLen {
		return Item{}, false, &LimitError{Op: "Txn.Get", Field: "key", Limit: "encoded subject length", Got: n, Max: MaxSubjectLen}
	}
	st := FamilyState{Family: family, Generation: 1, Shard: t.shard}
	it := Item{Family: family, Key: key, Generation: guess}
	if t.at == 0 {
		t.fams[family] = &st
		it.Generation = 1
		return it, false, nil
	}
	catalog, subject := p.subj.catalog(family, t.shard), p.subj.keyGen(family, guess, key)
	msgs, err := p.snapshot(ctx, "Txn.Get", []string{catalog, subject}, t.at, leaderPos)
	if err != nil {
		return Item{}, false, err
	}
	var km *nats.Msg
	for _, m := range msgs {
		if m.Subject == catalog {
			if err := st.apply([]*nats.Msg{m}); err != nil {
				return Item{}, false, err
			}
		} else {
			km = m
		}
	}
	t.fams[family] = &st
	p.setGenHint(family, st.Generation)
	if st.Dropped && t.revive(ctx, &st) {
		return p.getGen(ctx, family, st.Generation, key, t.at, leaderPos)
	}
	switch {
	case st.Dropped:
		return Item{}, false, &pipeline.DroppedError{Family: family}
	case st.Generation != guess:
		return p.getGen(ctx, family, st.Generation, key, t.at, leaderPos)
	case km == nil:
		return it, false, nil
	}
	it.Version = msgSeq(km)
	if km.Header.Get(hdrOp) == opDelete {
		return it, false, nil
	}
	it.Value, it.AtCommit, err = p.value(km.Subject, it.Version, km.Header, km.Data)
	return it, err == nil, err
}

// family returns the family's state at the transaction's position, reading its
// catalog record if the transaction has not yet.
func (t *Txn) family(ctx context.Context, family string) (*FamilyState, error) {
	if fs, ok := t.fams[family]; ok {
		return fs, nil
	}
	st := FamilyState{Family: family, Generation: 1, Shard: t.shard}
	if t.at > 0 {
		msgs, err := t.p.snapshot(ctx, "Txn", []string{t.p.subj.catalog(family, t.shard)}, t.at, leaderPos)
		if err != nil {
			return nil, err
		}
		if err := st.apply(msgs); err != nil {
			return nil, err
		}
	}
	if st.Dropped {
		t.revive(ctx, &st)
	}
	t.fams[family] = &st
	t.p.setGenHint(family, st.Generation)
	return &st, nil
}

// revive moves the transaction to a later generation of a family that is dropped at
// its position but was created again since (as the local engine's transaction writes
// a family created after it began through the new handle): st becomes the family's
// latest state, whose record the commit then checks, and the new generation, which
// was empty when created, reads as empty at the transaction's position. It reports
// whether the family is live now; on any error it leaves st dropped.
func (t *Txn) revive(ctx context.Context, st *FamilyState) bool {
	pos, err := t.p.Position(ctx)
	if err != nil || pos <= t.at {
		return false
	}
	now, err := t.p.familyAt(ctx, st.Family, pos, leaderPos)
	if err != nil || now.Dropped || now.Generation <= st.Generation {
		return false
	}
	*st = now
	return true
}

// PutAtCommit buffers a positioned write (Write.AtCommit) of key in family: its value
// is made by the codec of Config.PositionedValues named encoding from payload and the
// commit's position, on every read (positioned.go). As pipeline.Txn.PutAtCommit, it is not checked for conflicts
// and the transaction's own reads do not see it; the key must not also be written by
// Put or Delete in the transaction (Commit refuses it).
func (t *Txn) PutAtCommit(family string, key, payload []byte, encoding string) error {
	if t.done {
		return ErrTxnDone
	}
	if len(key) == 0 {
		return &ArgumentError{Op: "Txn.PutAtCommit", Arg: "key", Reason: "must not be empty"}
	}
	if t.p.codecs[encoding] == nil {
		return &ArgumentError{Op: "Txn.PutAtCommit", Arg: "encoding", Reason: fmt.Sprintf("%q is not in Config.PositionedValues", encoding)}
	}
	t.positioned = append(t.positioned, Write{Family: family, Key: bytes.Clone(key), Value: bytes.Clone(payload), Blind: true, AtCommit: encoding})
	return nil
}

// Put buffers a write of key in family.
func (t *Txn) Put(family string, key, value []byte) error {
	return t.write(Write{Family: family, Key: bytes.Clone(key), Value: bytes.Clone(value)})
}

// Delete buffers a delete of key in family.
func (t *Txn) Delete(family string, key []byte) error {
	return t.write(Write{Family: family, Key: bytes.Clone(key), Delete: true})
}

func (t *Txn) write(w Write) error {
	if t.done {
		return ErrTxnDone
	}
	if len(w.Key) == 0 {
		return &ArgumentError{Op: "Txn.Put", Arg: "key", Reason: "must not be empty"}
	}
	k := txnKey(w.Family, w.Key)
	if _, seen := t.writes[k]; !seen {
		t.order = append(t.order, k)
	}
	t.writes[k] = w
	return nil
}

// Append appends events to stream if its revision as of the transaction's position
// (and after the transaction's own appends) meets expected, else returns a
// *revision.WrongExpectedVersionError (which is eventstore.WrongExpectedVersionError;
// expected is an eventstore.ExpectedRevision too); the stream's version is checked at
// Commit. The rules are the event store's, from package revision.
func (t *Txn) Append(ctx context.Context, stream string, expected revision.Expected, events ...pipeline.Event) error {
	if t.done {
		return ErrTxnDone
	}
	if err := checkStreamArgs("Txn.Append", stream, expected); err != nil {
		return err
	}
	if len(events) == 0 {
		return &ArgumentError{Op: "Txn.Append", Arg: "events", Reason: "at least one event is required"}
	}
	if err := pipeline.CheckEvents("Txn.Append", events); err != nil {
		return err
	}
	s, err := t.stream(ctx, stream)
	if err != nil {
		return err
	}
	last, exists := s.next-1, s.next > 0
	if wrong := revision.Check(stream, expected, last, exists); wrong != nil {
		if pos, err := t.alreadyAppended(ctx, stream, expected, last, exists, events); err != nil || pos > 0 {
			if !t.keeps(stream) {
				delete(t.streams, stream)
			}
			t.already = max(t.already, pos)
			return err
		}
		if !t.keeps(stream) {
			delete(t.streams, stream) // not appended to: nothing to check at Commit
		}
		return wrong
	}
	for _, e := range events {
		t.events = append(t.events, Event{Stream: stream, Revision: s.next, Event: e})
		s.next++
	}
	return nil
}

// CheckStream makes the transaction conditional on stream's revision, as of its
// position and after its own appends, meeting expected, without appending to it: it
// returns a *revision.WrongExpectedVersionError (eventstore.WrongExpectedVersionError)
// when the revision does not meet expected now, and otherwise Commit fails with a
// conflict if another commit appends to stream after the transaction's position (the
// event store's StreamAt condition). Any holds for every stream and is not checked.
func (t *Txn) CheckStream(ctx context.Context, stream string, expected revision.Expected) error {
	if t.done {
		return ErrTxnDone
	}
	if err := checkStreamArgs("Txn.CheckStream", stream, expected); err != nil {
		return err
	}
	if expected == revision.Any {
		return nil
	}
	s, err := t.stream(ctx, stream)
	if err != nil {
		return err
	}
	if wrong := revision.Check(stream, expected, s.next-1, s.next > 0); wrong != nil {
		if !t.keeps(stream) {
			delete(t.streams, stream) // neither appended to nor checked: nothing to check at Commit
		}
		return wrong
	}
	s.checked = true
	return nil
}

// checkStreamArgs checks a stream name and an expectation given to op.
func checkStreamArgs(op, stream string, expected revision.Expected) error {
	if stream == "" {
		return &ArgumentError{Op: op, Arg: "stream", Reason: "must not be empty"}
	}
	if !expected.Valid() {
		return &ArgumentError{Op: op, Arg: "expected", Reason: "must be Any, NoStream, StreamExists or Revision(n)"}
	}
	return nil
}

// stream returns the transaction's entry for stream, reading the stream's tail at
// the transaction's position (and recording it) the first time.
func (t *Txn) stream(ctx context.Context, stream string) (*txnStream, error) {
	if s := t.streams[stream]; s != nil {
		return s, nil
	}
	seq, rev, found, err := t.p.streamTail(ctx, stream, t.at, leaderPos)
	if err != nil {
		return nil, err
	}
	s := &txnStream{version: seq}
	if found {
		s.next = rev + 1
	}
	t.streams[stream] = s
	return s, nil
}

// alreadyAppended reports the position of the commit that appended events already,
// when they all have IDs and are the stream's events at the revisions expected
// (revision.RetryFrom: the event store's idempotent retry, an append whose
// acknowledgement was lost, sent again), or 0. It is asked only once the expectation
// failed, so an append expecting Any is never taken for a retry.
func (t *Txn) alreadyAppended(ctx context.Context, stream string, expected revision.Expected, last uint64, exists bool, events []pipeline.Event) (uint64, error) {
	for _, e := range events {
		if e.ID == "" {
			return 0, nil
		}
	}
	n := uint64(len(events))
	first, ok := revision.RetryFrom(expected, last, exists, n)
	if !ok {
		return 0, nil
	}
	got, err := t.p.ReadStream(ctx, stream, first, int(n))
	if err != nil || uint64(len(got)) != n {
		return 0, err
	}
	for i, e := range events {
		if got[i].ID != e.ID || got[i].Revision != first+uint64(i) {
			return 0, nil
		}
	}
	pos, _, err := t.p.leaderGet(ctx, "Txn.Append", msgGetRequest{Seq: got[n-1].Sequence, NextFor: t.p.subj.commit()})
	return pos, err
}

// keeps reports whether stream's entry in streams must stay for Commit to check: the
// transaction appended to it or CheckStream made it a condition.
func (t *Txn) keeps(stream string) bool {
	if s := t.streams[stream]; s != nil && s.checked {
		return true
	}
	for _, e := range t.events {
		if e.Stream == stream {
			return true
		}
	}
	return false
}

// Commit sends the transaction's writes, appends and checks as one Commit and returns
// its position (0, sending nothing, for a transaction that wrote nothing). A key or
// stream changed since the transaction's position fails it with a *ConflictError
// (errors.Is(err, pipeline.ErrConflict)); a family dropped since, with a
// *pipeline.DroppedError. Every other error says whether the commit was written as
// Partition.Commit's do (ErrNotSent when a read it needs before sending failed). The
// transaction is done afterwards.
func (t *Txn) Commit(ctx context.Context) (uint64, error) {
	if t.done {
		return 0, ErrTxnDone
	}
	t.done = true
	if len(t.writes) == 0 && len(t.events) == 0 && len(t.positioned) == 0 {
		return t.already, nil // nothing to send; appends found already made report theirs
	}
	c := &Commit{Events: t.events, After: t.at}
	for _, k := range t.order {
		w := t.writes[k]
		r, read := t.reads[k]
		if !read {
			it, _, err := t.read(ctx, w.Family, w.Key)
			if err != nil {
				return 0, fmt.Errorf("%w: reading the version of written key %q in family %q: %w", ErrNotSent, w.Key, w.Family, err)
			}
			r.Version, r.Generation = it.Version, it.Generation
		}
		w.Version, w.Generation = r.Version, r.Generation
		c.Writes = append(c.Writes, w)
	}
	positioned := map[string]bool{}
	for _, w := range t.positioned {
		fs, err := t.family(ctx, w.Family)
		if err != nil {
			return 0, fmt.Errorf("%w: reading family %q: %w", ErrNotSent, w.Family, err)
		}
		if fs.Dropped {
			return 0, &pipeline.DroppedError{Family: w.Family}
		}
		w.Generation = fs.Generation
		k := txnKey(w.Family, w.Key)
		if r, read := t.reads[k]; read {
			// A key read and then positioned: the write carries the read's check.
			w.Blind, w.Version = false, r.Version
			positioned[k] = true
		}
		c.Writes = append(c.Writes, w)
	}
	for k, r := range t.reads {
		if _, written := t.writes[k]; !written && !positioned[k] {
			c.Reads = append(c.Reads, r)
		}
	}
	for _, fs := range t.fams {
		if !reserved(fs.Family) { // never dropped nor re-created: nothing to check
			c.Families = append(c.Families, fs.Check())
		}
	}
	for stream, s := range t.streams {
		c.Streams = append(c.Streams, StreamCheck{Stream: stream, Version: s.version})
	}
	pos, err := t.p.Commit(ctx, c)
	var ce *ConflictError
	if errors.As(err, &ce) && ce.Kind == "family" {
		return 0, t.familyChanged(ctx, ce)
	}
	return pos, err
}

// familyChanged classifies a commit refused because a family's catalog record
// changed after the transaction's position: dropped (and perhaps created again) is a
// *pipeline.DroppedError, as on the local engine; a family still live in the
// generation the transaction used was only recorded as created meanwhile (a
// CreateFamily of a family never recorded, which keeps generation 1), and that is a
// conflict to retry.
func (t *Txn) familyChanged(ctx context.Context, ce *ConflictError) error {
	dropped := &pipeline.DroppedError{Family: ce.Family}
	fs, ok := t.fams[ce.Family]
	if !ok {
		return dropped
	}
	pos, err := t.p.Position(ctx)
	if err != nil {
		return dropped
	}
	now, err := t.p.familyAt(ctx, ce.Family, pos, leaderPos)
	if err != nil || now.Dropped || now.Generation != fs.Generation {
		return dropped
	}
	return ce
}

// Discard ends the transaction without committing.
func (t *Txn) Discard() { t.done = true }
