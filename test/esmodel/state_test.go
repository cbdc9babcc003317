package esmodel_test

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/rockline/rockline/eventstore"
)

// The model is what the event store's documentation promises, in memory: every event
// of the log (kept after TruncateLog too, for subscribers and projections that saw
// them), each stream's revisions and state, which index records Reclaim deleted, and
// the log's checkpoint and truncation marks. It learns log positions from what the
// calls return: the store's own commits (projection positions, family changes) take
// positions the model does not predict.

// event is one event of the log.
type event struct {
	stream string // "" for an event added with pipeline.Txn.AddEvents
	rev    uint64
	pos    uint64
	idx    int
	id     string
	typ    string
	tags   string // comma-separated, as eventSpec's
}

// before orders events as the log does: by position, then index.
func (e *event) before(o *event) bool {
	return e.pos < o.pos || (e.pos == o.pos && e.idx < o.idx)
}

// stream is one stream's revisions and state.
type stream struct {
	revs          []*event // by revision, deleted and hidden ones too
	deleted       bool     // soft-deleted (DeleteStream), until the next append
	deletedBefore uint64   // revisions below stay hidden after a soft delete
	tombstoned    bool
	md            eventstore.StreamMetadata
	gone          map[uint64]bool // revisions whose index record Reclaim deleted
}

func (s *stream) hasHead() bool { return len(s.revs) > 0 }

func (s *stream) head() uint64 { return uint64(len(s.revs) - 1) }

// exists is what the expectations see: a stream with events that is not soft-deleted.
func (s *stream) exists() bool { return s.hasHead() && !s.deleted }

// low is the lowest revision readers may see (MaxAge is only ever 0 or an hour here,
// which hides nothing of a test's events).
func (s *stream) low() uint64 {
	low := max(s.md.TruncateBefore, s.deletedBefore)
	if n := uint64(len(s.revs)); s.md.MaxCount > 0 && n > s.md.MaxCount {
		low = max(low, n-s.md.MaxCount)
	}
	return low
}

// readable reports whether revision r is one a read returns: visible (not below low,
// not in a deleted stream) and its record not reclaimed. A metadata change that lowers
// the bound does not bring reclaimed revisions back.
func (s *stream) readable(r uint64) bool {
	return s.exists() && r < uint64(len(s.revs)) && r >= s.low() && !s.gone[r]
}

// reclaimed returns the revisions whose records Reclaim deleted, in order.
func (s *stream) reclaimed() []uint64 {
	var out []uint64
	for r := range s.revs {
		if s.gone[uint64(r)] {
			out = append(out, uint64(r))
		}
	}
	return out
}

// String describes the stream's state for a failure message: each revision's
// position, readable (+) or not (-), and reclaimed (r).
func (s *stream) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "{deleted %v (before %d), tombstoned %v, metadata %+v, low %d, revisions:", s.deleted, s.deletedBefore, s.tombstoned, s.md, s.low())
	for r, e := range s.revs {
		mark := "-"
		if s.readable(uint64(r)) {
			mark = "+"
		}
		if s.gone[uint64(r)] {
			mark += "r"
		}
		fmt.Fprintf(&b, " %d%s@%d", r, mark, e.pos)
	}
	b.WriteString("}")
	return b.String()
}

// matches is ExpectedRevision's documented meaning against s.
func (s *stream) matches(exp expectation) bool {
	switch exp.kind {
	case expAny:
		return true
	case expNoStream:
		return !s.exists()
	case expStreamExists:
		return s.exists()
	default:
		return s.exists() && s.head() == exp.rev
	}
}

// actual is what a *WrongExpectedVersionError reports as the stream's state.
func (s *stream) actual() eventstore.ExpectedRevision {
	if !s.exists() {
		return eventstore.NoStream
	}
	return eventstore.Revision(s.head())
}

// nextRev is the revision the next append's first event gets: revisions continue
// after a soft delete.
func (s *stream) nextRev() uint64 { return uint64(len(s.revs)) }

// expectation is an ExpectedRevision the model can reason about.
type expectation struct {
	kind int
	rev  uint64
}

const (
	expAny = iota
	expNoStream
	expStreamExists
	expExact
)

func (e expectation) api() eventstore.ExpectedRevision {
	switch e.kind {
	case expAny:
		return eventstore.Any
	case expNoStream:
		return eventstore.NoStream
	case expStreamExists:
		return eventstore.StreamExists
	}
	return eventstore.Revision(e.rev)
}

func (e expectation) String() string { return e.api().String() }

type model struct {
	streams map[string]*stream
	events  []*event // every event the log has held, in the order learnt
	// first is the log's first position (FirstPosition), checkpointed the highest
	// position a Checkpoint returned, maxPos the highest position a call returned.
	first, checkpointed, maxPos uint64
}

func newModel() *model {
	m := &model{streams: make(map[string]*stream), first: 1}
	for _, s := range streamNames {
		m.streams[s] = &stream{gone: make(map[uint64]bool)}
	}
	return m
}

// appendAt records events appended to s in the commit at pos, the first at index idx
// of its entry; it returns the stream's new last revision.
func (m *model) appendAt(s string, pos uint64, idx int, evs []eventSpec) uint64 {
	st := m.streams[s]
	for i, e := range evs {
		ev := &event{stream: s, rev: st.nextRev(), pos: pos, idx: idx + i, id: e.id, typ: e.typ, tags: e.tags}
		st.revs = append(st.revs, ev)
		m.events = append(m.events, ev)
	}
	st.deleted = false // an append recreates a soft-deleted stream
	m.saw(pos)
	return st.head()
}

// addEvents records events of no stream at pos.
func (m *model) addEvents(pos uint64, evs []eventSpec) {
	for i, e := range evs {
		m.events = append(m.events, &event{pos: pos, idx: i, id: e.id, typ: e.typ})
	}
	m.saw(pos)
}

func (m *model) saw(pos uint64) { m.maxPos = max(m.maxPos, pos) }

// softDelete is DeleteStream's documented effect; it reports whether anything changed
// (a stream with no events, or deleted already, stays as it is).
func (m *model) softDelete(s string) bool {
	st := m.streams[s]
	if !st.hasHead() || st.deleted {
		return false
	}
	st.deleted, st.deletedBefore = true, st.nextRev()
	return true
}

// reclaim deletes the records of every hidden revision, and of every revision of a
// tombstoned stream; it returns how many records it deleted.
func (m *model) reclaim() int {
	n := 0
	for _, st := range m.streams {
		low := st.low()
		if st.tombstoned {
			low = st.nextRev()
		}
		for r := uint64(0); r < low && r < st.nextRev(); r++ {
			if !st.gone[r] {
				st.gone[r] = true
				n++
			}
		}
	}
	return n
}

// sorted returns the events of the log held from position from on that keep
// returns true for, in log order.
func (m *model) sorted(from uint64, keep func(*event) bool) []*event {
	var out []*event
	for _, e := range m.events {
		if e.pos >= from && keep(e) {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b *event) int {
		return cmp.Or(cmp.Compare(a.pos, b.pos), cmp.Compare(a.idx, b.idx))
	})
	return out
}

// readStream is what ReadStream (or ReadStreamBackward) returns: the readable
// revisions from from on (or down), up to limit; ErrStreamDeleted for a tombstoned
// stream; ErrLogTruncated (truncated true) when one of them is in a removed entry.
func (m *model) readStream(s string, from uint64, limit int, backward bool) (evs []*event, tombstoned, truncated bool) {
	st := m.streams[s]
	if st.tombstoned {
		return nil, true, false
	}
	take := func(r uint64) bool {
		if !st.readable(r) {
			return true
		}
		evs = append(evs, st.revs[r])
		return limit == eventstore.ToEnd || len(evs) < limit
	}
	if backward {
		if st.hasHead() {
			for r := min(from, st.head()); take(r) && r > 0; r-- {
			}
		}
	} else {
		for r := from; r < st.nextRev() && take(r); r++ {
		}
	}
	for _, e := range evs {
		if e.pos < m.first {
			return nil, false, true
		}
	}
	return evs, false, false
}

// readAll is what ReadAll (or ReadAllBackward) returns; truncated reports that a
// forward read starts below the log's first position (ErrLogTruncated). A backward
// read stops at the first position.
func (m *model) readAll(from eventstore.At, limit int, f filterSpec, backward bool) (evs []*event, truncated bool) {
	if !backward && max(from.Position, 1) < m.first {
		return nil, true
	}
	at := &event{pos: from.Position, idx: from.Index}
	all := m.sorted(m.first, func(e *event) bool {
		if backward {
			return !at.before(e) && f.match(e)
		}
		return !e.before(at) && f.match(e)
	})
	if backward {
		slices.Reverse(all)
	}
	if limit != eventstore.ToEnd && len(all) > limit {
		all = all[:limit]
	}
	return all, false
}

// matchingUpTo returns the events that f matches in (after, upTo], in log order.
func (m *model) matchingUpTo(f filterSpec, after, upTo uint64) []*event {
	return m.sorted(0, func(e *event) bool { return e.pos > after && e.pos <= upTo && f.match(e) })
}
