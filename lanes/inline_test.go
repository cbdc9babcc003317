package lanes

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

// TestSubmitOrRunIdleRunsInline: on an idle lane SubmitOrRun reports that it ran the
// task, and the task has run by the time it returns.
func TestSubmitOrRunIdleRunsInline(t *testing.T) {
	var done atomic.Int64 // tasks run
	l, err := newEach(1, 4, func(_ int, _ int) { done.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := range 100 {
		lane, ran, err := l.SubmitOrRun(context.Background(), i)
		if err != nil || lane != 0 || !ran {
			t.Fatalf("SubmitOrRun #%d on an idle lane = %d, %v, %v; want 0, true, nil", i, lane, ran, err)
		}
		if got := done.Load(); got != int64(i+1) {
			t.Fatalf("SubmitOrRun #%d returned with %d tasks run, want %d", i, got, i+1)
		}
	}
}

// TestSubmitOrRunBusyQueues: while the lane runs a task, SubmitOrRun queues behind
// it, and the lane runs both in order.
func TestSubmitOrRunBusyQueues(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var order []string
	l, err := newEach(1, 4, func(_ int, name string) {
		if name == "first" {
			close(entered)
			<-release
		}
		mu.Lock()
		order = append(order, name)
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Submit(context.Background(), "first"); err != nil {
		t.Fatal(err)
	}
	recv(t, entered, "the lane to run the first task")
	lane, ran, err := l.SubmitOrRun(context.Background(), "second")
	if err != nil || lane != 0 || ran {
		t.Fatalf("SubmitOrRun on a busy lane = %d, %v, %v; want 0, false (queued), nil", lane, ran, err)
	}
	close(release)
	l.Close()
	if len(order) != 2 || order[0] != "first" || order[1] != "second" {
		t.Fatalf("ran %v; want [first second]", order)
	}
}

// TestSubmitOrRunKeepsLaneOrder: many goroutines mixing Submit and SubmitOrRun over
// two lanes; every task runs exactly once, never two at once in one lane, and each
// goroutine's tasks on one lane run in the order it submitted them.
func TestSubmitOrRunKeepsLaneOrder(t *testing.T) {
	const lanes, goroutines, perG = 2, 8, 500
	type task struct{ g, seq int }
	var running [lanes]atomic.Int32
	var mu sync.Mutex
	last := map[[2]int]int{} // (lane, goroutine) -> last seq run
	ran := 0
	l, err := NewBatched(lanes, 8, 4, func(lane int, tasks []task) {
		if n := running[lane].Add(1); n != 1 {
			t.Errorf("lane %d runs %d batches at once", lane, n)
		}
		mu.Lock()
		for _, tk := range tasks {
			k := [2]int{lane, tk.g}
			if prev, ok := last[k]; ok && tk.seq <= prev {
				t.Errorf("lane %d ran goroutine %d's task %d after its task %d", lane, tk.g, tk.seq, prev)
			}
			last[k] = tk.seq
			ran++
		}
		mu.Unlock()
		running[lane].Add(-1)
	})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for seq := range perG {
				var err error
				if (g+seq)%3 == 0 {
					_, err = l.Submit(context.Background(), task{g, seq})
				} else {
					_, _, err = l.SubmitOrRun(context.Background(), task{g, seq})
				}
				if err != nil {
					t.Errorf("submit: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	l.Close()
	if ran != goroutines*perG {
		t.Fatalf("ran %d tasks, want %d", ran, goroutines*perG)
	}
}

// TestCloseWaitsForInlineRun: Close returns only after a task running inline has
// finished, and a SubmitOrRun that starts after Close began is refused.
func TestCloseWaitsForInlineRun(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	l, err := newEach(1, 4, func(_ int, block bool) {
		if block {
			close(entered)
			<-release
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	inline := make(chan error, 1)
	go func() {
		_, ran, err := l.SubmitOrRun(context.Background(), true)
		if err == nil && !ran {
			err = errors.New("the task was queued, not run inline")
		}
		inline <- err
	}()
	recv(t, entered, "the inline run to start")
	closed := make(chan struct{})
	go func() { l.Close(); close(closed) }()
	recv(t, l.closing, "Close to begin")
	if _, _, err := l.SubmitOrRun(context.Background(), false); !errors.Is(err, ErrClosed) {
		t.Fatalf("SubmitOrRun after Close began: %v, want ErrClosed", err)
	}
	notReady(t, closed, "Close returning while a task runs inline")
	close(release)
	if err := recv(t, inline, "the inline SubmitOrRun"); err != nil {
		t.Fatal(err)
	}
	recv(t, closed, "Close")
}
