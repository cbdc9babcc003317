package lanes

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

func TestCloseDrains(t *testing.T) {
	const lanes, perLane = 2, 50
	g := newGatedRunner()
	l, err := newEach(lanes, 64, g.run)
	if err != nil {
		t.Fatal(err)
	}
	for i := range lanes * perLane {
		if _, err := l.Submit(context.Background(), i); err != nil {
			t.Fatalf("Submit(%d): %v", i, err)
		}
	}
	for range lanes {
		recv(t, g.started, "each runner to take a task")
	}
	for lane := range lanes {
		if d := l.QueueDepth(lane); d != perLane-1 {
			t.Fatalf("QueueDepth(%d) = %d, want %d", lane, d, perLane-1)
		}
	}

	closed := make(chan struct{})
	go func() { l.Close(); close(closed) }()
	notReady(t, closed, "Close returning while runners are blocked")
	close(g.gate)
	recv(t, closed, "Close to return")

	for i := range lanes * perLane {
		if c := g.count(i); c != 1 {
			t.Fatalf("task %d ran %d times before Close returned, want 1", i, c)
		}
	}
	if lane, err := l.Submit(context.Background(), -1); !errors.Is(err, ErrClosed) || lane != -1 {
		t.Fatalf("Submit after Close = %d, %v; want -1, ErrClosed", lane, err)
	}
	l.Close() // idempotent
}

func TestCloseRacingSubmits(t *testing.T) {
	const workers, perWorker = 8, 500
	var ran [workers * perWorker]atomic.Int32
	l, err := newEach(4, 8, func(_, task int) { ran[task].Add(1) })
	if err != nil {
		t.Fatal(err)
	}

	var errs [workers * perWorker]error
	var submitted atomic.Int32
	halfway := make(chan struct{})
	var halfOnce sync.Once
	start := make(chan struct{})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			<-start
			for i := range perWorker {
				id := w*perWorker + i
				_, errs[id] = l.Submit(context.Background(), id)
				if submitted.Add(1) == workers*perWorker/2 {
					halfOnce.Do(func() { close(halfway) })
				}
			}
		})
	}
	var closers sync.WaitGroup
	for range 2 {
		closers.Go(func() {
			<-halfway
			l.Close()
		})
	}
	close(start)
	wg.Wait()
	closers.Wait()

	var ok, refused int
	for id, err := range errs {
		n := ran[id].Load()
		switch {
		case err == nil:
			ok++
			if n != 1 {
				t.Fatalf("task %d accepted but ran %d times", id, n)
			}
		case errors.Is(err, ErrClosed):
			refused++
			if n != 0 {
				t.Fatalf("task %d refused but ran %d times", id, n)
			}
		default:
			t.Fatalf("task %d: unexpected error %v", id, err)
		}
	}
	if ok < workers*perWorker/2 {
		t.Fatalf("only %d tasks accepted before Close; want at least %d", ok, workers*perWorker/2)
	}
	t.Logf("accepted %d, refused %d", ok, refused)
}

// fillBlocked builds a 1-lane, depth-1 Lanes whose runner is gated on task 0,
// whose queue holds task 1, and a Submit of task 2 that is blocked on the
// full queue. It returns the lanes, the runner and the blocked Submit's result.
func fillBlocked(t *testing.T) (*Lanes[int], *gatedRunner, <-chan result) {
	t.Helper()
	g := newGatedRunner()
	l, err := newEach(1, 1, g.run)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Submit(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	recv(t, g.started, "runner to take task 0")
	if _, err := l.Submit(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	spy := newDoneSpy(context.Background())
	res := make(chan result, 1)
	go func() {
		lane, err := l.Submit(spy, 2)
		res <- result{lane, err}
	}()
	recv(t, spy.called, "Submit to block on the full queue")
	notReady(t, res, "Submit on a full queue returning")
	return l, g, res
}

func TestCloseWakesBlockedSubmit(t *testing.T) {
	t.Run("runner still blocked", func(t *testing.T) {
		l, g, res := fillBlocked(t)
		closed := make(chan struct{})
		go func() { l.Close(); close(closed) }()
		// The queue cannot drain while the runner is gated, so the only way
		// out for the blocked Submit is ErrClosed.
		r := recv(t, res, "blocked Submit to return after Close")
		if !errors.Is(r.err, ErrClosed) || r.lane != -1 {
			t.Fatalf("blocked Submit = %d, %v; want -1, ErrClosed", r.lane, r.err)
		}
		notReady(t, closed, "Close returning before the drain")
		close(g.gate)
		recv(t, closed, "Close to return")
		if g.count(0) != 1 || g.count(1) != 1 || g.count(2) != 0 {
			t.Fatalf("runs = %v; want tasks 0 and 1 once, task 2 never", g.ran)
		}
	})
	t.Run("runner unblocked concurrently", func(t *testing.T) {
		l, g, res := fillBlocked(t)
		closed := make(chan struct{})
		go func() { l.Close(); close(closed) }()
		close(g.gate)
		r := recv(t, res, "blocked Submit to return")
		recv(t, closed, "Close to return")
		switch {
		case r.err == nil:
			if g.count(2) != 1 {
				t.Fatalf("task 2 accepted but ran %d times", g.count(2))
			}
		case errors.Is(r.err, ErrClosed):
			if g.count(2) != 0 {
				t.Fatalf("task 2 refused but ran %d times", g.count(2))
			}
		default:
			t.Fatalf("blocked Submit: unexpected error %v", r.err)
		}
		if g.count(0) != 1 || g.count(1) != 1 {
			t.Fatalf("queued tasks did not all run: %v", g.ran)
		}
	})
}
