package eventstore_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/pipeline"
)

func tagged(typ string, tags ...string) pipeline.Event {
	return pipeline.Event{Type: typ, Tags: tags}
}

// TestQueryConditionSemantics: NoneMatching fails only for an event that matches an
// item (every tag of it, one of its types when it has types) at a position after the
// one allowed; an event with the tag but another type, or only some of the tags,
// moves the marker without failing it. The failure names the matching event.
func TestQueryConditionSemantics(t *testing.T) {
	_, es, _ := openStore(t, pipeline.Config{})
	base, err := es.Append(ctx, "course-7", eventstore.NoStream, tagged("CourseDefined", "course:7"))
	if err != nil {
		t.Fatal(err)
	}
	after := base.Position
	// After the allowed position: an event with the tag of another type, and one with
	// only one of two tags.
	if _, err := es.Append(ctx, "course-7", eventstore.Any, tagged("CourseRenamed", "course:7")); err != nil {
		t.Fatal(err)
	}
	if _, err := es.Append(ctx, "student-ada", eventstore.NoStream, tagged("StudentRegistered", "student:ada")); err != nil {
		t.Fatal(err)
	}
	enrolled, err := es.Append(ctx, "student-bob", eventstore.NoStream, tagged("StudentEnrolled", "course:7", "student:bob"))
	if err != nil {
		t.Fatal(err)
	}
	q := func(items ...eventstore.QueryItem) eventstore.Query { return eventstore.Query{Items: items} }
	cases := []struct {
		name   string
		q      eventstore.Query
		after  uint64
		failAt uint64 // the matching event's position; 0: holds
	}{
		{"a type not appended since", q(eventstore.QueryItem{Tags: []string{"course:7"}, Types: []string{"CourseDefined"}}), after, 0},
		{"the tag, any type", q(eventstore.QueryItem{Tags: []string{"course:7"}}), after, after + 1},
		{"both tags, only one appended together", q(eventstore.QueryItem{Tags: []string{"course:7", "student:ada"}}), after, 0},
		{"both tags appended together", q(eventstore.QueryItem{Tags: []string{"course:7", "student:bob"}}), after, enrolled.Position},
		{"an item of several", q(eventstore.QueryItem{Tags: []string{"course:9"}}, eventstore.QueryItem{Tags: []string{"student:ada"}, Types: []string{"StudentRegistered"}}), after, after + 2},
		{"a tag never used", q(eventstore.QueryItem{Tags: []string{"course:9"}}), 0, 0},
		{"after the last match", q(eventstore.QueryItem{Tags: []string{"course:7"}}), enrolled.Position, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			target := "decision-" + c.name
			_, err := es.AppendIf(ctx, target, eventstore.NoStream, []eventstore.Condition{eventstore.NoneMatching(c.q, c.after)}, pipeline.Event{Type: "Decided"})
			if c.failAt == 0 {
				if err != nil {
					t.Fatalf("AppendIf: %v, want the condition to hold", err)
				}
				return
			}
			var matched *eventstore.QueryMatchedError
			if !errors.Is(err, eventstore.ErrConditionFailed) || !errors.As(err, &matched) {
				t.Fatalf("AppendIf: %v, want a *ConditionFailedError with a *QueryMatchedError", err)
			}
			if matched.Event.Position != c.failAt {
				t.Errorf("the failure names the event at %d (%s), want %d", matched.Event.Position, matched.Event.Type, c.failAt)
			}
			if got := len(streamEvents(t, es, target)); got != 0 {
				t.Errorf("a failed condition left %d events", got)
			}
		})
	}
	// ReadQuery returns the matching events and the position to condition on.
	evs, through, err := es.ReadQuery(ctx, q(eventstore.QueryItem{Tags: []string{"course:7"}}), 0)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, e := range evs {
		types = append(types, e.Type)
	}
	if fmt.Sprint(types) != "[CourseDefined CourseRenamed StudentEnrolled]" || through < enrolled.Position {
		t.Errorf("ReadQuery: %v through %d, want the three course:7 events through at least %d", types, through, enrolled.Position)
	}
}

// TestQueryBadInput: malformed queries are *ArgumentErrors naming the field, and
// nothing is written.
func TestQueryBadInput(t *testing.T) {
	_, es, _ := openStore(t, pipeline.Config{})
	cases := []struct {
		name string
		q    eventstore.Query
		arg  string
	}{
		{"no items", eventstore.Query{}, "conditions[0].query.Items"},
		{"an item without tags", eventstore.Query{Items: []eventstore.QueryItem{{Types: []string{"T"}}}}, "conditions[0].query.Items[0].Tags"},
		{"an empty tag", eventstore.Query{Items: []eventstore.QueryItem{{Tags: []string{"a", ""}}}}, "conditions[0].query.Items[0].Tags[1]"},
		{"an empty type", eventstore.Query{Items: []eventstore.QueryItem{{Tags: []string{"a"}}, {Tags: []string{"b"}, Types: []string{""}}}}, "conditions[0].query.Items[1].Types[0]"},
	}
	for _, c := range cases {
		_, err := es.AppendIf(ctx, "target", eventstore.Any, []eventstore.Condition{eventstore.NoneMatching(c.q, 0)}, pipeline.Event{Type: "E"})
		wantArgumentError(t, c.name, err, c.arg)
	}
	_, _, err := es.ReadQuery(ctx, eventstore.Query{}, 0)
	wantArgumentError(t, "ReadQuery with no items", err, "q.Items")
	if got := len(streamEvents(t, es, "target")); got != 0 {
		t.Errorf("bad queries left %d events", got)
	}
}

// TestQueryUniqueUsername: the unique-username case with a tag. Concurrent
// registrations of one name, each appending to its own user stream with the tag
// username:ada on the condition that no event with that tag exists: exactly one
// wins, the others fail with ErrConditionFailed and write nothing.
func TestQueryUniqueUsername(t *testing.T) {
	_, es, _ := openStore(t, pipeline.Config{})
	name := eventstore.Query{Items: []eventstore.QueryItem{{Tags: []string{"username:ada"}}}}
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, errs[i] = es.AppendIf(ctx, fmt.Sprintf("user-%d", i), eventstore.NoStream,
				[]eventstore.Condition{eventstore.NoneMatching(name, 0)}, tagged("UserRegistered", "username:ada", fmt.Sprintf("user:%d", i)))
		})
	}
	wg.Wait()
	won := 0
	for i, err := range errs {
		switch {
		case err == nil:
			won++
		case errors.Is(err, eventstore.ErrConditionFailed):
			if got := len(streamEvents(t, es, fmt.Sprintf("user-%d", i))); got != 0 {
				t.Errorf("loser %d left %d events", i, got)
			}
		default:
			t.Errorf("registration %d: %v", i, err)
		}
	}
	if won != 1 {
		t.Fatalf("%d registrations won, want 1 (%v)", won, errs)
	}
	evs, _, err := es.ReadQuery(ctx, name, 0)
	if err != nil || len(evs) != 1 {
		t.Errorf("ReadQuery: %d events with the name's tag (%v), want 1", len(evs), err)
	}
}
