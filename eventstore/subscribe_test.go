package eventstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/pipeline"
)

// collector gathers what a subscription hands out and says when it has n events.
type collector struct {
	got  []eventstore.RecordedEvent
	n    int
	done chan struct{}
}

func newCollector(n int) *collector { return &collector{n: n, done: make(chan struct{})} }

func (c *collector) handle(e eventstore.RecordedEvent) error {
	c.got = append(c.got, e)
	if len(c.got) == c.n {
		close(c.done)
	}
	if len(c.got) > c.n {
		return fmt.Errorf("event %d beyond the %d expected: %+v", len(c.got), c.n, e)
	}
	return nil
}

// TestSubscribeToAll: a filtered subscription hands out every matching event once, in
// log order, the ones committed before it (catch-up) and after it (live) alike.
func TestSubscribeToAll(t *testing.T) {
	for name, f := range filters {
		t.Run(name, func(t *testing.T) {
			db, es, _ := openStore(t, pipeline.Config{})
			before := mixedLog(t, db, es)
			mid := db.LastPosition()
			want := matching(before, f)
			c := newCollector(2 * len(want))
			if len(want) == 0 {
				c = newCollector(0)
				close(c.done)
			}
			sub, err := es.SubscribeToAll(ctx, 0, c.handle, eventstore.SubscribeOptions{Filter: f})
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Close()
			all := mixedLog(t, db, es) // as many again, live
			for _, e := range all {
				if e.Position > mid && f.Match(&e) {
					want = append(want, e)
				}
			}
			wait(t, func() { <-c.done }, "the matching events")
			if err := sub.Close(); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, c.got); diff != "" {
				t.Errorf("delivered (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSubscribeCheckpoints: a subscription whose filter matches nothing still reports
// positions every CheckpointEvery entries; subscribing again after the last one
// reported scans only what came after it, and a matching event after it arrives once.
func TestSubscribeCheckpoints(t *testing.T) {
	_, es, _ := openStore(t, pipeline.Config{})
	for i := range 25 {
		if _, err := es.Append(ctx, "noise", eventstore.Any, eventstore.Event{Type: "Noise", Data: []byte(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	var checkpoints []uint64
	reached := make(chan struct{})
	f := eventstore.Filter{TypePrefix: "Wanted"}
	sub, err := es.SubscribeToAll(ctx, 0, func(e eventstore.RecordedEvent) error {
		return fmt.Errorf("nothing matches yet, got %+v", e)
	}, eventstore.SubscribeOptions{Filter: f, CheckpointEvery: 10, Checkpoint: func(p uint64) error {
		checkpoints = append(checkpoints, p)
		if len(checkpoints) == 2 {
			close(reached)
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	wait(t, func() { <-reached }, "two checkpoints")
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]uint64{10, 20}, checkpoints); diff != "" {
		t.Fatalf("checkpoints (-want +got):\n%s", diff)
	}

	res, err := es.Append(ctx, "wanted", eventstore.NoStream, eventstore.Event{Type: "WantedThing"})
	if err != nil {
		t.Fatal(err)
	}
	scanned := 0
	c := newCollector(1)
	again, err := es.SubscribeToAll(ctx, checkpoints[1], c.handle, eventstore.SubscribeOptions{Filter: f, CheckpointEvery: 1,
		Checkpoint: func(uint64) error { scanned++; return nil }})
	if err != nil {
		t.Fatal(err)
	}
	wait(t, func() { <-c.done }, "the wanted event")
	if err := again.Close(); err != nil {
		t.Fatal(err)
	}
	if len(c.got) != 1 || c.got[0].Position != res.Position {
		t.Fatalf("after resuming got %+v, want the event at %d", c.got, res.Position)
	}
	if want := int(res.Position - checkpoints[1]); scanned > want {
		t.Errorf("resumed subscription scanned %d entries, want at most %d (no rescan from the start)", scanned, want)
	}
}

// TestSubscribeToStream: a stream subscription from a revision hands out that
// revision and every later one of that stream only, catching up and then live; a
// subscription to a stream with no such revision yet starts with its first.
func TestSubscribeToStream(t *testing.T) {
	db, es, _ := openStore(t, pipeline.Config{})
	seedStream(t, es, "s", 5)
	seedStream(t, es, "other", 3)
	c := newCollector(5) // revisions 2..4, then 5 and 6 live
	sub, err := es.SubscribeToStream(ctx, "s", 2, c.handle)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	future := newCollector(2)
	fsub, err := es.SubscribeToStream(ctx, "later", 0, future.handle)
	if err != nil {
		t.Fatal(err)
	}
	defer fsub.Close()
	tx := db.Begin()
	for _, s := range []string{"other", "s", "later"} {
		if err := es.AppendTxn(tx, s, eventstore.Any, eventstore.Event{Type: "live"}, eventstore.Event{Type: "live"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	wait(t, func() { <-c.done }, "the stream's events")
	wait(t, func() { <-future.done }, "the later stream's events")
	for _, sub := range []*pipeline.Subscription{sub, fsub} {
		if err := sub.Close(); err != nil { // and the handlers are done with got
			t.Fatal(err)
		}
	}
	var revs []uint64
	for _, e := range c.got {
		if e.Stream != "s" {
			t.Errorf("event of stream %q delivered", e.Stream)
		}
		revs = append(revs, e.Revision)
	}
	if diff := cmp.Diff([]uint64{2, 3, 4, 5, 6}, revs); diff != "" {
		t.Errorf("revisions (-want +got):\n%s", diff)
	}
	if future.got[0].Stream != "later" || future.got[0].Revision != 0 || future.got[1].Revision != 1 {
		t.Errorf("later stream's deliveries = %+v, want its revisions 0 and 1", future.got)
	}
}

// TestSubscribeEnds: a subscription ends with its handler's error, cleanly (nil) when
// ctx ends, and with ErrClosed when the database closes; bad arguments are refused.
func TestSubscribeEnds(t *testing.T) {
	db, es, _ := openStore(t, pipeline.Config{})
	seedStream(t, es, "s", 2)
	boom := errors.New("boom")
	sub, err := es.SubscribeToAll(ctx, 0, func(eventstore.RecordedEvent) error { return boom }, eventstore.SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Wait(); !errors.Is(err, boom) {
		t.Errorf("Wait = %v, want the handler's error", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	sub, err = es.SubscribeToStream(cctx, "s", 0, func(eventstore.RecordedEvent) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := sub.Wait(); err != nil {
		t.Errorf("Wait after cancel = %v, want nil (a clean end, as pipeline.Subscription has it)", err)
	}
	_, err = es.SubscribeToAll(ctx, 0, nil, eventstore.SubscribeOptions{})
	wantArgumentError(t, "SubscribeToAll nil handler", err, "handler")
	_, err = es.SubscribeToAll(ctx, 0, func(eventstore.RecordedEvent) error { return nil }, eventstore.SubscribeOptions{CheckpointEvery: -1})
	wantArgumentError(t, "SubscribeToAll CheckpointEvery -1", err, "CheckpointEvery")
	_, err = es.SubscribeToStream(ctx, "", 0, func(eventstore.RecordedEvent) error { return nil })
	wantArgumentError(t, "SubscribeToStream empty stream", err, "stream")
	live, err := es.SubscribeToAll(ctx, 0, func(eventstore.RecordedEvent) error { return nil }, eventstore.SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := live.Wait(); !errors.Is(err, pipeline.ErrClosed) {
		t.Errorf("Wait after the database closed = %v, want ErrClosed", err)
	}
}

// TestSubscribeCheckpointError: a Checkpoint error ends the subscription with that
// error, and Position still counts the entry whose events were all handled before the
// checkpoint failed, so subscribing again after Position hands none of them out twice.
func TestSubscribeCheckpointError(t *testing.T) {
	_, es, _ := openStore(t, pipeline.Config{})
	var pos []uint64
	for i := range 3 {
		res, err := es.Append(ctx, "s", eventstore.Any, eventstore.Event{Type: "t", Data: []byte(fmt.Sprint(i))})
		if err != nil {
			t.Fatal(err)
		}
		pos = append(pos, res.Position)
	}
	failAt := pos[1]
	refused := errors.New("checkpoint store refused")
	var handled []uint64
	sub, err := es.SubscribeToAll(ctx, 0, func(e eventstore.RecordedEvent) error {
		handled = append(handled, e.Position)
		return nil
	}, eventstore.SubscribeOptions{Filter: eventstore.Filter{TypePrefix: "t"}, CheckpointEvery: 1, Checkpoint: func(p uint64) error {
		if p == failAt {
			return refused
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	var werr error
	wait(t, func() { werr = sub.Wait() }, "the subscription's end")
	if werr != refused {
		t.Errorf("Wait = %v, want the checkpoint's error itself", werr)
	}
	if diff := cmp.Diff(pos[:2], handled); diff != "" {
		t.Errorf("handled before the checkpoint error (-want +got):\n%s", diff)
	}
	if got := sub.Position(); got != failAt {
		t.Fatalf("Position after the checkpoint at %d failed = %d, want %d (its events were all handled)", failAt, got, failAt)
	}
	c := newCollector(1)
	again, err := es.SubscribeToAll(ctx, sub.Position(), c.handle, eventstore.SubscribeOptions{Filter: eventstore.Filter{TypePrefix: "t"}})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	wait(t, func() { <-c.done }, "the event after the failed checkpoint")
	if err := again.Close(); err != nil {
		t.Fatal(err)
	}
	if len(c.got) != 1 || c.got[0].Position != pos[2] {
		t.Errorf("resumed after Position delivered %+v, want only the event at %d", c.got, pos[2])
	}
}
