package esmodel_test

import (
	"context"
	"errors"
	"fmt"

	"pgregory.net/rapid"

	"github.com/rockline/rockline/eventstore"
)

// appendIf: an append with 0..3 drawn stream conditions. The model decides the
// outcome: the append's own stream first (tombstoned, or its expectation not met: the
// append's own error, not a condition's), then the conditions in order (the first not
// met is a *ConditionFailedError naming it; a tombstoned stream meets only Any), and
// otherwise the append lands as Append's would. A condition never writes its stream.
func (m *machine) appendIf(t *rapid.T) {
	s := rapid.SampledFrom(streamNames).Draw(t, "stream")
	exp := drawExpectation(t, m.model.streams[s], "appendIf")
	n := rapid.IntRange(0, 3).Draw(t, "conditions")
	conds := make([]eventstore.Condition, n)
	cexps := make([]expectation, n)
	cstreams := make([]string, n)
	for i := range conds {
		cstreams[i] = rapid.SampledFrom(streamNames).Draw(t, "condition stream")
		cexps[i] = drawExpectation(t, m.model.streams[cstreams[i]], "condition")
		conds[i] = eventstore.StreamAt(cstreams[i], cexps[i].api())
	}
	evs := m.drawEvents(t, "appendIf")
	what := fmt.Sprintf("AppendIf(%s, %v, %v, %d events)", s, exp, conds, len(evs))
	res, err := m.es.AppendIf(context.Background(), s, exp.api(), conds, apiEvents(evs)...)

	st := m.model.streams[s]
	failed := -1
	if !st.tombstoned && st.matches(exp) {
		for i, c := range cexps {
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
	case m.model.streams[cstreams[failed]].tombstoned:
		expectDeleted(t, what, cf.Err, cstreams[failed])
	default:
		expectWrongVersion(t, what, cf.Err, cstreams[failed], cexps[failed], m.model.streams[cstreams[failed]].actual())
	}
}
