package esmodel_test

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"pgregory.net/rapid"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/pipeline"
)

// appendCall is an append made, which a retry sends again as it was.
type appendCall struct {
	stream string
	exp    expectation
	evs    []eventSpec
}

// drawEvents draws 1..3 events with fresh IDs.
func (m *machine) drawEvents(t *rapid.T, label string) []eventSpec {
	n := rapid.IntRange(1, 3).Draw(t, label+" events")
	evs := make([]eventSpec, n)
	for i := range evs {
		m.ids++
		evs[i] = eventSpec{id: fmt.Sprintf("e%d", m.ids), typ: rapid.SampledFrom(eventTypes).Draw(t, label+" type"),
			tags: rapid.SampledFrom(tagSets).Draw(t, label+" tags")}
	}
	return evs
}

// drawExpectation draws any kind of expectation; an exact one is near the head, so it
// matches often.
func drawExpectation(t *rapid.T, st *stream, label string) expectation {
	kind := rapid.IntRange(expAny, expExact).Draw(t, label+" expected")
	if kind != expExact {
		return expectation{kind: kind}
	}
	n := int(st.nextRev())
	return expectation{kind: expExact, rev: uint64(rapid.IntRange(max(n-2, 0), n).Draw(t, label+" revision"))}
}

// expectAppend checks the outcome of an append of fresh events (or of a retry that was
// not taken as one) against the model and learns it. The first event sits at index idx
// of the entry; sequential says no other append ran meanwhile, so its position must be
// above every one returned before.
func (m *machine) expectAppend(t *rapid.T, what, s string, exp expectation, evs []eventSpec, res eventstore.AppendResult, err error, sequential bool) {
	t.Helper()
	st := m.model.streams[s]
	switch {
	case st.tombstoned:
		expectDeleted(t, what+" to a tombstoned stream", err, s)
	case !st.matches(exp):
		expectWrongVersion(t, what, err, s, exp, st.actual())
	case err != nil:
		fatalf(t, "%s: %v", what, err)
	default:
		if sequential && res.Position <= m.model.maxPos {
			fatalf(t, "%s: position %d, not above %d, which an earlier call returned", what, res.Position, m.model.maxPos)
		}
		m.checkEntry(t, what, s, res.Position, 0, st.nextRev(), evs)
		if want := m.model.appendAt(s, res.Position, 0, evs); res.NextExpectedRevision != want {
			fatalf(t, "%s: NextExpectedRevision %d, want %d", what, res.NextExpectedRevision, want)
		}
	}
}

// checkEntry fails t unless the entry at pos is published and holds evs, appended to s
// from revision rev, from index idx on.
func (m *machine) checkEntry(t *rapid.T, what, s string, pos uint64, idx int, rev uint64, evs []eventSpec) {
	t.Helper()
	m.published(t, what, pos)
	e, err := m.db.Entry(pos)
	if err != nil {
		fatalf(t, "%s: Entry(%d): %v", what, pos, err)
	}
	if len(e.Events) < idx+len(evs) {
		fatalf(t, "%s: entry %d holds %d events, want at least %d", what, pos, len(e.Events), idx+len(evs))
	}
	for i, ev := range evs {
		got := e.Events[idx+i]
		if got.ID != ev.id || got.Stream != s || got.Revision != rev+uint64(i) || got.Index != idx+i {
			fatalf(t, "%s: entry %d event %d is %s of %s@%d (index %d), want %s of %s@%d", what, pos, idx+i, got.ID, got.Stream, got.Revision, got.Index, ev.id, s, rev+uint64(i))
		}
		if !slices.Equal(got.Tags, ev.tagList()) {
			fatalf(t, "%s: entry %d event %d (%s) has tags %q, want %q", what, pos, idx+i, got.ID, got.Tags, ev.tagList())
		}
	}
}

// appendOne: one append with a drawn expectation.
func (m *machine) appendOne(t *rapid.T) {
	s := rapid.SampledFrom(streamNames).Draw(t, "stream")
	exp := drawExpectation(t, m.model.streams[s], "append")
	evs := m.drawEvents(t, "append")
	res, err := m.es.Append(context.Background(), s, exp.api(), apiEvents(evs)...)
	m.expectAppend(t, fmt.Sprintf("Append(%s, %v, %d events)", s, exp, len(evs)), s, exp, evs, res, err, true)
	m.calls = append(m.calls, appendCall{s, exp, evs})
}

// dupOf says what a retry of evs with exp finds: the revisions the append expected
// hold these IDs (found; last and pos are the original result), and whether they are
// all readable too (clear). The documentation makes a found retry return the original
// result; where the revisions are hidden or reclaimed it does not say, so either
// outcome is accepted there. "The revisions expected" are, for NoStream, 0 on; for
// Revision(n), n+1 on; for Any and StreamExists, the stream's last len(evs). A
// soft-deleted stream reads as no stream: its events are not the stream's.
func (m *model) dupOf(s string, exp expectation, evs []eventSpec) (last, pos uint64, found, clear bool) {
	st := m.streams[s]
	n := uint64(len(evs))
	if !st.exists() {
		return 0, 0, false, false
	}
	var first uint64
	switch exp.kind {
	case expNoStream:
		first = 0
	case expExact:
		first = exp.rev + 1
	default:
		if st.nextRev() < n {
			return 0, 0, false, false
		}
		first = st.nextRev() - n
	}
	if first+n > st.nextRev() {
		return 0, 0, false, false
	}
	clear = true
	for i, e := range evs {
		r := first + uint64(i)
		if st.revs[r].id != e.id {
			return 0, 0, false, false
		}
		clear = clear && st.readable(r)
	}
	return first + n - 1, st.revs[first+n-1].pos, true, clear
}

// retry: an earlier append sent again, same expectation, same events. Found, it
// returns the original result, published, and writes nothing; otherwise it is an
// ordinary append.
func (m *machine) retry(t *rapid.T) {
	if len(m.calls) == 0 {
		t.Skip("no append to retry")
	}
	c := m.calls[rapid.IntRange(0, len(m.calls)-1).Draw(t, "append to retry")]
	what := fmt.Sprintf("retried Append(%s, %v, %s..)", c.stream, c.exp, c.evs[0].id)
	res, err := m.es.Append(context.Background(), c.stream, c.exp.api(), apiEvents(c.evs)...)
	if m.model.streams[c.stream].tombstoned {
		expectDeleted(t, what+" to a tombstoned stream", err, c.stream)
		return
	}
	last, pos, found, clear := m.model.dupOf(c.stream, c.exp, c.evs)
	if found && err == nil && res.Position == pos {
		if res.NextExpectedRevision != last {
			fatalf(t, "%s: NextExpectedRevision %d, want the original %d", what, res.NextExpectedRevision, last)
		}
		m.published(t, what, res.Position)
		return
	}
	if clear {
		fatalf(t, "%s: (%+v, %v), want the original result (revision %d, position %d)", what, res, err, last, pos)
	}
	m.expectAppend(t, what, c.stream, c.exp, c.evs, res, err, true)
}

// outcome is what one goroutine's append returned, with whether its position was
// published when it returned.
type outcome struct {
	res eventstore.AppendResult
	err error
	pub error
}

// appendAll runs the appends calls from a goroutine each, at once, and returns their
// outcomes once all have returned.
func (m *machine) appendAll(t *rapid.T, what string, calls []appendCall) []outcome {
	out := make([]outcome, len(calls))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, c := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			o := &out[i]
			o.res, o.err = m.es.Append(context.Background(), c.stream, c.exp.api(), apiEvents(c.evs)...)
			if o.err == nil {
				o.pub = publishedErr(m.db, o.res.Position)
			}
		}()
	}
	close(start)
	waitFor(t, &wg, what)
	return out
}

// concurrentRetries: the same append (same event IDs) from several goroutines at once,
// as a client retrying a call it thinks lost, for a drawn number of rounds. Exactly
// one writes; all return the same result, published when they return.
func (m *machine) concurrentRetries(t *rapid.T) {
	s := rapid.SampledFrom(streamNames).Draw(t, "stream")
	st := m.model.streams[s]
	exp := drawExpectation(t, st, "retries")
	for round := range rapid.IntRange(1, 6).Draw(t, "rounds") {
		if round > 0 && exp.kind == expExact && st.exists() {
			exp.rev = st.head() // the next round expects what the last one made
		}
		m.retryRound(t, s, exp)
	}
}

// retryRound is one round of concurrentRetries.
func (m *machine) retryRound(t *rapid.T, s string, exp expectation) {
	st := m.model.streams[s]
	evs := m.drawEvents(t, "retries")
	n := rapid.IntRange(3, 8).Draw(t, "goroutines")
	if st.matches(exp) && m.model.retryAmbiguous(s, exp, len(evs)) {
		t.Skip("the winner's events would be hidden, or NoStream on a soft-deleted stream: the retries' outcome is not documented")
	}
	what := fmt.Sprintf("%d concurrent Append(%s, %v, %s..)", n, s, exp, evs[0].id)
	out := m.appendAll(t, what, slices.Repeat([]appendCall{{s, exp, evs}}, n))
	if st.tombstoned || !st.matches(exp) {
		for _, o := range out {
			m.expectAppend(t, what, s, exp, evs, o.res, o.err, true)
		}
		return
	}
	for i, o := range out {
		switch {
		case o.err != nil:
			fatalf(t, "%s: goroutine %d: %v, want the one result", what, i, o.err)
		case o.pub != nil:
			fatalf(t, "%s: goroutine %d got (%+v): %v", what, i, o.res, o.pub)
		case o.res != out[0].res:
			fatalf(t, "%s: goroutine %d got %+v, goroutine 0 %+v: one append, one result", what, i, o.res, out[0].res)
		}
	}
	m.expectAppend(t, what, s, exp, evs, out[0].res, nil, true)
	m.calls = append(m.calls, appendCall{s, exp, evs})
}

// retryAmbiguous reports a concurrent retry whose losers' outcome the documentation
// does not settle: the winner's events hidden at once (MaxCount below their number,
// TruncateBefore above them), or NoStream on a soft-deleted stream (the winner's
// events are not at revision 0).
func (m *model) retryAmbiguous(s string, exp expectation, n int) bool {
	st := m.streams[s]
	md := st.md
	return (md.MaxCount > 0 && md.MaxCount < uint64(n)) || md.TruncateBefore > st.nextRev() ||
		(exp.kind == expNoStream && st.hasHead())
}

// racingAppends: different appends to one stream with one expectation, at once. With
// NoStream or an exact revision exactly one wins and the others fail with the
// winner's revision; with Any or StreamExists all land, in position order.
func (m *machine) racingAppends(t *rapid.T) {
	s := rapid.SampledFrom(streamNames).Draw(t, "stream")
	st := m.model.streams[s]
	exp := drawExpectation(t, st, "racing")
	n := rapid.IntRange(2, 4).Draw(t, "goroutines")
	calls := make([]appendCall, n)
	for i := range calls {
		calls[i] = appendCall{s, exp, m.drawEvents(t, fmt.Sprintf("racer %d", i))}
	}
	what := fmt.Sprintf("%d racing Append(%s, %v)", n, s, exp)
	out := m.appendAll(t, what, calls)
	if st.tombstoned || !st.matches(exp) {
		for i, o := range out {
			m.expectAppend(t, what, s, exp, calls[i].evs, o.res, o.err, true)
		}
		return
	}
	var won []int
	for i, o := range out {
		switch {
		case o.err == nil && o.pub != nil:
			fatalf(t, "%s: racer %d got (%+v): %v", what, i, o.res, o.pub)
		case o.err == nil:
			won = append(won, i)
		}
	}
	want := n // Any and StreamExists: every append lands
	if exp.kind == expNoStream || exp.kind == expExact {
		want = 1
	}
	if len(won) != want {
		fatalf(t, "%s: %d won (%v), want %d", what, len(won), out, want)
	}
	slices.SortFunc(won, func(a, b int) int { return int(out[a].res.Position) - int(out[b].res.Position) })
	for _, i := range won {
		m.expectAppend(t, fmt.Sprintf("%s: racer %d", what, i), s, expectation{kind: expAny}, calls[i].evs, out[i].res, nil, false)
		m.calls = append(m.calls, calls[i])
	}
	for i, o := range out {
		if o.err != nil {
			expectWrongVersion(t, fmt.Sprintf("%s: losing racer %d", what, i), o.err, s, exp, st.actual())
		}
	}
}

// parallelAppends: appends to different streams, each with its own expectation, at
// once; each succeeds or fails as it would alone.
func (m *machine) parallelAppends(t *rapid.T) {
	order := rapid.Permutation(streamNames).Draw(t, "streams")
	calls := make([]appendCall, rapid.IntRange(2, len(order)).Draw(t, "goroutines"))
	for i := range calls {
		s := order[i]
		calls[i] = appendCall{s, drawExpectation(t, m.model.streams[s], s), m.drawEvents(t, s)}
	}
	out := m.appendAll(t, "parallel appends", calls)
	for i, o := range out {
		c := calls[i]
		what := fmt.Sprintf("parallel Append(%s, %v)", c.stream, c.exp)
		if o.err == nil && o.pub != nil {
			fatalf(t, "%s got (%+v): %v", what, o.res, o.pub)
		}
		m.expectAppend(t, what, c.stream, c.exp, c.evs, o.res, o.err, false)
		m.calls = append(m.calls, c)
	}
}

// appendTxn: appends to two streams in one transaction (AppendTxn): both land in one
// entry, the first stream's events first, or neither does and the first failing
// stream's error comes back.
func (m *machine) appendTxn(t *rapid.T) {
	order := rapid.Permutation(streamNames).Draw(t, "streams")
	a, b := order[0], order[1]
	sa, sb := m.model.streams[a], m.model.streams[b]
	ea, eb := drawExpectation(t, sa, a), drawExpectation(t, sb, b)
	va, vb := m.drawEvents(t, a), m.drawEvents(t, b)
	what := fmt.Sprintf("AppendTxn(%s, %v) + AppendTxn(%s, %v)", a, ea, b, eb)
	pos, err := m.db.UpdatePosition(context.Background(), func(tx *pipeline.Txn) error {
		if err := m.es.AppendTxn(tx, a, ea.api(), apiEvents(va)...); err != nil {
			return err
		}
		return m.es.AppendTxn(tx, b, eb.api(), apiEvents(vb)...)
	})
	switch {
	case sa.tombstoned:
		expectDeleted(t, what, err, a)
	case !sa.matches(ea):
		expectWrongVersion(t, what, err, a, ea, sa.actual())
	case sb.tombstoned:
		expectDeleted(t, what, err, b)
	case !sb.matches(eb):
		expectWrongVersion(t, what, err, b, eb, sb.actual())
	case err != nil:
		fatalf(t, "%s: %v", what, err)
	default:
		if pos <= m.model.maxPos {
			fatalf(t, "%s: position %d, not above %d", what, pos, m.model.maxPos)
		}
		m.checkEntry(t, what, a, pos, 0, sa.nextRev(), va)
		m.checkEntry(t, what, b, pos, len(va), sb.nextRev(), vb)
		m.model.appendAt(a, pos, 0, va)
		m.model.appendAt(b, pos, len(va), vb)
	}
}

// addEvents: events of no stream (pipeline.Txn.AddEvents), which ReadAll and
// subscriptions without a stream condition hand out.
func (m *machine) addEvents(t *rapid.T) {
	evs := m.drawEvents(t, "no stream")
	pos, err := m.db.UpdatePosition(context.Background(), func(tx *pipeline.Txn) error {
		return tx.AddEvents(apiEvents(evs)...)
	})
	if err != nil {
		fatalf(t, "AddEvents: %v", err)
	}
	m.published(t, "AddEvents", pos)
	m.model.addEvents(pos, evs)
}
