package pipeline

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/rockline/rockline/storage"
)

// streamsFamily holds the event store's index: per stream a head (the revision of its
// last event) and one record per event pointing at the log entry that holds it.
//
//	'h' stream                 -> uvarint(last revision)
//	'r' stream 0x00 BE64(rev)  -> uvarint(position) uvarint(index in entry) event id
//	'm' name                   -> rockline's own settings (truncation, checkpoints)
//	"mfamily/" qualified name  -> 1: the family generation's creation is in the log
//
// Heads are read and written through the transaction, so two appends that expect the
// same revision conflict and exactly one wins. Event records depend on the commit's
// position and are written with the log entry (and recorded in its write set, so a
// replay of the log rebuilds them).
const streamsFamily = "rockline.streams"

// AppendResult is the outcome of an append: the revision of the stream's last event
// (pass it as Revision(n) to the next append) and the commit's log position.
type AppendResult struct {
	NextExpectedRevision uint64
	Position             uint64
}

// RecordedEvent is an event as stored in a stream.
type RecordedEvent struct {
	Stream   string
	Revision uint64
	Position uint64
	Time     time.Time
	Event
}

// streamAppend remembers which of a transaction's events go to which stream.
type streamAppend struct {
	stream   string
	first    uint64 // revision of the first event
	from, to int    // t.events[from:to]
}

func checkStream(op, stream string) error {
	switch {
	case stream == "":
		return &ArgumentError{Op: op, Arg: "stream", Reason: "must not be empty"}
	case len(stream) > MaxStreamNameLen:
		return &ArgumentError{Op: op, Arg: "stream", Reason: fmt.Sprintf("%d bytes exceeds %d", len(stream), MaxStreamNameLen)}
	case !utf8.ValidString(stream):
		return &ArgumentError{Op: op, Arg: "stream", Reason: "must be valid UTF-8"}
	case bytes.IndexByte([]byte(stream), 0) >= 0:
		return &ArgumentError{Op: op, Arg: "stream", Reason: "must not contain NUL"}
	}
	return nil
}

func headKey(stream string) []byte { return append([]byte{'h'}, stream...) }

func eventKey(stream string, rev uint64) []byte {
	k := make([]byte, 0, len(stream)+10)
	k = append(k, 'r')
	k = append(k, stream...)
	k = append(k, 0)
	return binary.BigEndian.AppendUint64(k, rev)
}

func eventValue(pos uint64, idx int, id string) []byte {
	v := binary.AppendUvarint(nil, pos)
	v = binary.AppendUvarint(v, uint64(idx))
	return append(v, id...)
}

func parseEventValue(v []byte) (pos uint64, idx int, id string, err error) {
	pos, n := binary.Uvarint(v)
	if n <= 0 {
		return 0, 0, "", fmt.Errorf("%w: stream record %x", ErrCorrupt, v)
	}
	i, m := binary.Uvarint(v[n:])
	if m <= 0 {
		return 0, 0, "", fmt.Errorf("%w: stream record %x", ErrCorrupt, v)
	}
	return pos, int(i), string(v[n+m:]), nil
}

// streamHead returns the revision of the stream's last event as this transaction
// sees it, tracking the read.
func (t *Txn) streamHead(stream string) (uint64, bool, error) {
	if rev, ok := t.heads[stream]; ok {
		return rev, true, nil
	}
	v, err := t.Get(t.db.streamsCF, headKey(stream))
	if errors.Is(err, ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	rev, n := binary.Uvarint(v)
	if n <= 0 {
		return 0, false, fmt.Errorf("%w: head of stream %q holds %x", ErrCorrupt, stream, v)
	}
	return rev, true, nil
}

// Append appends events to stream within the transaction, if the stream's state meets
// expected; otherwise it returns a *WrongExpectedVersionError carrying the actual
// revision. Appends to several streams in one transaction commit atomically. The
// stream's head is read with tracking, so a concurrent append makes the commit fail
// with ErrConflict (DB.Append retries and then reports the mismatch). Appending events
// whose IDs are already the stream's events at the revisions expected succeeds without
// writing them again. Stream names are 1..1024 bytes of UTF-8 without NUL; at least
// one event is required.
func (t *Txn) Append(stream string, expected ExpectedRevision, events ...Event) error {
	_, err := t.appendStream("Txn.Append", stream, expected, events)
	return err
}

func (t *Txn) appendStream(op, stream string, expected ExpectedRevision, events []Event) (AppendResult, error) {
	if err := t.usable(); err != nil {
		return AppendResult{}, err
	}
	if err := checkStream(op, stream); err != nil {
		return AppendResult{}, err
	}
	if !expected.valid() {
		return AppendResult{}, &ArgumentError{Op: op, Arg: "expected", Reason: "must be Any, NoStream, StreamExists or Revision(n)"}
	}
	if len(events) == 0 {
		return AppendResult{}, &ArgumentError{Op: op, Arg: "events", Reason: "at least one event is required"}
	}
	for i, e := range events {
		if err := checkEvent(op, i, e); err != nil {
			return AppendResult{}, err
		}
	}
	cur, exists, err := t.streamHead(stream)
	if err != nil {
		return AppendResult{}, err
	}
	if !expected.matches(cur, exists) {
		if res, ok, err := t.alreadyAppended(stream, expected, cur, exists, events); err != nil || ok {
			return res, err
		}
		return AppendResult{}, &WrongExpectedVersionError{Stream: stream, Expected: expected, Actual: actual(cur, exists)}
	}
	if res, ok, err := t.alreadyAppended(stream, expected, cur, exists, events); err != nil || ok {
		return res, err
	}
	first := uint64(0)
	if exists {
		first = cur + 1
	}
	last := first + uint64(len(events)) - 1
	if err := t.write(op, t.db.streamsCF, headKey(stream), binary.AppendUvarint(nil, last), false); err != nil {
		return AppendResult{}, err
	}
	if t.heads == nil {
		t.heads = make(map[string]uint64)
	}
	t.heads[stream] = last
	t.appends = append(t.appends, streamAppend{stream: stream, first: first, from: len(t.events), to: len(t.events) + len(events)})
	t.addEvents(events)
	return AppendResult{NextExpectedRevision: last}, nil
}

// alreadyAppended reports whether events (all with IDs) are already the stream's events
// at the revisions the append expected: a retried append. It returns the original
// result.
func (t *Txn) alreadyAppended(stream string, expected ExpectedRevision, cur uint64, exists bool, events []Event) (AppendResult, bool, error) {
	if !exists {
		return AppendResult{}, false, nil
	}
	for _, e := range events {
		if e.ID == "" {
			return AppendResult{}, false, nil
		}
	}
	n := uint64(len(events))
	var first uint64
	switch expected.kind {
	case expectNoStream:
		first = 0
	case expectExact:
		first = expected.rev + 1
	default: // Any, StreamExists: the stream's tail
		if cur+1 < n {
			return AppendResult{}, false, nil
		}
		first = cur + 1 - n
	}
	if first+n-1 > cur {
		return AppendResult{}, false, nil
	}
	var pos uint64
	for i := range events {
		v, err := t.GetUntracked(t.db.streamsCF, eventKey(stream, first+uint64(i)))
		if errors.Is(err, ErrNotFound) {
			return AppendResult{}, false, nil
		}
		if err != nil {
			return AppendResult{}, false, err
		}
		p, _, id, err := parseEventValue(v)
		if err != nil {
			return AppendResult{}, false, err
		}
		if id != events[i].ID {
			return AppendResult{}, false, nil
		}
		pos = p
	}
	res := AppendResult{NextExpectedRevision: first + n - 1, Position: pos}
	t.idempotent = &res
	return res, true, nil
}

// positionedWrites is how many index records the transaction's appends add at commit.
func (t *Txn) positionedWrites() int {
	n := 0
	for _, a := range t.appends {
		n += a.to - a.from
	}
	return n
}

// Append appends events to stream in a transaction of its own, retrying conflicts (a
// conflict with a concurrent append re-reads the head, so the loser gets a
// *WrongExpectedVersionError). A retried append whose events are already there
// returns the original result without writing.
func (db *DB) Append(ctx context.Context, stream string, expected ExpectedRevision, events ...Event) (AppendResult, error) {
	var res AppendResult
	var idem *AppendResult
	pos, err := db.UpdatePosition(ctx, func(tx *Txn) error {
		var err error
		res, err = tx.appendStream("DB.Append", stream, expected, events)
		idem = tx.idempotent
		return err
	})
	if err != nil {
		return AppendResult{}, err
	}
	if idem != nil {
		return *idem, nil
	}
	res.Position = pos
	return res, nil
}

// ReadStream returns up to limit events of stream from revision from forward
// (ascending). It returns every event whose commit has been written, waiting for the
// publication of those still in flight, so it agrees with what an Append has seen. A
// stream with no events returns none and no error.
func (db *DB) ReadStream(stream string, from uint64, limit int) ([]RecordedEvent, error) {
	return db.readStream(stream, from, limit, false)
}

// ReadStreamBackward returns up to limit published events of stream from revision from
// down to 0 (descending); from beyond the last revision starts at the last.
func (db *DB) ReadStreamBackward(stream string, from uint64, limit int) ([]RecordedEvent, error) {
	return db.readStream(stream, from, limit, true)
}

func (db *DB) readStream(stream string, from uint64, limit int, backward bool) ([]RecordedEvent, error) {
	op := "ReadStream"
	if backward {
		op = "ReadStreamBackward"
	}
	if err := checkStream(op, stream); err != nil {
		return nil, err
	}
	if limit < 1 || limit > maxReadLimit {
		return nil, &ArgumentError{Op: op, Arg: "limit", Reason: fmt.Sprintf("%d is not between 1 and %d", limit, maxReadLimit)}
	}
	lower, upper := eventKey(stream, 0), append(eventKey(stream, 0)[:len(stream)+1], 1)
	if backward {
		upper = eventKey(stream, from)
		if from < ^uint64(0) {
			upper = eventKey(stream, from+1)
		}
	} else {
		lower = eventKey(stream, from)
	}
	it, err := db.store.NewIterator(db.streamsCF.f, storage.IterOptions{Lower: lower, Upper: upper})
	if err != nil {
		return nil, closedErr(err)
	}
	defer it.Close()
	type ref struct {
		rev, pos uint64
		idx      int
	}
	var refs []ref
	next, valid := it.Next, it.First
	if backward {
		next, valid = it.Prev, it.Last
	}
	newest := uint64(0)
	for valid(); it.Valid() && len(refs) < limit; next() {
		k, v, err := it.Item() // ErrClosed, not an empty record, when Close races
		if err != nil {
			return nil, closedErr(err)
		}
		pos, idx, _, err := parseEventValue(v)
		if err != nil {
			return nil, err
		}
		newest = max(newest, pos)
		refs = append(refs, ref{binary.BigEndian.Uint64(k[len(k)-8:]), pos, idx})
	}
	if err := it.Err(); err != nil {
		return nil, closedErr(err)
	}
	// A record is written with its commit's log entry, but the entry is readable only
	// once published: wait for the commits in flight below it. This keeps ReadStream
	// consistent with what an Append (which reads the head) has already seen.
	if err := db.seq.Wait(newest); err != nil {
		return nil, err
	}
	out := make([]RecordedEvent, 0, len(refs))
	var entry LogEntry
	for _, r := range refs {
		if entry.Position != r.pos {
			if entry, err = db.Entry(r.pos); err != nil {
				return nil, err
			}
		}
		if r.idx >= len(entry.Events) {
			return nil, fmt.Errorf("%w: stream %q revision %d points at event %d of log entry %d, which has %d", ErrCorrupt, stream, r.rev, r.idx, r.pos, len(entry.Events))
		}
		out = append(out, RecordedEvent{Stream: stream, Revision: r.rev, Position: r.pos, Time: entry.Time, Event: entry.Events[r.idx]})
	}
	return out, nil
}
