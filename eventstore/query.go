package eventstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/rockline/rockline/eventstore/revision"
	"github.com/rockline/rockline/pipeline"
)

// Query selects events by their tags and types, across every stream: an event
// matches when it matches any of Items. It is what a decision reads
// (ReadQuery) and then requires unchanged (NoneMatching): the dynamic consistency
// boundary of Axon Framework 5 and EventSourcingDB, on an append that also keeps
// its stream's expected revision.
type Query struct {
	Items []QueryItem
}

// QueryItem matches an event that carries every one of Tags (at least one) and, when
// Types is not empty, whose type is one of Types. The tags are what a condition on
// the item holds on: each append of an event with a tag writes the tag's marker in
// its commit, and a condition reads a marker with tracking. An item needs a tag, as
// an item of types alone would have to see every append of those types.
type QueryItem struct {
	Types []string
	Tags  []string
}

// Match reports whether e matches the query.
func (q Query) Match(e *RecordedEvent) bool {
	for _, it := range q.Items {
		if it.match(e) {
			return true
		}
	}
	return false
}

func (it QueryItem) match(e *RecordedEvent) bool {
	if len(it.Types) > 0 && !slices.Contains(it.Types, e.Type) {
		return false
	}
	for _, t := range it.Tags {
		if !slices.Contains(e.Tags, t) {
			return false
		}
	}
	return true
}

// String describes the query: items joined by " or ", each its tags and types.
func (q Query) String() string {
	items := make([]string, len(q.Items))
	for i, it := range q.Items {
		s := "tags " + strings.Join(it.Tags, "+")
		if len(it.Types) > 0 {
			s += " types " + strings.Join(it.Types, "|")
		}
		items[i] = "(" + s + ")"
	}
	return strings.Join(items, " or ")
}

// check validates the query (arg names it in an *ArgumentError).
func (q Query) check(op, arg string) error {
	if len(q.Items) == 0 {
		return &pipeline.ArgumentError{Op: op, Arg: arg + ".Items", Reason: "a query needs at least one item"}
	}
	for i, it := range q.Items {
		iarg := fmt.Sprintf("%s.Items[%d]", arg, i)
		if len(it.Tags) == 0 {
			return &pipeline.ArgumentError{Op: op, Arg: iarg + ".Tags", Reason: "an item needs at least one tag (a condition holds on its tags' markers)"}
		}
		// The event rules for tags and types: the same limits, so a query can name
		// what an append can write.
		if err := pipeline.CheckEvents(op, []pipeline.Event{{Type: "t", Tags: it.Tags}}); err != nil {
			return queryArg(err, iarg)
		}
		for j, typ := range it.Types {
			if err := pipeline.CheckEvents(op, []pipeline.Event{{Type: typ}}); err != nil {
				return queryArg(err, fmt.Sprintf("%s.Types[%d]", iarg, j))
			}
		}
	}
	return nil
}

// queryArg renames the argument of CheckEvents' *ArgumentError (events[0].X) to
// the query's own (arg and what follows events[0].Tags).
func queryArg(err error, arg string) error {
	var ae *pipeline.ArgumentError
	if !errors.As(err, &ae) {
		return err
	}
	name := arg
	if rest, ok := strings.CutPrefix(ae.Arg, "events[0].Tags"); ok {
		name += ".Tags" + rest
	}
	return &pipeline.ArgumentError{Op: ae.Op, Arg: name, Reason: ae.Reason}
}

// NoneMatching is the condition that no event matching q was appended at a position
// after after: the position a ReadQuery of q returned, so that a decision taken on
// what it read commits only if nothing it would have read has been appended since.
// An event counts only if the event store appended it (Append, AppendIf,
// AppendTxn): events added with pipeline.Txn.AddEvents carry their tags in the log
// but write no marker, so no condition sees them.
func NoneMatching(q Query, after uint64) Condition {
	return Condition{query: &q, after: after}
}

// QueryMatchedError is the reason of a failed NoneMatching condition: an event
// matching the query at a position after the one the condition allowed.
type QueryMatchedError struct {
	Query Query
	After uint64
	Event RecordedEvent
}

// Error names the event and the query.
func (e *QueryMatchedError) Error() string {
	return fmt.Sprintf("rockline: %s of stream %q at position %d matches %s, after position %d", e.Event.Type, e.Event.Stream, e.Event.Position, e.Query, e.After)
}

// tagKey is the key of tag's marker.
func tagKey(tag string) []byte { return append([]byte{'t'}, tag...) }

// markTags writes, in tx, the marker of every distinct tag of events.
func (s *Store) markTags(tx *pipeline.Txn, events []Event) error {
	for i, e := range events {
		for j, tag := range e.Tags {
			if seenTag(events[:i], tag) || slices.Contains(e.Tags[:j], tag) {
				continue
			}
			if err := tx.PutAtCommit(s.cf, tagKey(tag), nil, markCodec); err != nil {
				return err
			}
		}
	}
	return nil
}

func seenTag(events []Event, tag string) bool {
	for _, e := range events {
		if slices.Contains(e.Tags, tag) {
			return true
		}
	}
	return false
}

// requireNone checks a NoneMatching condition in tx. For each item it reads the
// markers of the item's tags as of tx's snapshot; an event matching the item carries
// every one of them, so the lowest marker bounds where one can be. It reads that
// marker again with tracking (any later event matching the item rewrites it, so a
// commit adding one before tx commits makes tx conflict), and, when the marker lies
// after the position allowed, scans the log between the two for a matching event.
func (s *Store) requireNone(tx *pipeline.Txn, q *Query, after uint64) error {
	for _, it := range q.Items {
		lowTag := it.Tags[0]
		if len(it.Tags) > 1 { // find the lowest without tracking the others
			low := uint64(0)
			for i, tag := range it.Tags {
				pos, err := s.marker(tx, tag, false)
				if err != nil {
					return err
				}
				if i == 0 || pos < low {
					low, lowTag = pos, tag
				}
			}
		}
		low, err := s.marker(tx, lowTag, true)
		if err != nil {
			return err
		}
		if low <= after {
			continue
		}
		ev, found, err := s.findMatch(Query{Items: []QueryItem{it}}, after+1, low)
		if err != nil {
			return err
		}
		if found {
			return &QueryMatchedError{Query: *q, After: after, Event: ev}
		}
	}
	return nil
}

// marker returns the position tag's marker holds as tx reads it (0 for a tag never
// appended), reading with tracking when track is set.
func (s *Store) marker(tx *pipeline.Txn, tag string, track bool) (uint64, error) {
	get := tx.GetUntracked
	if track {
		get = tx.Get
	}
	v, err := get(s.cf, tagKey(tag))
	if errors.Is(err, pipeline.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	pos, ok := revision.ParseMark(v)
	if !ok {
		return 0, fmt.Errorf("rockline: the marker of tag %q does not decode: %w", tag, pipeline.ErrCorrupt)
	}
	return pos, nil
}

// findMatch scans the log from position from through to for an event of a stream
// matching q (events without a stream write no marker, and conditions ignore them).
// to is a position a marker in tx's snapshot holds: its commit is written, but may
// not be published yet (a snapshot can hold a commit whose earlier positions are
// still being written), so the scan first waits for its publication, as ReadStream
// does for the records it finds.
func (s *Store) findMatch(q Query, from, to uint64) (RecordedEvent, bool, error) {
	if err := s.db.WaitForPosition(context.Background(), to); err != nil {
		return RecordedEvent{}, false, err
	}
	for pos := from; pos <= to; {
		page, err := s.db.ReadLog(pos, int(min(to-pos+1, readPage)))
		if err != nil {
			return RecordedEvent{}, false, fmt.Errorf("rockline: checking %s after position %d: %w", q, from-1, err)
		}
		if len(page) == 0 {
			return RecordedEvent{}, false, fmt.Errorf("rockline: checking %s: position %d is not published: %w", q, pos, pipeline.ErrNotFound)
		}
		for _, e := range page {
			if e.Position > to {
				return RecordedEvent{}, false, nil
			}
			for i := range e.Events {
				if e.Events[i].Stream != "" && q.Match(&e.Events[i]) {
					return e.Events[i], true, nil
				}
			}
			pos = e.Position + 1
		}
	}
	return RecordedEvent{}, false, nil
}

// ReadQuery returns every event of a stream (appended by the event store, as the
// conditions see them) matching q at positions after after, in log order, and the
// position through which it read: pass that to NoneMatching so that an
// append decided on these events commits only if no other matching event has been
// appended since. It reads the published log (the positions Append has returned);
// ErrLogTruncated when after lies below a truncated log's first position.
func (s *Store) ReadQuery(ctx context.Context, q Query, after uint64) ([]RecordedEvent, uint64, error) {
	const op = "Store.ReadQuery"
	if err := q.check(op, "q"); err != nil {
		return nil, 0, err
	}
	var out []RecordedEvent
	through := after
	for pos := after + 1; ; {
		if err := ctx.Err(); err != nil {
			return nil, 0, err
		}
		page, err := s.db.ReadLog(pos, readPage)
		if err != nil {
			return nil, 0, err
		}
		if len(page) == 0 {
			return out, through, nil
		}
		for _, e := range page {
			for i := range e.Events {
				if e.Events[i].Stream != "" && q.Match(&e.Events[i]) {
					out = append(out, e.Events[i])
				}
			}
			through, pos = e.Position, e.Position+1
		}
	}
}
