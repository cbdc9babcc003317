package jetstream_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
	"github.com/rockline/rockline/jetstream"
)

// A timed-out commit is settled by an abort marker carrying the commit marker's
// message ID: a commit that landed is found (its position returned), one that did not
// is fenced out for good, and the abort shows in the log as an empty Aborted entry.
func TestTimeoutResolution(t *testing.T) {
	ctx := ctxT(t)
	p, _ := open(t, 3)
	c := &jetstream.Commit{Writes: []jetstream.Write{{Family: "f", Key: []byte("k"), Value: []byte("v")}}}
	landed, err := p.PublishWithIDForTest(ctx, "batch-landed", c)
	if err != nil {
		t.Fatal(err)
	}
	if pos, err := p.ResolveForTest(ctx, "batch-landed"); err != nil || pos != landed {
		t.Fatalf("resolving a landed commit: %d %v, want %d", pos, err, landed)
	}
	// Resolving again is idempotent: the abort is a duplicate each time.
	if pos, err := p.ResolveForTest(ctx, "batch-landed"); err != nil || pos != landed {
		t.Fatalf("resolving it again: %d %v, want %d", pos, err, landed)
	}
	_, err = p.ResolveForTest(ctx, "batch-lost")
	if !errors.Is(err, jetstream.ErrTimeout) {
		t.Fatalf("resolving a commit that never arrived: %v, want ErrTimeout", err)
	}
	abort, _ := p.Position(ctx)
	// The late arrival of the fenced-out commit is refused whole.
	c2 := &jetstream.Commit{Writes: []jetstream.Write{{Family: "f", Key: []byte("late"), Value: []byte("v")}}}
	if _, err := p.PublishWithIDForTest(ctx, "batch-lost", c2); err == nil {
		t.Fatal("a commit fenced out by its abort marker landed")
	}
	if _, ok, _ := p.Get(ctx, "f", []byte("late"), abort); ok {
		t.Fatal("the fenced-out commit wrote")
	}
	next, err := p.Commit(ctx, c2)
	if err != nil {
		t.Fatal(err)
	}
	es := collect(t, p, 0, 2)
	if len(es) != 3 || es[0].Position != landed || es[0].Aborted || !es[1].Aborted || es[1].Position != abort ||
		len(es[1].Writes) != 0 || es[2].Position != next {
		t.Fatalf("log: %+v", es)
	}
}

// A commit that finds no stream leader ("no responders": between leaders, or here the
// stream deleted under the partition) waits for one up to PublishTimeout, then fails
// with ErrTimeout, as nothing of it was stored; it succeeds if a leader appears in
// time.
func TestCommitWithoutLeader(t *testing.T) {
	ctx := ctxT(t)
	_, cfg := open(t, 3)
	cfg.PublishTimeout = 300 * time.Millisecond
	nc := connect(t, 1)
	p := openOn(t, nc, cfg)
	long := cfg
	long.PublishTimeout = 20 * time.Second
	p2 := openOn(t, nc, long) // opened now: Open would create the stream again
	js, err := natsjs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteStream(ctx, cfg.Stream); err != nil {
		t.Fatal(err)
	}
	c := &jetstream.Commit{Writes: []jetstream.Write{{Family: "f", Key: []byte("k"), Value: []byte("v"), Blind: true}}}
	start := time.Now()
	_, err = p.Commit(ctx, c)
	took := time.Since(start)
	if !errors.Is(err, jetstream.ErrTimeout) || !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("commit without a stream: %v, want ErrTimeout wrapping no responders", err)
	}
	if took < cfg.PublishTimeout {
		t.Fatalf("gave up after %v, before PublishTimeout %v", took, cfg.PublishTimeout)
	}
	// A leader that appears within PublishTimeout takes the commit.
	done := make(chan error, 1)
	before := p2.Stats().Retried
	go func() {
		_, err := p2.Commit(ctx, c)
		done <- err
	}()
	for p2.Stats().Retried == before {
		select {
		case err := <-done:
			t.Fatalf("commit ended before meeting the missing stream: %v", err)
		case <-ctx.Done():
			t.Fatal("no retry seen")
		case <-time.After(time.Millisecond):
		}
	}
	openOn(t, connect(t, 0), cfg) // creates the stream again
	if err := <-done; err != nil {
		t.Fatalf("commit once the stream is back: %v", err)
	}
}

// The hole an abort marker leaves: a batch still being proposed when the marker
// passes the dedupe check lands just below it. The search below the marker finds the
// batch's commit marker among the commit markers of a window that grows while its
// markers are younger than the batch's first send, also across more than one window
// of other commits, and finds nothing for a batch that never landed.
func TestLandedBelowAbortMarker(t *testing.T) {
	ctx := ctxT(t)
	p, cfg := open(t, 3)
	sent := time.Now()
	landed, err := p.PublishWithIDForTest(ctx, "batch-proposed", &jetstream.Commit{Writes: []jetstream.Write{{Family: "f", Key: []byte("k"), Value: []byte("v"), Blind: true}}})
	if err != nil {
		t.Fatal(err)
	}
	// More commits than the first window holds land between the batch and the marker.
	for i := range 700 {
		if _, err := p.Commit(ctx, &jetstream.Commit{Writes: []jetstream.Write{{Family: "f", Key: fmt.Appendf(nil, "o%d", i), Value: []byte("v"), Blind: true}}}); err != nil {
			t.Fatal(err)
		}
	}
	// The abort marker as it lands when the dedupe check missed the batch: stored,
	// with the batch's ID, on the commit subject.
	js, err := natsjs.New(connect(t, 0))
	if err != nil {
		t.Fatal(err)
	}
	m := nats.NewMsg(cfg.Subject + ".c")
	m.Header.Set("Rl-Abort", "batch-proposed")
	ack, err := js.PublishMsg(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	for _, after := range []uint64{0, landed - 1} { // bounded by time; by the read position
		pos, found, err := p.LandedBelowForTest(ctx, "batch-proposed", ack.Sequence, sent, after)
		if err != nil || !found || pos != landed {
			t.Fatalf("after %d: search below the marker at %d: %d %v %v; want the batch at %d", after, ack.Sequence, pos, found, err, landed)
		}
		if _, found, err := p.LandedBelowForTest(ctx, "batch-never", ack.Sequence, sent, after); err != nil || found {
			t.Fatalf("after %d: search for a batch that never landed: found %v, %v", after, found, err)
		}
	}
	// A read position above the batch excludes it: the search reads only above it.
	if _, found, err := p.LandedBelowForTest(ctx, "batch-proposed", ack.Sequence, sent, landed); err != nil || found {
		t.Fatalf("search above the batch's own position: found %v, %v", found, err)
	}
}

// An abort marker whose answer was lost but which was stored (a request that timed
// out, flushed by the client library once its connection came back) makes the next
// abort of the same batch a duplicate of it. That duplicate names the earlier abort
// marker, not the batch's commit marker: the batch was fenced out there and never
// landed, so resolving it must fail with ErrTimeout, never acknowledge the commit at
// the abort marker's position.
func TestResolveAfterAnEarlierAbortLanded(t *testing.T) {
	ctx := ctxT(t)
	p, cfg := open(t, 3)
	js, err := natsjs.New(connect(t, 0))
	if err != nil {
		t.Fatal(err)
	}
	// An abort marker of the batch, stored as a lost earlier attempt would be.
	m := nats.NewMsg(cfg.Subject + ".c")
	m.Header.Set("Nats-Msg-Id", "c:batch-fenced")
	m.Header.Set("Rl-Abort", "batch-fenced")
	ack, err := js.PublishMsg(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	earlier := ack.Sequence
	pos, err := p.ResolveForTest(ctx, "batch-fenced")
	if !errors.Is(err, jetstream.ErrTimeout) {
		t.Fatalf("resolving a batch fenced out by an earlier abort marker at %d: position %d, %v; want ErrTimeout", earlier, pos, err)
	}
	if _, err := p.PublishWithIDForTest(ctx, "batch-fenced", &jetstream.Commit{Writes: []jetstream.Write{{Family: "f", Key: []byte("late"), Value: []byte("v"), Blind: true}}}); err == nil {
		t.Fatal("a batch fenced out by its earlier abort marker landed")
	}
}
