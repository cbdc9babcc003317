package esmodel_test

import (
	"context"
	"fmt"
	"math"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/pipeline"
)

// compareStream reads stream s from revision from (forward, or backward) and fails t
// unless the store returns what the model says.
func (m *machine) compareStream(t *rapid.T, what, s string, from uint64, limit int, backward bool) {
	t.Helper()
	read, op := m.es.ReadStream, "ReadStream"
	if backward {
		read, op = m.es.ReadStreamBackward, "ReadStreamBackward"
	}
	call := fmt.Sprintf("%s: %s(%s, %d, %d) of %v (log from %d)", what, op, s, from, limit, m.model.streams[s], m.model.first)
	got, err := read(context.Background(), s, from, limit)
	want, tombstoned, truncated := m.model.readStream(s, from, limit, backward)
	switch {
	case tombstoned:
		expectDeleted(t, call+" of a tombstoned stream", err, s)
	case truncated:
		expectIs(t, call+" of events in removed log entries", err, pipeline.ErrLogTruncated)
	case err != nil:
		fatalf(t, "%s: %v", call, err)
	default:
		if diff := cmp.Diff(seenModels(want), seenAll(got), equateEmpty); diff != "" {
			fatalf(t, "%s (-model +store):\n%s", call, diff)
		}
	}
}

// compareAll reads the log from from (forward, or backward) and fails t unless the
// store returns what the model says.
func (m *machine) compareAll(t *rapid.T, what string, from eventstore.At, limit int, f filterSpec, backward bool) {
	t.Helper()
	read, op := m.es.ReadAll, "ReadAll"
	if backward {
		read, op = m.es.ReadAllBackward, "ReadAllBackward"
	}
	call := fmt.Sprintf("%s: %s(%+v, %d, %v)", what, op, from, limit, f)
	got, err := read(context.Background(), from, limit, f.api())
	want, truncated := m.model.readAll(from, limit, f, backward)
	switch {
	case truncated:
		expectIs(t, call+" below the log's first position", err, pipeline.ErrLogTruncated)
	case err != nil:
		fatalf(t, "%s: %v", call, err)
	default:
		if diff := cmp.Diff(seenModels(want), seenAll(got), equateEmpty); diff != "" {
			fatalf(t, "%s (-model +store):\n%s", call, diff)
		}
	}
}

func drawLimit(t *rapid.T) int {
	if rapid.IntRange(0, 3).Draw(t, "to end") == 0 {
		return eventstore.ToEnd
	}
	return rapid.IntRange(1, 4).Draw(t, "limit")
}

// readStreamAction: a stream read from a drawn revision, either way, with a drawn
// limit.
func (m *machine) readStreamAction(t *rapid.T) {
	s := rapid.SampledFrom(streamNames).Draw(t, "stream")
	backward := rapid.Bool().Draw(t, "backward")
	from := uint64(rapid.IntRange(0, int(m.model.streams[s].nextRev())+1).Draw(t, "from"))
	if backward && rapid.IntRange(0, 3).Draw(t, "from the end") == 0 {
		from = math.MaxUint64
	}
	m.compareStream(t, "readStream", s, from, drawLimit(t), backward)
}

// readAllAction: a read of the log from a drawn place (Start, End, an event, or just
// after or before one), either way, with a drawn limit and filter.
func (m *machine) readAllAction(t *rapid.T) {
	backward := rapid.Bool().Draw(t, "backward")
	m.compareAll(t, "readAll", m.drawFrom(t, backward), drawLimit(t), drawFilter(t, "filter"), backward)
}

// drawFrom draws where a read of the log starts: the start (or the end, backward),
// the log's first position, or at, after or before a drawn event.
func (m *machine) drawFrom(t *rapid.T, backward bool) eventstore.At {
	switch k := rapid.IntRange(0, 4).Draw(t, "from kind"); {
	case k == 0 || len(m.model.events) == 0:
		if backward {
			return eventstore.End
		}
		return eventstore.Start
	case k == 1:
		return eventstore.At{Position: m.model.first}
	default:
		e := m.model.events[rapid.IntRange(0, len(m.model.events)-1).Draw(t, "event")]
		rec := eventstore.RecordedEvent{Position: e.pos, Index: e.idx}
		switch k {
		case 2:
			return eventstore.At{Position: e.pos, Index: e.idx}
		case 3:
			return eventstore.Next(rec)
		default:
			return eventstore.Prev(rec)
		}
	}
}
