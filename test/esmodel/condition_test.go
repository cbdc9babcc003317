package esmodel_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"pgregory.net/rapid"

	"github.com/rockline/rockline/eventstore"
)

// appendIf: an append with 0..3 drawn conditions, stream conditions and tag queries
// (NoneMatching of one item: one or two tags, perhaps a type, after a position at or
// above the log's first). The model decides the outcome: the append's own stream
// first (tombstoned, or its expectation not met: the append's own error, not a
// condition's), then the conditions in order (the first not met is a
// *ConditionFailedError naming it; a tombstoned stream meets only Any; a query fails
// on the first event in log order that the event store appended after the position
// and that matches it, which the error names), and otherwise the append lands as
// Append's would. A condition never writes its stream.
func (m *machine) appendIf(t *rapid.T) {
	s := rapid.SampledFrom(streamNames).Draw(t, "stream")
	exp := drawExpectation(t, m.model.streams[s], "appendIf")
	n := rapid.IntRange(0, 3).Draw(t, "conditions")
	conds := make([]eventstore.Condition, n)
	cexps := make([]expectation, n)
	cstreams := make([]string, n)
	queries := make([]*queryCond, n)
	for i := range conds {
		if rapid.IntRange(0, 2).Draw(t, "query condition") == 0 {
			qc := m.drawQuery(t)
			queries[i] = qc
			conds[i] = eventstore.NoneMatching(qc.api(), qc.after)
			continue
		}
		cstreams[i] = rapid.SampledFrom(streamNames).Draw(t, "condition stream")
		cexps[i] = drawExpectation(t, m.model.streams[cstreams[i]], "condition")
		conds[i] = eventstore.StreamAt(cstreams[i], cexps[i].api())
	}
	evs := m.drawEvents(t, "appendIf")
	what := fmt.Sprintf("AppendIf(%s, %v, %v, %d events)", s, exp, conds, len(evs))
	res, err := m.es.AppendIf(context.Background(), s, exp.api(), conds, apiEvents(evs)...)

	st := m.model.streams[s]
	failed := -1
	var firstMatch *event
	if !st.tombstoned && st.matches(exp) {
		for i, c := range cexps {
			if queries[i] != nil {
				if firstMatch = m.model.firstMatch(queries[i]); firstMatch != nil {
					failed = i
					break
				}
				continue
			}
			cs := m.model.streams[cstreams[i]]
			if c.kind != expAny && (cs.tombstoned || !cs.matches(c)) {
				failed = i
				break
			}
		}
	}
	var cf *eventstore.ConditionFailedError
	isCond := errors.As(err, &cf)
	switch {
	case failed < 0:
		if isCond {
			fatalf(t, "%s: %v, want no condition to fail", what, err)
		}
		m.expectAppend(t, what, s, exp, evs, res, err, true)
	case !isCond || !errors.Is(err, eventstore.ErrConditionFailed):
		fatalf(t, "%s: %v, want a *ConditionFailedError for condition %d", what, err, failed)
	case cf.Index != failed || cf.Condition != conds[failed]:
		fatalf(t, "%s: condition %d (%v) failed, want %d (%v)", what, cf.Index, cf.Condition, failed, conds[failed])
	case firstMatch != nil:
		var qm *eventstore.QueryMatchedError
		if !errors.As(cf.Err, &qm) || qm.Event.Position != firstMatch.pos || qm.Event.ID != firstMatch.id {
			fatalf(t, "%s: %v, want a *QueryMatchedError naming %s at %d", what, cf.Err, firstMatch.id, firstMatch.pos)
		}
	case m.model.streams[cstreams[failed]].tombstoned:
		expectDeleted(t, what, cf.Err, cstreams[failed])
	default:
		expectWrongVersion(t, what, cf.Err, cstreams[failed], cexps[failed], m.model.streams[cstreams[failed]].actual())
	}
}

// queryCond is a drawn NoneMatching condition of one item.
type queryCond struct {
	tags  []string
	typ   string // "" for any type
	after uint64
}

func (q *queryCond) api() eventstore.Query {
	it := eventstore.QueryItem{Tags: q.tags}
	if q.typ != "" {
		it.Types = []string{q.typ}
	}
	return eventstore.Query{Items: []eventstore.QueryItem{it}}
}

// drawQuery draws a query of the tags events are drawn with, after a position near
// the log's end and not below its first (a scan never meets a truncated position).
func (m *machine) drawQuery(t *rapid.T) *queryCond {
	q := &queryCond{tags: []string{rapid.SampledFrom([]string{"course:1", "student:a", "course:2"}).Draw(t, "query tag")}}
	if rapid.Bool().Draw(t, "second tag") && q.tags[0] != "student:a" {
		q.tags = append(q.tags, "student:a")
	}
	if rapid.Bool().Draw(t, "query type") {
		q.typ = rapid.SampledFrom(eventTypes).Draw(t, "query type name")
	}
	low := m.model.first - 1
	q.after = uint64(rapid.IntRange(int(max(low, m.model.maxPos-4)), int(max(low, m.model.maxPos))).Draw(t, "query after"))
	return q
}

// firstMatch returns the first event in log order that the event store appended
// after q.after and that matches q, or nil.
func (m *model) firstMatch(q *queryCond) *event {
	var first *event
	for _, e := range m.events {
		if e.stream == "" || e.pos <= q.after || (q.typ != "" && e.typ != q.typ) {
			continue
		}
		tags := strings.Split(e.tags, ",")
		if !allIn(q.tags, tags) {
			continue
		}
		if first == nil || e.before(first) {
			first = e
		}
	}
	return first
}

func allIn(want, have []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}
