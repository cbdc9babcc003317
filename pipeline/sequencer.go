package pipeline

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/rockline/rockline/validators"
)

// sequencer hands out dense log positions and publishes them in order, and tracks the
// read positions of open transactions.
//
// Invariants:
//   - assigned >= published; positions 1..published are all written to RocksDB (data
//     and log entry, or a filler) and every position in published+1..assigned is either
//     in done or still being written by the goroutine that was assigned it.
//   - published only grows, one position at a time, and only over done positions.
//   - Every waiter for position p is woken exactly once, when published >= p or when the
//     sequencer stops.
//   - readers counts open transactions per read position; Acquire reads published under
//     mu, so a pruning Oldest that runs after it sees it.
//   - exclusive is set (under mu) only while readers is empty, and while it is set
//     Acquire fails: a replay, which writes without validation, runs alone.
type sequencer struct {
	assigned  atomic.Uint64
	published atomic.Uint64
	// pause is held for reading by a validator from the moment it assigns positions
	// until they are written (or filled), and for writing by Quiesce.
	pause sync.RWMutex

	mu      sync.Mutex
	done    map[uint64]struct{}
	waiters map[uint64]chan struct{}
	changed chan struct{}
	err     error
	readers map[uint64]int
	// exclusive is true while Exclusive runs.
	exclusive bool
}

// newSequencer starts a sequencer whose positions 1..last are already published.
func newSequencer(last uint64) *sequencer {
	s := &sequencer{
		done:    make(map[uint64]struct{}),
		waiters: make(map[uint64]chan struct{}),
		changed: make(chan struct{}),
		readers: make(map[uint64]int),
	}
	s.assigned.Store(last)
	s.published.Store(last)
	return s
}

// Published returns the highest position p such that every position up to p is
// written and visible.
func (s *sequencer) Published() uint64 { return s.published.Load() }

// Assigned returns the highest position handed out.
func (s *sequencer) Assigned() uint64 { return s.assigned.Load() }

// next assigns n consecutive positions and returns the first. The caller must mark
// each of them done.
func (s *sequencer) next(n int) uint64 { return s.assigned.Add(uint64(n)) - uint64(n) + 1 }

// Assign assigns n consecutive positions and returns the first (Positions.Assign). It
// holds pause for reading until Publish or Stop closes the assignment, so a Quiesce
// sees the positions written or not assigned.
func (s *sequencer) Assign(n int) (uint64, error) {
	s.pause.RLock()
	if err := s.Err(); err != nil {
		s.pause.RUnlock()
		return 0, err
	}
	return s.next(n), nil
}

// Publish marks first..last written (Positions.Publish) and ends their assignment.
func (s *sequencer) Publish(first, last uint64) error {
	s.markDone(first, last)
	s.pause.RUnlock()
	return nil
}

// Stop stops the sequencer at pos (Positions.Stop) and ends the assignment.
func (s *sequencer) Stop(pos uint64, cause error) {
	s.stop(pos, cause)
	s.pause.RUnlock()
}

// markDone marks positions first..last written and publishes what is now contiguous.
func (s *sequencer) markDone(first, last uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for p := first; p <= last; p++ {
		s.done[p] = struct{}{}
	}
	pub := s.published.Load()
	old := pub
	for {
		if _, ok := s.done[pub+1]; !ok {
			break
		}
		delete(s.done, pub+1)
		pub++
		if ch, ok := s.waiters[pub]; ok {
			close(ch)
			delete(s.waiters, pub)
		}
	}
	if pub != old {
		s.published.Store(pub)
		close(s.changed)
		s.changed = make(chan struct{})
	}
}

// Wait blocks until position p is published, or returns the stop error. It does not
// take a context: the position's commit is already written, and the positions below
// it are being written by goroutines that will finish or stop the sequencer.
func (s *sequencer) Wait(p uint64) error {
	if s.published.Load() >= p {
		return nil
	}
	s.mu.Lock()
	if s.published.Load() >= p {
		s.mu.Unlock()
		return nil
	}
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		return err
	}
	ch, ok := s.waiters[p]
	if !ok {
		ch = make(chan struct{})
		s.waiters[p] = ch
	}
	s.mu.Unlock()
	<-ch
	if s.published.Load() >= p {
		return nil
	}
	return s.Err()
}

// Changed returns a channel that is closed the next time the published position
// advances (or the sequencer stops). Subscribers use it to follow the log.
func (s *sequencer) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// Err returns the error that stopped the sequencer, or nil.
func (s *sequencer) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// stop records that position p can never be written, wakes every waiter and fails
// every later commit with an error matching validators.ErrStopped.
func (s *sequencer) stop(p uint64, cause error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return
	}
	s.err = fmt.Errorf("%w: position %d could not be written or filled: %w", validators.ErrStopped, p, cause)
	for q, ch := range s.waiters {
		close(ch)
		delete(s.waiters, q)
	}
	close(s.changed)
	s.changed = make(chan struct{})
}

// Acquire registers an open transaction and returns its read position: the published
// position at this moment. Pair it with Release. It fails with ErrReplaying while
// Exclusive runs.
func (s *sequencer) Acquire() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.exclusive {
		return 0, ErrReplaying
	}
	p := s.published.Load()
	s.readers[p]++
	return p, nil
}

// Release ends a transaction registered with Acquire at read position p.
func (s *sequencer) Release(p uint64) {
	s.mu.Lock()
	if n := s.readers[p]; n <= 1 {
		delete(s.readers, p)
	} else {
		s.readers[p] = n - 1
	}
	s.mu.Unlock()
}

// Oldest returns the lowest read position of any open transaction, or the published
// position when none is open. No open or future transaction can have a read position
// below it.
func (s *sequencer) Oldest() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	oldest := s.published.Load()
	for p := range s.readers {
		oldest = min(oldest, p)
	}
	return oldest
}

// OpenTransactions returns the number of transactions registered with Acquire.
func (s *sequencer) OpenTransactions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.readers {
		n += c
	}
	return n
}

// Exclusive runs fn with the database to itself: it fails with ErrNotExclusive if any
// transaction is registered (an open transaction, an in-flight commit) or another
// Exclusive runs, and while fn runs every Acquire fails with ErrReplaying, so no
// position can be assigned except by Replay.
func (s *sequencer) Exclusive(fn func() error) error {
	s.mu.Lock()
	if s.exclusive || len(s.readers) > 0 {
		s.mu.Unlock()
		return ErrNotExclusive
	}
	s.exclusive = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.exclusive = false
		s.mu.Unlock()
	}()
	return fn()
}

// Quiesce runs fn while no position is being assigned or written: every position
// assigned so far is in RocksDB (written or filled), so fn sees a dense log prefix
// 1..assigned, which it receives. New commits wait (after validation, holding their
// locks) until fn returns. It is how a checkpoint gets a dense log.
func (s *sequencer) Quiesce(fn func(assigned uint64) error) error {
	s.pause.Lock()
	defer s.pause.Unlock()
	return fn(s.assigned.Load())
}

// Replay assigns position pos (which must be the next one) to a write that bypasses
// validation, runs write, and publishes pos. It is for restoring a database from a
// log and runs only inside Exclusive. If write fails the sequencer stops, since pos
// can no longer be filled safely.
func (s *sequencer) Replay(pos uint64, write func() error) error {
	s.mu.Lock()
	exclusive := s.exclusive
	s.mu.Unlock()
	if !exclusive {
		return ErrNotExclusive
	}
	s.pause.RLock() // a Quiesce (checkpoint) sees pos written or not assigned
	defer s.pause.RUnlock()
	if err := s.Err(); err != nil {
		return err
	}
	if !s.assigned.CompareAndSwap(pos-1, pos) || s.Published() != pos-1 {
		if s.Assigned() >= pos {
			s.assigned.CompareAndSwap(pos, pos-1)
		}
		return fmt.Errorf("%w: position %d is not next (assigned %d, published %d)", ErrNotExclusive, pos, s.Assigned(), s.Published())
	}
	if err := write(); err != nil {
		s.stop(pos, err)
		return err
	}
	s.markDone(pos, pos)
	return nil
}
