package conformance

import (
	"errors"
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
