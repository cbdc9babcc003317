package esmodel_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/pipeline"
)

// A subscriber is an application following the log with SubscribeToAll: it keeps the
// events it was handed (its state) and stores the checkpoints it is given. Restarted
// in process it resumes after the subscription's Position, keeping its state; after a
// crash (crashSub, kill) it resumes after its last stored checkpoint, with the state it
// had then. Either way it must end up handed every matching event exactly once, in
// log order. Its handler and its Checkpoint callback fail when the draw says so.

var (
	errInjected           = errors.New("esmodel: injected handler failure")
	errInjectedCheckpoint = errors.New("esmodel: injected checkpoint failure")
)

const maxSubs = 3

type allSub struct {
	name   string
	filter filterSpec
	every  int    // CheckpointEvery as passed (0: the default)
	origin uint64 // the position it first subscribed after

	mu        sync.Mutex
	delivered []seen // the application's state: what it was handed
	stored    uint64 // the last checkpoint it stored
	inst      *allInst
}

// allInst is one subscription of a subscriber, from after.
type allInst struct {
	sub            *pipeline.Subscription
	after          uint64
	failCP, failEv int // the Checkpoint call and the handled event that fail (0: none)
	cpCalls, evs   int
	calls          []cpCall
	failedCP       uint64 // the position whose Checkpoint call failed
	failedEv       uint64 // the position of the entry whose handling failed
}

// cpCall is one Checkpoint call: its position, how many events this subscription had
// handled by then, and the highest position among them.
type cpCall struct {
	pos     uint64
	handled int
	maxPos  uint64
}

func (s *allSub) interval() int {
	if s.every == 0 {
		return eventstore.DefaultCheckpointEvery
	}
	return s.every
}

// start subscribes s after after; the handler fails on its failEv-th event and the
// Checkpoint callback on its failCP-th call (0: never).
func (s *allSub) start(t *rapid.T, m *machine, after uint64, failCP, failEv int) {
	inst := &allInst{after: after, failCP: failCP, failEv: failEv}
	sub, err := m.es.SubscribeToAll(context.Background(), after, func(e eventstore.RecordedEvent) error {
		return s.handle(inst, e)
	}, eventstore.SubscribeOptions{
		Filter:          s.filter.api(),
		CheckpointEvery: s.every,
		Checkpoint:      func(pos uint64) error { return s.checkpoint(inst, pos) },
	})
	if err != nil {
		fatalf(t, "%s: SubscribeToAll(after %d): %v", s.name, after, err)
	}
	inst.sub = sub
	s.mu.Lock()
	s.inst = inst
	s.mu.Unlock()
}

func (s *allSub) handle(inst *allInst, e eventstore.RecordedEvent) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	inst.evs++
	if inst.evs == inst.failEv {
		// The entry is delivered again whole: forget what of it was handled.
		s.delivered = slices.DeleteFunc(s.delivered, func(d seen) bool { return d.Position == e.Position })
		inst.failedEv = e.Position
		return errInjected
	}
	s.delivered = append(s.delivered, seenOf(e))
	return nil
}

func (s *allSub) checkpoint(inst *allInst, pos uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	inst.cpCalls++
	c := cpCall{pos: pos}
	for _, d := range s.delivered {
		if d.Position > inst.after {
			c.handled++
			c.maxPos = max(c.maxPos, d.Position)
		}
	}
	inst.calls = append(inst.calls, c)
	if inst.cpCalls == inst.failCP {
		inst.failedCP = pos
		return errInjectedCheckpoint
	}
	s.stored = pos
	return nil
}

// verify checks the subscriber at position pos of its current subscription, which has
// ended or caught up: its state is exactly the matching events up to pos, each once,
// in order; each Checkpoint call came every CheckpointEvery entries, once every event
// up to it had been handled; and a failed call or handler left Position where the
// documentation says.
func (s *allSub) verify(t *rapid.T, m *machine, pos uint64) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	inst := s.inst
	what := fmt.Sprintf("%s (filter %v, CheckpointEvery %d, subscribed after %d)", s.name, s.filter, s.every, inst.after)
	// A running subscription (catchUp verifies one at the position it waited for)
	// may already be past pos, handling an entry the projection committed since:
	// where Position stands after a failure is checked once it has ended, against
	// its final Position.
	ended := false
	select {
	case <-inst.sub.Done():
		ended = true
	default:
	}
	if end := inst.sub.Position(); ended && inst.failedCP != 0 && end < inst.failedCP {
		fatalf(t, "%s: Position %d after the Checkpoint callback failed at %d, once every event up to it had been handled: resuming after Position hands them out again", what, end, inst.failedCP)
	}
	if end := inst.sub.Position(); ended && inst.failedEv != 0 && end != inst.failedEv-1 {
		fatalf(t, "%s: Position %d after the handler failed in entry %d, which must be delivered again whole", what, end, inst.failedEv)
	}
	for k, c := range inst.calls {
		if want := inst.after + uint64((k+1)*s.interval()); c.pos != want {
			fatalf(t, "%s: Checkpoint call %d at position %d, want %d (every %d entries scanned)", what, k+1, c.pos, want, s.interval())
		}
		if want := len(m.model.matchingUpTo(s.filter, inst.after, c.pos)); c.handled != want || c.maxPos > c.pos {
			fatalf(t, "%s: Checkpoint(%d) called with %d events handled (the last at %d), want the %d matching events up to it", what, c.pos, c.handled, c.maxPos, want)
		}
	}
	want := seenModels(m.model.matchingUpTo(s.filter, s.origin, pos))
	if diff := cmp.Diff(want, s.delivered, equateEmpty); diff != "" {
		fatalf(t, "%s: events handed out up to Position %d, across restarts (-model +subscriber):\n%s", what, pos, diff)
	}
}

// end waits for the current subscription to end (closing it first when close) and
// returns its Position, verified. Only injected failures may have ended it.
func (s *allSub) end(t *rapid.T, m *machine, close bool) uint64 {
	t.Helper()
	var err error
	if close {
		err = s.inst.sub.Close()
	} else {
		err = s.inst.sub.Wait()
	}
	if err != nil && !errors.Is(err, errInjected) && !errors.Is(err, errInjectedCheckpoint) {
		fatalf(t, "%s: subscription ended with %v", s.name, err)
	}
	pos := s.inst.sub.Position()
	s.verify(t, m, pos)
	return pos
}

// stop ends the subscription before a Close of the database and returns its Position.
func (s *allSub) stop(t *rapid.T, m *machine) uint64 { return s.end(t, m, true) }

// crash forgets what the subscriber handled after its stored checkpoint, as an
// application that died would, and returns that checkpoint.
func (s *allSub) crash() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.delivered = slices.DeleteFunc(s.delivered, func(d seen) bool { return d.Position > s.stored })
	return s.stored
}

// catchUp waits until the subscriber has handled everything published, restarting it
// after Position whenever an injected failure ended it, and verifies it.
func (s *allSub) catchUp(t *rapid.T, m *machine) {
	t.Helper()
	last := m.db.LastPosition()
	for !waitPosition(t, s.name, s.inst.sub, last) {
		s.start(t, m, s.end(t, m, false), 0, 0)
	}
	s.verify(t, m, last)
}

func drawFailures(t *rapid.T) (failCP, failEv int) {
	return rapid.IntRange(0, 3).Draw(t, "failing checkpoint call"), rapid.IntRange(0, 4).Draw(t, "failing event")
}

// subscribeAll: a new subscriber with a drawn filter, checkpoint interval and
// failures, from the start of the log (or its end, once the log is truncated).
func (m *machine) subscribeAll(t *rapid.T) {
	if len(m.subs) >= maxSubs {
		t.Skip("enough subscribers")
	}
	m.nsubs++
	s := &allSub{
		name:   fmt.Sprintf("subscriber %d", m.nsubs),
		filter: drawFilter(t, "filter"),
		every:  rapid.IntRange(0, 3).Draw(t, "CheckpointEvery"),
	}
	if m.model.first > 1 || rapid.Bool().Draw(t, "from the end") {
		s.origin = m.db.LastPosition()
	}
	s.stored = s.origin
	failCP, failEv := drawFailures(t)
	s.start(t, m, s.origin, failCP, failEv)
	m.subs = append(m.subs, s)
}

func (m *machine) drawSub(t *rapid.T) *allSub {
	if len(m.subs) == 0 {
		t.Skip("no subscriber")
	}
	return m.subs[rapid.IntRange(0, len(m.subs)-1).Draw(t, "subscriber")]
}

// restartSub: a subscriber closed and subscribed again after its Position, with new
// failures drawn.
func (m *machine) restartSub(t *rapid.T) {
	s := m.drawSub(t)
	pos := s.end(t, m, true)
	failCP, failEv := drawFailures(t)
	s.start(t, m, pos, failCP, failEv)
}

// crashSub: a subscriber that dies and comes back from its last stored checkpoint.
func (m *machine) crashSub(t *rapid.T) {
	s := m.drawSub(t)
	s.end(t, m, true)
	failCP, failEv := drawFailures(t)
	s.start(t, m, s.crash(), failCP, failEv)
}

// dropSub: a subscriber that goes away for good.
func (m *machine) dropSub(t *rapid.T) {
	s := m.drawSub(t)
	s.end(t, m, true)
	m.subs = slices.DeleteFunc(m.subs, func(o *allSub) bool { return o == s })
}
