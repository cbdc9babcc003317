package esmodel_test

import (
	"context"
	"fmt"
	"slices"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/rockline/rockline/eventstore"
)

// storeConfig is the store every open of a sequence's database (the test's and the
// kill child's) declares: every kind of index. The selector returns one value twice,
// which counts once.
var storeConfig = eventstore.Config{Indexes: []eventstore.Index{
	eventstore.TypeIndex(),
	eventstore.CategoryIndex(),
	eventstore.TagIndex(),
	eventstore.SelectorIndex("family", func(_ string, e eventstore.Event) []string {
		return []string{e.Type[:1], e.Type[:1]}
	}),
}}

// indexValue is one index and value a read names.
type indexValue struct{ index, value string }

// indexValues are every index and value the drawn events can be under, and one none
// is ("category" "u").
var indexValues = []indexValue{
	{"type", "a.1"}, {"type", "a.2"}, {"type", "b.1"},
	{"category", "s"}, {"category", "t"}, {"category", "u"},
	{"tag", "course:1"}, {"tag", "course:2"}, {"tag", "student:a"},
	{"family", "a"}, {"family", "b"},
}

// under reports whether the model's event e is one the index keys by iv.value: as
// package eventstore documents each kind.
func (iv indexValue) under(e *event) bool {
	switch iv.index {
	case "type":
		return e.typ == iv.value
	case "category":
		return e.stream != "" && e.stream[:1] == iv.value // every name drawn is letter-dash-digit
	case "tag":
		return slices.Contains(eventSpec{tags: e.tags}.tagList(), iv.value)
	default:
		return e.typ[:1] == iv.value
	}
}

// readIndex is what ReadIndex (or ReadIndexBackward) returns: the stream events of
// the log from its first position whose records Reclaim has not deleted (hidden
// revisions included until then, as ReadAll returns them), under iv, in log order
// from from on (or down), up to limit.
func (m *model) readIndex(iv indexValue, from eventstore.At, limit int, backward bool) []*event {
	at := &event{pos: from.Position, idx: from.Index}
	evs := m.sorted(m.first, func(e *event) bool {
		if e.stream == "" || m.streams[e.stream].gone[e.rev] || !iv.under(e) {
			return false
		}
		if backward {
			return !at.before(e)
		}
		return !e.before(at)
	})
	if backward {
		slices.Reverse(evs)
	}
	if limit != eventstore.ToEnd && len(evs) > limit {
		evs = evs[:limit]
	}
	return evs
}

// compareIndex reads iv from from (forward, or backward) and fails t unless the store
// returns what the model says; a forward read to the end is read again page by page
// from Next of each page's last event, which must neither miss nor repeat one.
func (m *machine) compareIndex(t *rapid.T, what string, iv indexValue, from eventstore.At, limit int, backward bool) {
	t.Helper()
	read, op := m.es.ReadIndex, "ReadIndex"
	if backward {
		read, op = m.es.ReadIndexBackward, "ReadIndexBackward"
	}
	call := fmt.Sprintf("%s: %s(%s, %s, %+v, %d) (log from %d)", what, op, iv.index, iv.value, from, limit, m.model.first)
	got, err := read(context.Background(), iv.index, iv.value, from, limit)
	if err != nil {
		fatalf(t, "%s: %v", call, err)
	}
	want := m.model.readIndex(iv, from, limit, backward)
	if diff := cmp.Diff(seenModels(want), seenAll(got), equateEmpty); diff != "" {
		fatalf(t, "%s (-model +store):\n%s", call, diff)
	}
	if backward || limit != eventstore.ToEnd {
		return
	}
	var paged []eventstore.RecordedEvent
	for at := from; ; {
		page, err := m.es.ReadIndex(context.Background(), iv.index, iv.value, at, 2)
		if err != nil {
			fatalf(t, "%s, paged from %+v: %v", call, at, err)
		}
		if len(page) == 0 {
			break
		}
		paged = append(paged, page...)
		at = eventstore.Next(page[len(page)-1])
	}
	if diff := cmp.Diff(seenModels(want), seenAll(paged), equateEmpty); diff != "" {
		fatalf(t, "%s read in pages of 2 (-model +store):\n%s", call, diff)
	}
}

// readIndexAction: a read of a drawn index value, from a drawn place (drawFrom),
// either way, with a drawn limit.
func (m *machine) readIndexAction(t *rapid.T) {
	iv := indexValues[rapid.IntRange(0, len(indexValues)-1).Draw(t, "index value")]
	backward := rapid.Bool().Draw(t, "backward")
	m.compareIndex(t, "readIndex", iv, m.drawFrom(t, backward), drawLimit(t), backward)
}
