package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rockline/rockline/pipeline"
)

// collector is a subscription whose handler forwards every entry on a channel and
// whose OnLive callback reports, on another, the number of entries handled so far when
// it is called with true (false is reported as -1).
type collector struct {
	name    string
	after   uint64
	sub     *pipeline.Subscription
	cancel  context.CancelFunc
	entries chan pipeline.LogEntry
	live    chan int
}

// subscribe starts a collector. Its channels hold capacity entries without blocking the
// handler.
func subscribe(t *testing.T, db *pipeline.DB, name string, after uint64, capacity int) *collector {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c := &collector{name: name, after: after, cancel: cancel, entries: make(chan pipeline.LogEntry, capacity), live: make(chan int, 16)}
	handled := 0
	sub, err := db.Subscribe(ctx, after, func(e pipeline.LogEntry) error {
		c.entries <- e
		handled++
		return nil
	}, pipeline.OnLive(func(live bool) {
		if live {
			c.live <- handled
		} else {
			c.live <- -1
		}
	}))
	if err != nil {
		cancel()
		t.Fatalf("Subscribe(%s): %v", name, err)
	}
	c.sub = sub
	t.Cleanup(func() {
		cancel()
		<-sub.Done()
	})
	return c
}

// expect receives entries until position last and checks they are exactly want, in
// order.
func (c *collector) expect(t *testing.T, want []pipeline.LogEntry) {
	t.Helper()
	got := make([]pipeline.LogEntry, 0, len(want))
	for range want {
		got = append(got, recv(t, c.entries, c.name+" entries"))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("%s (after %d) received (-want +got):\n%s", c.name, c.after, diff)
	}
}

// subLoad commits n entries per writer from writers goroutines, each either a write or
// events only, through Commit or CommitInline. It closes halfway when the first writer
// is half done. No commit can conflict.
func subLoad(t *testing.T, db *pipeline.DB, writers, n int, halfway chan<- struct{}) *sync.WaitGroup {
	t.Helper()
	var once sync.Once
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range n {
				if i == n/2 {
					once.Do(func() { close(halfway) })
				}
				tx := db.Begin()
				var err error
				if i%3 == 0 {
					err = tx.AddEvents(pipeline.Event{ID: fmt.Sprintf("%d/%d", w, i), Type: "load"})
				} else {
					err = tx.Put(db.Default(), key("w%d/%d", w, i), []byte("v"))
				}
				if err == nil {
					err = commitModes[(w+i)%2].commit(tx)
				}
				if err != nil {
					t.Errorf("writer %d commit %d: %v", w, i, err)
					return
				}
			}
		})
	}
	return &wg
}

// TestSubscribeDelivery: subscriptions started before, during and after a concurrent
// load, from position 0 and from a later position, each receive every entry above their
// start exactly once, in order, equal to what ReadLog returns, and report OnLive(true).
// A subscriber whose handler blocks does not hold the writers up: they all finish while
// it is still blocked on the first entry, and it then receives everything too.
// Cancelling a subscription's context ends it with Wait() == nil.
func TestSubscribeDelivery(t *testing.T) {
	const writers, perWriter = 4, 50
	const total = writers * perWriter
	for _, pol := range policies {
		t.Run(pol, func(t *testing.T) {
			db, _ := openDB(t, pipeline.Config{Validation: pol, Lanes: 4})
			release := make(chan struct{})
			var releaseOnce sync.Once
			unblock := func() { releaseOnce.Do(func() { close(release) }) }
			t.Cleanup(unblock) // runs before the database closes

			var subs []*collector
			subs = append(subs, subscribe(t, db, "before", 0, total))

			slowEntered := make(chan struct{})
			slowEntries := make(chan pipeline.LogEntry, total)
			slowCtx, slowCancel := context.WithCancel(context.Background())
			defer slowCancel()
			first := true
			slow, err := db.Subscribe(slowCtx, 0, func(e pipeline.LogEntry) error {
				if first {
					first = false
					close(slowEntered)
					<-release
				}
				slowEntries <- e
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}

			halfway := make(chan struct{})
			wg := subLoad(t, db, writers, perWriter, halfway)
			recv(t, halfway, "the load to be half done")
			k := db.LastPosition()
			subs = append(subs, subscribe(t, db, "during/0", 0, total), subscribe(t, db, fmt.Sprintf("during/%d", k), k, total))
			recv(t, slowEntered, "the slow handler to get its first entry")
			wait(t, wg.Wait, "writers (a blocked subscriber must not hold them up)")
			if t.Failed() {
				t.FailNow()
			}
			// The writers are done; the slow handler has not returned from entry 1.
			if got := slow.Position(); got != 0 {
				t.Fatalf("slow subscription at position %d while its handler is blocked", got)
			}
			n := db.LastPosition()
			if n != total {
				t.Fatalf("LastPosition = %d, want %d", n, total)
			}
			log := wholeLog(t, db)
			subs = append(subs, subscribe(t, db, "after/0", 0, total), subscribe(t, db, "after/150", 150, total))

			for _, c := range subs {
				c.expect(t, log[c.after:])
				handledAtLive := recv(t, c.live, c.name+" OnLive")
				if handledAtLive < 0 {
					t.Errorf("%s: first OnLive call was false", c.name)
				}
				if strings.HasPrefix(c.name, "after") && handledAtLive != len(log)-int(c.after) {
					t.Errorf("%s: OnLive(true) after %d entries, want all %d published before it started", c.name, handledAtLive, len(log)-int(c.after))
				}
				c.cancel()
				if err := c.sub.Wait(); err != nil {
					t.Errorf("%s: Wait after cancel = %v, want nil", c.name, err)
				}
				if got := c.sub.Position(); got != n {
					t.Errorf("%s: Position = %d, want %d", c.name, got, n)
				}
				if extra := len(c.entries); extra != 0 {
					t.Errorf("%s: %d entries beyond the last position (duplicates)", c.name, extra)
				}
			}

			unblock()
			got := make([]pipeline.LogEntry, 0, n)
			for range n {
				got = append(got, recv(t, slowEntries, "slow subscriber entries"))
			}
			if diff := cmp.Diff(log, got); diff != "" {
				t.Errorf("slow subscriber received (-want +got):\n%s", diff)
			}
			if err := slow.Close(); err != nil {
				t.Errorf("slow subscription Close = %v, want nil", err)
			}
			if extra := len(slowEntries); extra != 0 {
				t.Errorf("slow subscriber: %d duplicate entries", extra)
			}
		})
	}
}

// TestSubscribeEnds covers the other ways a subscription ends: the database closing
// (ErrClosed, and Subscribe refuses afterwards), the handler's error (returned as is,
// the failed entry not counted as handled), and a nil handler (*ArgumentError).
func TestSubscribeEnds(t *testing.T) {
	ctx := context.Background()
	t.Run("database closed", func(t *testing.T) {
		db, _ := openDB(t, pipeline.Config{})
		put(t, db, db.Default(), "k", "v")
		c := subscribe(t, db, "live", 0, 10)
		c.expect(t, wholeLog(t, db))
		if live := recv(t, c.live, "OnLive"); live != 1 {
			t.Fatalf("OnLive(true) after %d entries, want 1", live)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-c.sub.Done():
		default:
			t.Fatal("Close returned with the subscription still running")
		}
		if err := c.sub.Wait(); !errors.Is(err, pipeline.ErrClosed) {
			t.Errorf("Wait = %v, want ErrClosed", err)
		}
		if _, err := db.Subscribe(ctx, 0, func(pipeline.LogEntry) error { return nil }); !errors.Is(err, pipeline.ErrClosed) {
			t.Errorf("Subscribe after Close = %v, want ErrClosed", err)
		}
	})
	t.Run("handler error", func(t *testing.T) {
		db, _ := openDB(t, pipeline.Config{})
		for i := range 5 {
			put(t, db, db.Default(), fmt.Sprint(i), "v")
		}
		errStop := errors.New("projection failed")
		var handled []uint64
		sub, err := db.Subscribe(ctx, 1, func(e pipeline.LogEntry) error {
			if e.Position == 4 {
				return fmt.Errorf("at %d: %w", e.Position, errStop)
			}
			handled = append(handled, e.Position)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		wait(t, func() { <-sub.Done() }, "the subscription to end")
		if err := sub.Wait(); !errors.Is(err, errStop) {
			t.Errorf("Wait = %v, want the handler's error", err)
		}
		if diff := cmp.Diff([]uint64{2, 3}, handled); diff != "" {
			t.Errorf("handled (-want +got):\n%s", diff)
		}
		if got := sub.Position(); got != 3 {
			t.Errorf("Position = %d, want 3 (the entry that failed is not handled)", got)
		}
	})
	t.Run("handled error", func(t *testing.T) {
		db, _ := openDB(t, pipeline.Config{})
		for i := range 5 {
			put(t, db, db.Default(), fmt.Sprint(i), "v")
		}
		errCheckpoint := errors.New("checkpoint failed")
		sub, err := db.Subscribe(ctx, 1, func(e pipeline.LogEntry) error {
			if e.Position == 4 {
				return pipeline.Handled(errCheckpoint)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		wait(t, func() { <-sub.Done() }, "the subscription to end")
		if err := sub.Wait(); err != errCheckpoint {
			t.Errorf("Wait = %v, want the marked error itself", err)
		}
		if got := sub.Position(); got != 4 {
			t.Errorf("Position = %d, want 4 (the entry was handled before the error)", got)
		}
		if pipeline.Handled(nil) != nil {
			t.Error("Handled(nil) is not nil")
		}
	})
	t.Run("nil handler", func(t *testing.T) {
		db, _ := openDB(t, pipeline.Config{})
		_, err := db.Subscribe(ctx, 0, nil)
		wantArgumentError(t, "Subscribe", err, "handler")
	})
}

// TestSubscribeResumeAfterRestart: a subscriber stops part-way (its handler fails), the
// database closes and reopens, more is committed, and subscribing again after the
// recorded position continues exactly at the next position: nothing skipped, nothing
// before it repeated.
func TestSubscribeResumeAfterRestart(t *testing.T) {
	ctx := context.Background()
	db, dir := openDB(t, pipeline.Config{})
	for i := range 5 {
		if err := db.Update(ctx, func(tx *pipeline.Txn) error { return tx.AddEvents(pipeline.Event{ID: fmt.Sprint(i), Type: "t"}) }); err != nil {
			t.Fatal(err)
		}
	}
	errCrash := errors.New("consumer crashed")
	sub, err := db.Subscribe(ctx, 0, func(e pipeline.LogEntry) error {
		if e.Position == 4 {
			return errCrash
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Wait(); !errors.Is(err, errCrash) {
		t.Fatalf("Wait = %v", err)
	}
	recorded := sub.Position()
	if recorded != 3 {
		t.Fatalf("recorded position %d, want 3", recorded)
	}
	before := wholeLog(t, db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db = openAt(t, dir, pipeline.Config{})
	for i := 5; i < 7; i++ {
		if err := db.Update(ctx, func(tx *pipeline.Txn) error { return tx.AddEvents(pipeline.Event{ID: fmt.Sprint(i), Type: "t"}) }); err != nil {
			t.Fatal(err)
		}
	}
	all := wholeLog(t, db)
	if diff := cmp.Diff(before, all[:len(before)]); diff != "" {
		t.Fatalf("log changed across the restart (-before +after):\n%s", diff)
	}
	c := subscribe(t, db, "resumed", recorded, 10)
	c.expect(t, all[recorded:])
	if first := all[recorded].Position; first != recorded+1 {
		t.Fatalf("resumed at %d", first)
	}
	recv(t, c.live, "OnLive")
	c.cancel()
	if err := c.sub.Wait(); err != nil {
		t.Errorf("Wait = %v", err)
	}
	if len(c.entries) != 0 {
		t.Errorf("%d entries beyond the end", len(c.entries))
	}
}
