package history

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/rockline/rockline/pipeline"
)

// Follower is a subscriber from position 0 that runs through a history and records
// what it delivered. When its subscription ends with an error (its node was killed or
// cut off), it subscribes again after the last entry it delivered, as a client does,
// and counts the restart; the deliveries must still be the log, each once, in order.
type Follower struct {
	db  *pipeline.DB
	sub int

	mu       sync.Mutex
	seen     []Seen
	restarts []string
	cur      *pipeline.Subscription
	stop     chan struct{}
	done     chan struct{}
}

// Follow starts a Follower on db; sub numbers it in its Seen records. onSeen, when
// not nil, is called with each delivery (a child process reports them this way).
func Follow(db *pipeline.DB, sub int, onSeen func(Seen)) *Follower {
	f := &Follower{db: db, sub: sub, stop: make(chan struct{}), done: make(chan struct{})}
	go f.run(onSeen) // ends with Close
	return f
}

func (f *Follower) run(onSeen func(Seen)) {
	defer close(f.done)
	var after uint64
	for {
		s, err := f.db.Subscribe(context.Background(), after, func(e pipeline.LogEntry) error {
			se := SeenOf(f.sub, e)
			f.mu.Lock()
			f.seen = append(f.seen, se)
			f.mu.Unlock()
			if onSeen != nil {
				onSeen(se)
			}
			return nil
		})
		if err == nil {
			f.mu.Lock()
			f.cur = s
			f.mu.Unlock()
			select {
			case <-f.stop:
				_ = s.Close()
				return
			case <-s.Done():
				err = s.Wait()
			}
			after = s.Position()
		}
		f.mu.Lock()
		f.restarts = append(f.restarts, fmt.Sprintf("after %d: %v", after, err))
		f.mu.Unlock()
		retry := time.NewTimer(100 * time.Millisecond)
		select {
		case <-f.stop:
			retry.Stop()
			return
		case <-retry.C:
		}
	}
}

// Position is the last position delivered.
func (f *Follower) Position() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n := len(f.seen); n > 0 {
		return f.seen[n-1].Pos
	}
	return 0
}

// WaitFor waits until the follower has delivered pos (polling every 10 ms), or ctx ends.
func (f *Follower) WaitFor(ctx context.Context, pos uint64) error {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for f.Position() < pos {
		select {
		case <-ctx.Done():
			return fmt.Errorf("history: the subscriber is at %d, want %d: %w (restarts: %v)", f.Position(), pos, ctx.Err(), f.Restarts())
		case <-tick.C:
		}
	}
	return nil
}

// Seen returns the deliveries so far.
func (f *Follower) Seen() []Seen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Seen(nil), f.seen...)
}

// Restarts returns why the subscription had to be made again, each time.
func (f *Follower) Restarts() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.restarts...)
}

// Close ends the follower and waits for it.
func (f *Follower) Close() {
	close(f.stop)
	<-f.done
}
