package pipeline

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rockline/rockline/internal/testhooks"
	"github.com/rockline/rockline/storage"
)

// within waits for a value from ch or fails the test after 30s.
func within[V any](t *testing.T, ch <-chan V, what string) V {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// doneSpy is a context that reports (once) that its Done method was called. Commit
// passes its context to the lane's Submit, which calls Done only in the select where
// it waits for room in the queue; with the queue known to be full, a call means the
// commit is blocked there.
type doneSpy struct {
	context.Context
	once   sync.Once
	called chan struct{}
}

func newDoneSpy(parent context.Context) *doneSpy {
	return &doneSpy{Context: parent, called: make(chan struct{})}
}

func (c *doneSpy) Done() <-chan struct{} {
	c.once.Do(func() { close(c.called) })
	return c.Context.Done()
}

// TestBackpressure fills the only lane (depth 1) while its goroutine is held inside a
// Check, then checks that: a further Commit blocks until its context ends and returns
// the context's error; a queued commit whose context ends is skipped with that error;
// a Commit blocked on the full lane when Close begins returns ErrClosed; Close drains
// the lane; and none of the refused commits wrote anything.
func TestBackpressure(t *testing.T) {
	for _, pol := range []string{Parallel, Serial} {
		t.Run(pol, func(t *testing.T) {
			submitted := make(chan int, 8)
			hooks := &testhooks.Hooks{AfterSubmit: func(lane int) { submitted <- lane }}

			entered, release := make(chan struct{}), make(chan struct{})
			hold := func(_ context.Context, c CommitInfo, _ CheckView) error {
				if string(c.Writes[0].Key) == "block" {
					close(entered)
					<-release
				}
				return nil
			}
			dir := filepath.Join(t.TempDir(), "db")
			db, err := Open(dir, testhooks.With(Config{Validation: pol, Lanes: 1, LaneQueueDepth: 1, Checks: []Check{hold}}, hooks))
			if err != nil {
				t.Fatal(err)
			}
			released := false
			defer func() {
				if !released {
					close(release)
				}
				db.Close()
			}()
			commit := func(ctx context.Context, key string) <-chan error {
				tx := db.Begin()
				if err := tx.Put(db.Default(), []byte(key), []byte("v")); err != nil {
					t.Fatal(err)
				}
				out := make(chan error, 1)
				go func() { out <- tx.Commit(ctx) }()
				return out
			}

			first := commit(context.Background(), "block")
			within(t, submitted, "the first commit to be queued")
			within(t, entered, "the lane to run the first commit")

			queuedCtx, cancelQueued := context.WithCancel(context.Background())
			defer cancelQueued()
			second := commit(queuedCtx, "queued")
			within(t, submitted, "the second commit to be queued")
			// The lane is busy and its queue (depth 1) is full.

			blockedCtx, cancelBlocked := context.WithCancel(context.Background())
			spy := newDoneSpy(blockedCtx)
			third := commit(spy, "blocked")
			within(t, spy.called, "the third commit to wait for room")
			select {
			case err := <-third:
				t.Fatalf("third commit returned %v while the lane was full", err)
			default:
			}
			cancelBlocked()
			if err := within(t, third, "the blocked commit"); !errors.Is(err, context.Canceled) {
				t.Fatalf("blocked commit: %v, want context.Canceled", err)
			}

			spy = newDoneSpy(context.Background())
			fourth := commit(spy, "at-close")
			within(t, spy.called, "the fourth commit to wait for room")
			closed := make(chan error, 1)
			go func() { closed <- db.Close() }()
			if err := within(t, fourth, "the commit blocked at Close"); !errors.Is(err, ErrClosed) {
				t.Fatalf("commit blocked at Close: %v, want ErrClosed", err)
			}

			cancelQueued() // the second commit is still queued: it must be skipped
			close(release)
			released = true
			if err := within(t, first, "the first commit"); err != nil {
				t.Fatalf("first commit: %v", err)
			}
			if err := within(t, second, "the queued commit"); !errors.Is(err, context.Canceled) {
				t.Fatalf("queued commit whose context ended: %v, want context.Canceled", err)
			}
			if err := within(t, closed, "Close"); err != nil {
				t.Fatalf("Close: %v", err)
			}

			db, err = Open(dir, Config{Validation: pol})
			if err != nil {
				t.Fatal(err)
			}
			if got := db.LastPosition(); got != 1 {
				t.Errorf("LastPosition = %d, want 1: only the first commit may have landed", got)
			}
			for key, want := range map[string]bool{"block": true, "queued": false, "blocked": false, "at-close": false} {
				tx := db.Begin()
				_, err := tx.Get(db.Default(), []byte(key))
				tx.Discard()
				if got := err == nil; got != want || (err != nil && !errors.Is(err, storage.ErrNotFound)) {
					t.Errorf("%s: Get error %v, want present=%v", key, err, want)
				}
			}
		})
	}
}
