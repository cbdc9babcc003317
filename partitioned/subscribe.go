package partitioned

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/pipeline"
)

// Positions is a position per partition: in a Subscription, the last log position of
// each partition whose events have all been handled. A nil or short vector reads as
// zeros for the missing partitions (from the start).
type Positions []uint64

// Event is an event of one partition, as a Subscription hands it out.
type Event struct {
	Partition int
	eventstore.RecordedEvent
}

// SubscribeOptions configure SubscribeToAll.
type SubscribeOptions struct {
	// Filter selects the events handed to the handler (every partition alike).
	Filter eventstore.Filter
	// Checkpoint, when set, is called with the Positions vector every CheckpointEvery
	// log entries handled across partitions, once every event up to each of its
	// positions has been handled: a subscriber that stores it and subscribes again
	// from it after a restart misses nothing and repeats nothing. An error from it
	// ends the subscription. The vector is the callee's.
	Checkpoint func(Positions) error
	// CheckpointEvery is the number of entries between Checkpoint calls (default
	// eventstore.DefaultCheckpointEvery, at least 1).
	CheckpointEvery int
}

// Subscription delivers the events of every partition to one handler.
//
// Invariants:
//   - One pipeline subscription per partition, each on a goroutine it owns; the
//     handler and Checkpoint run under mu, one call at a time, never concurrently.
//   - pos[p] is set to an entry's position after every matching event of that entry
//     was handled (and for entries with none), under mu; so a vector read under mu
//     is always a consistent resume point.
//   - The supervisor goroutine (started by SubscribeToAll) waits for the first
//     partition's subscription to end, cancels the others, waits for all, records the
//     first error and closes done. Close cancels and waits for done.
type Subscription struct {
	mu      sync.Mutex
	pos     Positions
	scanned int
	cancel  context.CancelFunc
	subs    []*pipeline.Subscription
	done    chan struct{}
	err     error
}

// SubscribeToAll hands every event of every partition after the positions in from
// that matches o.Filter to handler, each exactly once: a partition's events in its
// log order, partitions interleaved in no defined order, one handler call at a time.
// It catches up from each partition's log, then follows live. It ends on ctx, Close,
// a partition database's Close, or an error from handler or o.Checkpoint, which Wait
// returns; Positions then says where to resume.
func (s *Store) SubscribeToAll(ctx context.Context, from Positions, handler func(Event) error, o SubscribeOptions) (*Subscription, error) {
	if handler == nil {
		return nil, &pipeline.ArgumentError{Op: "partitioned.SubscribeToAll", Arg: "handler", Reason: "must not be nil"}
	}
	if len(from) > len(s.dbs) {
		return nil, &pipeline.ArgumentError{Op: "partitioned.SubscribeToAll", Arg: "from", Reason: fmt.Sprintf("%d positions for %d partitions", len(from), len(s.dbs))}
	}
	every := o.CheckpointEvery
	switch {
	case every == 0:
		every = eventstore.DefaultCheckpointEvery
	case every < 0:
		return nil, &pipeline.ArgumentError{Op: "partitioned.SubscribeToAll", Arg: "CheckpointEvery", Reason: fmt.Sprintf("%d is negative", every)}
	}
	sub := &Subscription{pos: make(Positions, len(s.dbs)), done: make(chan struct{})}
	copy(sub.pos, from)
	ctx, sub.cancel = context.WithCancel(ctx)
	filter := o.Filter
	for p, db := range s.dbs {
		ps, err := db.Subscribe(ctx, sub.pos[p], func(e pipeline.LogEntry) error {
			sub.mu.Lock()
			defer sub.mu.Unlock()
			for i := range e.Events {
				if ev := &e.Events[i]; filter.Match(ev) {
					if err := handler(Event{Partition: p, RecordedEvent: *ev}); err != nil {
						return err
					}
				}
			}
			sub.pos[p] = e.Position
			if sub.scanned++; o.Checkpoint != nil && sub.scanned%every == 0 {
				return o.Checkpoint(slices.Clone(sub.pos))
			}
			return nil
		})
		if err != nil {
			sub.cancel()
			for _, started := range sub.subs {
				started.Close()
			}
			return nil, fmt.Errorf("partition %d: %w", p, err)
		}
		sub.subs = append(sub.subs, ps)
	}
	go sub.supervise()
	return sub, nil
}

// supervise ends every partition's subscription once one has ended.
func (sub *Subscription) supervise() {
	defer close(sub.done)
	cases := make(chan int, len(sub.subs))
	for i, ps := range sub.subs {
		go func() { <-ps.Done(); cases <- i }() // ends when ps does
	}
	first := <-cases
	sub.cancel()
	errs := []error{sub.subs[first].Wait()}
	for i, ps := range sub.subs {
		if i != first {
			errs = append(errs, ps.Wait())
		}
	}
	for range len(sub.subs) - 1 {
		<-cases
	}
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, pipeline.ErrClosed) {
			sub.err = err
			return
		}
	}
	if errs[0] != nil {
		sub.err = errs[0]
	}
}

// Positions returns the resume vector: every event at or below each partition's
// position has been handled. Call it from outside the handler (the handler runs
// under the lock it takes).
func (sub *Subscription) Positions() Positions {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	return slices.Clone(sub.pos)
}

// Done is closed once every partition's subscription has ended.
func (sub *Subscription) Done() <-chan struct{} { return sub.done }

// Wait waits for the subscription to end and returns why: the first handler,
// Checkpoint or partition error, or the context's error, or ErrClosed.
func (sub *Subscription) Wait() error {
	<-sub.done
	return sub.err
}

// Close ends the subscription and waits for every goroutine it started.
func (sub *Subscription) Close() error {
	sub.cancel()
	<-sub.done
	return nil
}
