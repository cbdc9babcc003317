package conformance

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/pipeline"
)

// tagsRoundTrip: events keep their tags, in order, through the stream read and the
// log subscription; an event without tags reads back with none; a bad tag is an
// *ArgumentError naming it, and the append writes nothing.
func tagsRoundTrip(t *testing.T, e Engine) {
	ctx := ctxFor(t)
	tagged := ev("t-0", "enrolled")
	tagged.Tags = []string{"course:7", "student:ada", "ünïcødé"}
	plain := ev("t-1", "noted")
	pos, err := e.Append(ctx, "tagged", eventstore.NoStream, tagged, plain)
	if err != nil {
		t.Fatal(err)
	}
	want := []Event{
		{Stream: "tagged", Revision: 0, ID: "t-0", Type: "enrolled", Data: []byte("t-0"), Tags: tagged.Tags},
		{Stream: "tagged", Revision: 1, ID: "t-1", Type: "noted", Data: []byte("t-1")},
	}
	got, err := e.ReadStream(ctx, "tagged")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ReadStream (-want +got):\n%s", diff)
	}
	entries := make(chan Entry, 1)
	sub, err := e.Subscribe(ctx, 0, func(en Entry) error { // the partition is fresh: pos is its first commit
		if en.Position == pos {
			entries <- en
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	select {
	case en := <-entries:
		if diff := cmp.Diff(want, en.Events); diff != "" {
			t.Errorf("the subscription's entry (-want +got):\n%s", diff)
		}
	case <-ctx.Done():
		t.Fatal("the subscription did not deliver the tagged entry by the deadline")
	}
	for _, c := range []struct {
		tags []string
		arg  string
	}{
		{[]string{"ok", ""}, "events[0].Tags[1]"},
		{[]string{"a", "a"}, "events[0].Tags[1]"},
		{[]string{"\xff"}, "events[0].Tags[0]"},
	} {
		bad := ev("bad", "t")
		bad.Tags = c.tags
		_, err := e.Append(ctx, "bad-tags", eventstore.Any, bad)
		var ae *pipeline.ArgumentError
		if !errors.As(err, &ae) || ae.Arg != c.arg {
			t.Errorf("tags %q: %v, want an *ArgumentError naming %s", c.tags, err, c.arg)
		}
	}
	if got, err := e.ReadStream(ctx, "bad-tags"); err != nil || len(got) != 0 {
		t.Errorf("bad tags left %d events (%v)", len(got), err)
	}
}

// queryConditionsRacingAppends: writers append events tagged "hot" to streams of
// their own while others commit appends conditional on no "hot" event after the last
// one they know of. Every conditional commit that succeeded must have no "hot" append
// acknowledged between its allowed position and its own: a missed conflict shows as
// one there.
func queryConditionsRacingAppends(t *testing.T, e Engine) {
	ctx := ctxFor(t)
	hot := eventstore.Query{Items: []eventstore.QueryItem{{Tags: []string{"hot"}}}}
	probe, err := e.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	err = probe.RequireNoneMatching(ctx, hot, 0)
	probe.Discard()
	if errors.Is(err, errors.ErrUnsupported) {
		t.Logf("the engine refuses query conditions: %v", err)
		return
	}
	if err != nil {
		t.Fatalf("a query condition on an empty partition: %v", err)
	}
	var mu sync.Mutex
	var hotPos []uint64
	var known uint64 // the last hot append acknowledged
	type won struct{ pos, after uint64 }
	var wins []won
	add := func(a, i int) error {
		x := ev(fmt.Sprintf("hot-%d-%d", a, i), "heated")
		x.Tags = []string{"hot", fmt.Sprintf("appender:%d", a)}
		pos, err := e.Append(ctx, fmt.Sprintf("hot-%d", a), eventstore.Any, x)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		hotPos = append(hotPos, pos)
		known = max(known, pos)
		return nil
	}
	try := func(c, i int) error {
		stream := fmt.Sprintf("decided-%d", c)
		mu.Lock()
		after := known
		mu.Unlock()
		tx, err := e.Begin(ctx)
		if err != nil {
			return err
		}
		err = tx.RequireNoneMatching(ctx, hot, after)
		if err == nil {
			err = tx.Append(ctx, stream, eventstore.Any, ev(fmt.Sprintf("%s-%d", stream, i), "decided"))
		}
		if err != nil {
			tx.Discard()
			if errors.Is(err, eventstore.ErrConditionFailed) {
				return errRefused // a hot append landed after the one known
			}
			return err
		}
		pos, err := tx.Commit(ctx)
		if err == nil {
			mu.Lock()
			wins = append(wins, won{pos: pos, after: after})
			mu.Unlock()
		}
		return err
	}
	_, refused, conflicts := conditionRace(t, ctx, add, try)
	if t.Failed() {
		return
	}
	for _, w := range wins {
		for _, p := range hotPos {
			if p > w.after && p < w.pos {
				t.Errorf("the commit at %d required no hot event after %d, but one was acknowledged at %d", w.pos, w.after, p)
			}
		}
	}
	t.Logf("%d conditional commits (%d refused by the condition, %d as conflicts) against %d hot appends", len(wins), refused, conflicts, len(hotPos))
}
