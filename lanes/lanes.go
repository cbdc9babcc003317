package lanes

import (
	"context"
	"sync"
	"sync/atomic"
)

// Lanes is a fixed set of commit lanes, each a bounded FIFO queue drained by
// one goroutine that calls run(lane, task) in queue order. Create it with
// NewBatched; the zero value is not usable. All methods are safe for concurrent use.
//
// Invariants:
//   - queues[i] is sent to only by Submit while holding mu.RLock and only
//     while closed is false; it is closed only by Close while holding
//     mu.Lock. Hence no send on a closed channel can happen.
//   - closing is closed (by Close, once) before Close takes mu.Lock, so any
//     Submit blocked on a full queue while holding mu.RLock wakes up and
//     releases it, and Close cannot deadlock.
//   - Every task that Submit reports as queued (nil error) is in a queue
//     that Close closes only afterwards; the lane goroutine drains a closed
//     queue to empty before exiting, so every accepted task runs exactly once.
//   - wg counts live lane goroutines; Close returns only after it reaches
//     zero, so no goroutine of this package outlives Close.
//   - run is called for lane i only while holding state[i].mu, so never
//     concurrently within a lane. state[i].pending counts the tasks of lane i
//     accepted and not yet run: it is raised before a task is sent and lowered
//     (under mu) after its batch ran. SubmitOrRun runs a task on the caller only
//     when it holds mu and moves pending from 0 to 1, that is when every task
//     the lane accepted before has run; tasks accepted after it queue, and the
//     lane goroutine must take mu before running them. So a lane runs its tasks
//     in the order it accepted them, whoever runs them.
type Lanes[T any] struct {
	run      func(lane int, tasks []T)
	maxBatch int
	queues   []chan T
	state    []laneState[T]
	next     atomic.Uint64 // round-robin counter

	mu        sync.RWMutex // admission gate: Submit RLock, Close Lock
	closed    bool         // guarded by mu
	closing   chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup
}

// laneState serialises the runs of one lane; see the invariants on Lanes.
type laneState[T any] struct {
	mu      sync.Mutex
	pending atomic.Int64
	one     [1]T // the batch of an inline run, reused under mu
}

// NewBatched starts lanes lane goroutines, each with a queue of capacity depth,
// that call run(lane, tasks) with the tasks waiting in the lane: each call gets the
// oldest queued task plus those queued behind it at that moment, up to maxBatch (at
// least 1), in queue order. lanes must be in [MinLanes, MaxLanes], depth in
// [MinDepth, MaxDepth] and run non-nil; otherwise NewBatched returns a *ConfigError
// (matching ErrInvalidConfig) and starts nothing. run is called from the lane
// goroutines only (or, through SubmitOrRun, on a submitter while the lane is idle),
// never concurrently within one lane; it must not call Close on the same Lanes
// (deadlock). The caller must eventually call Close to stop the goroutines. A lane never waits to fill a batch, so
// under light load batches hold one task; under load the runner amortises its work
// (one write for several commits) without adding latency. The slice is reused after
// run returns.
func NewBatched[T any](lanes, depth, maxBatch int, run func(lane int, tasks []T)) (*Lanes[T], error) {
	if err := validate(lanes, depth, run == nil); err != nil {
		return nil, err
	}
	l := &Lanes[T]{
		run:      run,
		maxBatch: max(maxBatch, 1),
		queues:   make([]chan T, lanes),
		state:    make([]laneState[T], lanes),
		closing:  make(chan struct{}),
	}
	for i := range l.queues {
		l.queues[i] = make(chan T, depth)
	}
	l.wg.Add(lanes)
	for i, q := range l.queues {
		go l.drain(i, q)
	}
	return l, nil
}

// drain is the body of lane goroutine i: it runs every task from q in order, in
// batches of what is already queued, and returns once q is closed and empty.
func (l *Lanes[T]) drain(i int, q <-chan T) {
	defer l.wg.Done()
	st := &l.state[i]
	batch := make([]T, 0, l.maxBatch)
	for task := range q {
		st.mu.Lock()
		batch = append(batch[:0], task)
	fill:
		for len(batch) < l.maxBatch {
			select {
			case t, ok := <-q:
				if !ok {
					break fill
				}
				batch = append(batch, t)
			default:
				break fill
			}
		}
		l.run(i, batch)
		st.pending.Add(-int64(len(batch)))
		st.mu.Unlock()
		clear(batch)
	}
}

// Submit queues task on the next lane in round-robin order and returns that
// lane's index. It blocks while the lane's queue is full. It returns:
//   - lane, nil: the task is queued and will be run exactly once, even if
//     Close is called afterwards;
//   - ctx.Err(): ctx was already done or ended while waiting; the task was
//     not queued and will never run;
//   - ErrClosed: Close has begun; the task was not queued and will never run.
//
// On error the returned lane is -1.
func (l *Lanes[T]) Submit(ctx context.Context, task T) (lane int, err error) {
	lane, _, err = l.submit(ctx, task, false)
	return lane, err
}

// SubmitOrRun is Submit that runs the task on the caller's goroutine, as a batch of
// one, when the lane it picks is idle: nothing queued and nothing running. It then
// returns once the task has run, with ran true. Otherwise it queues the task as
// Submit does (ran false). Either way the lane runs its tasks in the order it
// accepted them and never two batches at once; an idle lane just skips the hand-off
// to its goroutine, which is most of the latency of a lightly loaded commit. A task
// run inline counts as accepted: Close waits for it like for a queued one.
func (l *Lanes[T]) SubmitOrRun(ctx context.Context, task T) (lane int, ran bool, err error) {
	return l.submit(ctx, task, true)
}

func (l *Lanes[T]) submit(ctx context.Context, task T, inline bool) (lane int, ran bool, err error) {
	if err := ctx.Err(); err != nil {
		return -1, false, err
	}
	select {
	case <-l.closing:
		return -1, false, ErrClosed
	default:
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return -1, false, ErrClosed
	}
	lane = int((l.next.Add(1) - 1) % uint64(len(l.queues)))
	st := &l.state[lane]
	if inline && st.mu.TryLock() {
		if st.pending.CompareAndSwap(0, 1) {
			st.one[0] = task
			l.run(lane, st.one[:])
			clear(st.one[:])
			st.pending.Add(-1)
			st.mu.Unlock()
			return lane, true, nil
		}
		st.mu.Unlock()
	}
	st.pending.Add(1)
	select {
	case l.queues[lane] <- task:
		return lane, false, nil
	case <-ctx.Done():
		st.pending.Add(-1)
		return -1, false, ctx.Err()
	case <-l.closing:
		st.pending.Add(-1)
		return -1, false, ErrClosed
	}
}

// Close stops admission, lets every lane run the tasks already queued, and
// returns once all lane goroutines have exited. Submit calls that begin after
// Close, or that are blocked on a full queue when Close begins, return
// ErrClosed. Close is idempotent and safe to call from many goroutines; every
// call returns only after the drain has finished. It must not be called from
// within run.
func (l *Lanes[T]) Close() {
	l.closeOnce.Do(func() {
		close(l.closing) // wake blocked senders before taking the write lock
		l.mu.Lock()
		l.closed = true
		for _, q := range l.queues {
			close(q)
		}
		l.mu.Unlock()
	})
	l.wg.Wait()
}

// Len returns the number of lanes.
func (l *Lanes[T]) Len() int { return len(l.queues) }

// QueueDepth returns the number of tasks currently queued (not yet taken by
// the runner) in the given lane. It is a snapshot and may be stale by the
// time it returns. It panics if lane is not in [0, Len()).
func (l *Lanes[T]) QueueDepth(lane int) int { return len(l.queues[lane]) }
