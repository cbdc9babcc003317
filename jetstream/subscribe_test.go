package jetstream_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rockline/rockline/jetstream"
)

// collect subscribes after `after` and returns the entries received until want of
// them that are not abort markers arrived, or fails at the deadline.
func collect(t *testing.T, p *jetstream.Partition, after uint64, want int) []jetstream.Entry {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got := make(chan jetstream.Entry, want+16)
	s, err := p.Subscribe(ctx, after, func(e jetstream.Entry) error {
		got <- e
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []jetstream.Entry
	for n := 0; n < want; {
		select {
		case e := <-got:
			out = append(out, e)
			if !e.Aborted {
				n++
			}
		case <-ctx.Done():
			t.Fatalf("after %d: %d of %d entries by the deadline", after, len(out), want)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}

// Commits from 4 writers, some while a subscription follows; subscriptions from 0 and
// from a middle position each see every commit once, in order, with each entry's
// messages directly after the previous entry's position.
func TestSubscribeSeesEveryCommitOnce(t *testing.T) {
	ctx := ctxT(t)
	p, cfg := open(t, 3)
	const writers, perWriter = 4, 25
	live := make(chan jetstream.Entry, writers*perWriter+8)
	sctx, stop := context.WithCancel(ctx)
	sub, err := p.Subscribe(sctx, 0, func(e jetstream.Entry) error { live <- e; return nil })
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	positions := make(chan uint64, writers*perWriter)
	for w := range writers {
		wg.Go(func() {
			p := openOn(t, connect(t, w%3), cfg)
			for i := range perWriter {
				c := &jetstream.Commit{
					Writes: []jetstream.Write{{Family: "w", Key: fmt.Appendf(nil, "%d/%d", w, i), Value: []byte("v")}},
					Events: []jetstream.Event{ev(fmt.Sprint("s", w), "", "E", fmt.Sprint(i))},
				}
				if i%3 == 0 {
					c.Events = append(c.Events, ev(fmt.Sprint("s", w), "", "E2", ""))
				}
				pos, err := p.Commit(ctx, c)
				if err != nil {
					t.Error(err)
					return
				}
				positions <- pos
			}
		})
	}
	wg.Wait()
	close(positions)
	acked := map[uint64]bool{}
	for pos := range positions {
		acked[pos] = true
	}
	check := func(name string, after uint64, entries []jetstream.Entry) {
		t.Helper()
		prev := after
		for _, e := range entries {
			first := e.Position - uint64(len(e.Writes)+len(e.Events))
			if first != prev+1 {
				t.Fatalf("%s: entry at %d starts at %d, previous ended at %d", name, e.Position, first, prev)
			}
			if !acked[e.Position] {
				t.Fatalf("%s: entry at %d was not acknowledged to any writer", name, e.Position)
			}
			if len(e.Writes) != 1 || len(e.Events) < 1 {
				t.Fatalf("%s: entry at %d has %d writes and %d events", name, e.Position, len(e.Writes), len(e.Events))
			}
			prev = e.Position
		}
	}
	var got []jetstream.Entry
	for len(got) < len(acked) {
		select {
		case e := <-live:
			got = append(got, e)
		case <-ctx.Done():
			t.Fatalf("live subscription: %d of %d entries", len(got), len(acked))
		}
	}
	stop()
	if err := sub.Wait(); err != nil {
		t.Fatal(err)
	}
	check("live from 0", 0, got)
	mid := got[len(got)/2].Position
	check("from 0", 0, collect(t, p, 0, len(acked)))
	check(fmt.Sprint("from ", mid), mid, collect(t, p, mid, len(acked)-len(got)/2-1))
}

func TestSubscriptionEnds(t *testing.T) {
	ctx := ctxT(t)
	p, _ := open(t, 1)
	if _, err := p.Subscribe(ctx, 0, nil); !errors.Is(err, jetstream.ErrInvalidArgument) {
		t.Errorf("nil handler: %v", err)
	}
	// The handler's error ends it.
	boom := errors.New("boom")
	s, err := p.Subscribe(ctx, 0, func(jetstream.Entry) error { return boom })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Commit(ctx, &jetstream.Commit{Writes: []jetstream.Write{{Family: "f", Key: []byte("k")}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Wait(); !errors.Is(err, boom) {
		t.Errorf("handler error: %v", err)
	}
	// Closing the partition ends the rest, and later calls fail.
	s2, err := p.Subscribe(ctx, 1<<40, func(jetstream.Entry) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s2.Done():
	default:
		t.Fatal("a subscription outlived Close")
	}
	if err := s2.Wait(); !errors.Is(err, jetstream.ErrClosed) {
		t.Errorf("after Close: %v, want ErrClosed", err)
	}
	if _, err := p.Commit(ctx, &jetstream.Commit{}); !errors.Is(err, jetstream.ErrClosed) {
		t.Errorf("Commit after Close: %v", err)
	}
}

func TestTruncateAndPurgeFamily(t *testing.T) {
	ctx := ctxT(t)
	p, cfg := open(t, 3)
	var pos []uint64
	for i := range 6 {
		fam := "keep"
		if i%2 == 1 {
			fam = "drop"
		}
		at, err := p.Commit(ctx, &jetstream.Commit{
			Writes: []jetstream.Write{{Family: fam, Key: fmt.Appendf(nil, "k%d", i), Value: []byte("v")}},
			Events: []jetstream.Event{ev("s", "", "E", "")},
		})
		if err != nil {
			t.Fatal(err)
		}
		pos = append(pos, at)
	}
	if err := p.Truncate(ctx, pos[2]); err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.Get(ctx, "keep", []byte("k0"), pos[1]); !errors.Is(err, jetstream.ErrTruncated) {
		t.Errorf("Get below the truncation point: %v", err)
	}
	if _, err := p.Subscribe(ctx, pos[1], func(jetstream.Entry) error { return nil }); !errors.Is(err, jetstream.ErrTruncated) {
		t.Errorf("Subscribe below the truncation point: %v", err)
	}
	// Keys written before the point keep their value.
	if it, ok, err := p.Get(ctx, "keep", []byte("k0"), pos[5]); err != nil || !ok || string(it.Value) != "v" {
		t.Errorf("k0 after truncation: %v %v", ok, err)
	}
	if es := collect(t, p, pos[2], 3); es[0].Position != pos[3] {
		t.Errorf("first entry after the truncation point at %d, want %d", es[0].Position, pos[3])
	}
	// A reopened partition knows the point.
	p2 := openOn(t, connect(t, 2), cfg)
	if _, _, err := p2.Get(ctx, "keep", []byte("k0"), pos[0]); !errors.Is(err, jetstream.ErrTruncated) {
		t.Errorf("reopened, Get below the truncation point: %v", err)
	}
	if err := p.PurgeFamily(ctx, "drop"); err != nil {
		t.Fatal(err)
	}
	if items, err := p.Scan(ctx, "drop", nil, pos[5]); err != nil || len(items) != 0 {
		t.Errorf("purged family scans %d items, %v", len(items), err)
	}
	if items, err := p.Scan(ctx, "keep", nil, pos[5]); err != nil || len(items) != 3 {
		t.Errorf("kept family scans %d items, %v", len(items), err)
	}
	for _, e := range collect(t, p, pos[2], 3) {
		if len(e.Writes) != 0 && e.Writes[0].Family == "drop" {
			t.Errorf("entry at %d still holds a purged write", e.Position)
		}
	}
}
