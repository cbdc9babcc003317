package esmodel_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"sync"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"pgregory.net/rapid"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/pipeline"
)

// check runs after every action: every stream reads both ways as the model says, with
// its metadata; the whole log reads both ways as the model says; the log's first
// position is the model's and its last is at or past every position a call returned;
// every subscriber has caught up and been handed each matching event exactly once; the
// projection's read model counts exactly the matching events up to its position.
func (m *machine) check(t *rapid.T) {
	ctx := context.Background()
	if got := m.db.FirstPosition(); got != m.model.first {
		fatalf(t, "FirstPosition %d, model %d", got, m.model.first)
	}
	if got := m.db.LastPosition(); got < m.model.maxPos {
		fatalf(t, "LastPosition %d below position %d, which a call returned", got, m.model.maxPos)
	}
	for _, s := range streamNames {
		m.compareStream(t, "check", s, 0, eventstore.ToEnd, false)
		m.compareStream(t, "check", s, math.MaxUint64, eventstore.ToEnd, true)
		md, err := m.es.GetStreamMetadata(ctx, s)
		if st := m.model.streams[s]; st.tombstoned {
			expectDeleted(t, fmt.Sprintf("GetStreamMetadata(%s) of a tombstoned stream", s), err, s)
		} else if err != nil {
			fatalf(t, "GetStreamMetadata(%s): %v", s, err)
		} else if diff := cmp.Diff(st.md, md, equateEmpty); diff != "" {
			fatalf(t, "GetStreamMetadata(%s) (-model +store):\n%s", s, diff)
		}
	}
	m.compareAll(t, "check", eventstore.At{Position: m.model.first}, eventstore.ToEnd, filterSpec{}, false)
	m.compareAll(t, "check", eventstore.End, eventstore.ToEnd, filterSpec{}, true)
	for _, iv := range indexValues {
		m.compareIndex(t, "check", iv, eventstore.Start, eventstore.ToEnd, false)
	}
	for _, s := range m.subs {
		s.catchUp(t, m)
	}
	m.checkProjection(t)
	m.checkAlias(t)
}

// fatalf fails the sequence. The failure's message is format with its verbs blanked
// out, the same however the values vary, because rapid shrinks a failing sequence
// only to shorter ones that fail with the very same message (and calls a replay that
// fails with another one flaky); the message with its values (positions, IDs, diffs)
// is logged just before, and rapid prints it with the shrunk sequence.
// The first failure of a run is also logged on the test itself (reportFirst), so its
// values show when rapid's replay of it fails otherwise or not at all (a race).
func fatalf(t *rapid.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	t.Logf("FAILED: %s", msg)
	if reportFirst != nil {
		reportFirst(msg)
	}
	t.Fatalf("%s (the FAILED line above has the values)", verbs.ReplaceAllString(format, "…"))
}

// reportFirst, set by TestESModel for its run, logs the first failure's values.
var reportFirst func(msg string)

var verbs = regexp.MustCompile(`%[-+# 0-9.*]*[a-zA-Z]`)

// equateEmpty makes a nil slice or map equal an empty one in comparisons.
var equateEmpty = cmpopts.EquateEmpty()

// seen is the part of a RecordedEvent the model predicts (not its time).
type seen struct {
	Stream   string
	Revision uint64
	Position uint64
	Index    int
	ID, Type string
	Data     string
}

func seenOf(e eventstore.RecordedEvent) seen {
	return seen{e.Stream, e.Revision, e.Position, e.Index, e.ID, e.Type, string(e.Data)}
}

func seenModel(e *event) seen { return seen{e.stream, e.rev, e.pos, e.idx, e.id, e.typ, e.id} }

func seenAll(evs []eventstore.RecordedEvent) []seen {
	out := make([]seen, 0, len(evs))
	for _, e := range evs {
		if e.Time.IsZero() {
			out = append(out, seen{Stream: "<zero commit time>"})
			continue
		}
		out = append(out, seenOf(e))
	}
	return out
}

func seenModels(evs []*event) []seen {
	out := make([]seen, 0, len(evs))
	for _, e := range evs {
		out = append(out, seenModel(e))
	}
	return out
}

// published fails t unless pos, returned by a call that has returned, is published:
// LastPosition is at or past it and its entry reads (unless TruncateLog removed it: a
// retry returns the original position, however old).
func (m *machine) published(t *rapid.T, what string, pos uint64) {
	t.Helper()
	if err := publishedErr(m.db, pos); err != nil {
		fatalf(t, "%s: %v", what, err)
	}
}

// publishedErr is published for a goroutine: it reports instead of failing.
func publishedErr(db *pipeline.DB, pos uint64) error {
	if last := db.LastPosition(); last < pos {
		return fmt.Errorf("returned position %d is not published: LastPosition %d", pos, last)
	}
	if pos < db.FirstPosition() {
		return nil
	}
	if _, err := db.Entry(pos); err != nil {
		return fmt.Errorf("returned position %d: Entry: %w", pos, err)
	}
	return nil
}

// expectDeleted fails t unless err is the *StreamDeletedError of stream.
func expectDeleted(t *rapid.T, what string, err error, stream string) {
	t.Helper()
	var sd *eventstore.StreamDeletedError
	if !errors.Is(err, eventstore.ErrStreamDeleted) || !errors.As(err, &sd) || sd.Stream != stream {
		fatalf(t, "%s: %v, want a *StreamDeletedError of %q", what, err, stream)
	}
}

// expectWrongVersion fails t unless err is the *WrongExpectedVersionError of stream
// with the expectation and the actual state given.
func expectWrongVersion(t *rapid.T, what string, err error, stream string, exp expectation, actual eventstore.ExpectedRevision) {
	t.Helper()
	if msg := wrongVersionMismatch(err, stream, exp, actual); msg != "" {
		fatalf(t, "%s: %s", what, msg)
	}
}

// wrongVersionMismatch is expectWrongVersion for a goroutine: "" when err is right.
func wrongVersionMismatch(err error, stream string, exp expectation, actual eventstore.ExpectedRevision) string {
	var we *eventstore.WrongExpectedVersionError
	if !errors.Is(err, eventstore.ErrWrongExpectedVersion) || !errors.As(err, &we) {
		return fmt.Sprintf("%v, want a *WrongExpectedVersionError (expected %v, actual %v)", err, exp, actual)
	}
	if we.Stream != stream || we.Expected.String() != exp.String() || we.Actual.String() != actual.String() {
		return fmt.Sprintf("%v, want stream %q, expected %v, actual %v", err, stream, exp, actual)
	}
	return ""
}

func expectIs(t *rapid.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		fatalf(t, "%s: %v, want %v", what, err, target)
	}
}

func waitFor(t *rapid.T, wg *sync.WaitGroup, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(deadline):
		fatalf(t, "%s did not return within %v", what, deadline)
	}
}

// pollInterval is how often a wait for a subscription's Position looks again: the
// subscription signals nothing for entries without a matching event, so the wait
// polls its Position (a condition, under the deadline), never sleeps a guessed time.
const pollInterval = time.Millisecond

// waitPosition waits until sub's Position reaches pos, or sub ends (it returns false
// then), or the deadline passes (t fails).
func waitPosition(t *rapid.T, what string, sub *pipeline.Subscription, pos uint64) bool {
	t.Helper()
	timeout := time.After(deadline)
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for sub.Position() < pos {
		select {
		case <-sub.Done():
			return sub.Position() >= pos
		case <-timeout:
			fatalf(t, "%s: subscription stuck at position %d, want %d", what, sub.Position(), pos)
		case <-tick.C:
		}
	}
	return true
}
