package lanes

import (
	"context"
	"errors"
	"testing"
)

func TestOneLaneRunsInSubmitOrder(t *testing.T) {
	const n = 1000
	var got []int // written only by the single lane goroutine
	l, err := newEach(1, 16, func(lane, task int) {
		if lane != 0 {
			t.Errorf("run lane = %d, want 0", lane)
		}
		got = append(got, task)
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		lane, err := l.Submit(context.Background(), i)
		if err != nil || lane != 0 {
			t.Fatalf("Submit(%d) = %d, %v; want 0, nil", i, lane, err)
		}
	}
	l.Close() // happens-after every run, so reading got is safe
	if len(got) != n {
		t.Fatalf("ran %d tasks, want %d", len(got), n)
	}
	for i, v := range got {
		if v != i {
			t.Fatalf("task at position %d is %d: order not preserved", i, v)
		}
	}
}

func TestRoundRobin(t *testing.T) {
	const lanes, perLane = 4, 25
	ranOn := make([]int, lanes*perLane) // task -> lane it ran on
	l, err := newEach(lanes, 8, func(lane, task int) { ranOn[task] = lane })
	if err != nil {
		t.Fatal(err)
	}
	perLaneCount := make([]int, lanes)
	returned := make([]int, lanes*perLane)
	for i := range lanes * perLane {
		lane, err := l.Submit(context.Background(), i)
		if err != nil {
			t.Fatalf("Submit(%d): %v", i, err)
		}
		if lane != i%lanes {
			t.Fatalf("Submit(%d) routed to lane %d, want %d", i, lane, i%lanes)
		}
		returned[i] = lane
		perLaneCount[lane]++
	}
	l.Close()
	for lane, c := range perLaneCount {
		if c != perLane {
			t.Fatalf("lane %d got %d tasks, want %d", lane, c, perLane)
		}
	}
	for i := range returned {
		if ranOn[i] != returned[i] {
			t.Fatalf("task %d ran on lane %d, Submit reported %d", i, ranOn[i], returned[i])
		}
	}
}

func TestSubmitCancelledContextQueuesNothing(t *testing.T) {
	ran := make(chan int, 1)
	l, err := newEach(2, 4, func(_, task int) { ran <- task })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if lane, err := l.Submit(ctx, 1); !errors.Is(err, context.Canceled) || lane != -1 {
		t.Fatalf("Submit = %d, %v; want -1, context.Canceled", lane, err)
	}
	l.Close()
	if len(ran) != 0 {
		t.Fatalf("task ran despite cancelled ctx")
	}
}

func TestBackpressureCancel(t *testing.T) {
	g := newGatedRunner()
	l, err := newEach(1, 1, g.run)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()

	// Task 0 is taken by the runner, which then blocks; task 1 fills the queue.
	if _, err := l.Submit(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if got := recv(t, g.started, "runner to take task 0"); got != 0 {
		t.Fatalf("runner started task %d, want 0", got)
	}
	if _, err := l.Submit(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if d := l.QueueDepth(0); d != 1 {
		t.Fatalf("QueueDepth(0) = %d, want 1", d)
	}

	// Task 2 must block: the queue is full and the runner is gated.
	cctx, cancel := context.WithCancel(ctx)
	spy := newDoneSpy(cctx)
	res := make(chan result, 1)
	go func() {
		lane, err := l.Submit(spy, 2)
		res <- result{lane, err}
	}()
	recv(t, spy.called, "Submit to wait on ctx")
	notReady(t, res, "blocked Submit returning")
	cancel()
	r := recv(t, res, "cancelled Submit to return")
	if !errors.Is(r.err, context.Canceled) || r.lane != -1 {
		t.Fatalf("Submit = %d, %v; want -1, context.Canceled", r.lane, r.err)
	}

	// Unblock: the queued tasks run, and so does a later submit.
	close(g.gate)
	if _, err := l.Submit(ctx, 3); err != nil {
		t.Fatal(err)
	}
	l.Close()
	for _, task := range []int{0, 1, 3} {
		if c := g.count(task); c != 1 {
			t.Fatalf("task %d ran %d times, want 1", task, c)
		}
	}
	if c := g.count(2); c != 0 {
		t.Fatalf("cancelled task 2 ran %d times", c)
	}
}
