package lanes

import (
	"context"
	"slices"
	"testing"
)

// A batched lane hands the runner what is queued behind the task it takes, in order,
// never more than maxBatch, and never waits to fill a batch.
func TestBatchedRunsQueuedTasksTogether(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var batches [][]int
	first := true
	l, err := NewBatched(1, 16, 3, func(_ int, tasks []int) {
		if first {
			first = false
			close(entered)
			<-release
		}
		batches = append(batches, slices.Clone(tasks))
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := l.Submit(ctx, 0); err != nil {
		t.Fatal(err)
	}
	recv(t, entered, "the runner to take task 0")
	for i := 1; i <= 7; i++ { // queued while the runner is busy
		if _, err := l.Submit(ctx, i); err != nil {
			t.Fatal(err)
		}
	}
	close(release)
	l.Close()
	want := [][]int{{0}, {1, 2, 3}, {4, 5, 6}, {7}}
	if !slices.EqualFunc(batches, want, slices.Equal[[]int]) {
		t.Fatalf("batches %v; want %v", batches, want)
	}
}
