package pipeline

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/rockline/rockline/validators"
)

// sequencer hands out the log's dense positions and publishes them to readers (the
// commit path's visible position: Pebble's visible sequence number, Badger's oracle),
// tracks the read positions of open transactions, and gives a replay or a checkpoint
// the log to itself. The validator reaches it only as its Env.Positions.
//
// Positions complete in order. Every position is assigned by the one goroutine that
// writes at the time, which closes the assignment (Publish, or Stop) before the next
// one is opened: the validators' writer queue has one leader at a time and every
// commit, inline or laned, data or a family's record, and every filler goes through
// it (validators/leader.go); Replay writes only inside Exclusive, when no commit can be
// in flight, one position at a time. So there is at most one open assignment, and
// published moves over it in one step. An assignment that would break that order is
// not absorbed: the sequencer stops with an error (matching validators.ErrStopped),
// never publishing a position that is not written.
//
// Invariants:
//   - published <= assigned, both only grow; positions 1..published are all written to
//     RocksDB (data and log entry, or a filler).
//   - published < assigned only while the assignment published+1..assigned is open
//     (its writer is writing it) or after the sequencer stopped with it open.
//   - Assign opens an assignment only when none is open; Publish advances published
//     only over exactly the open assignment. Anything else stops the sequencer.
//   - Every waiter for position p is woken exactly once, when published >= p or when the
//     sequencer stops.
//   - readers counts open transactions per read position; Acquire reads published under
//     mu, so a pruning Oldest that runs after it sees it.
//   - exclusive is set (under mu) only while readers is empty, and while it is set
//     Acquire fails: a replay, which writes without validation, runs alone.
//   - quiescing is set while a Quiesce runs; Assign waits while it is set, and the
//     Quiesce's function runs only once no assignment is open, so it sees the log
//     dense up to published with nothing in flight.
type sequencer struct {
	published atomic.Uint64 // written under mu, read anywhere

	mu        sync.Mutex
	quiet     sync.Cond // on mu: an assignment closed, a Quiesce ended, or stopped
	assigned  uint64
	waiters   map[uint64]chan struct{}
	changed   chan struct{}
	err       error
	readers   map[uint64]int
	exclusive bool // Exclusive runs
	quiescing bool // Quiesce runs
}

// errOutOfOrder is wrapped, with validators.ErrStopped, by the error that stops the
// sequencer when an assignment would complete out of order.
var errOutOfOrder = errors.New("log positions completed out of order")

// newSequencer starts a sequencer whose positions 1..last are already published.
func newSequencer(last uint64) *sequencer {
	s := &sequencer{
		waiters:  make(map[uint64]chan struct{}),
		changed:  make(chan struct{}),
		readers:  make(map[uint64]int),
		assigned: last,
	}
	s.quiet.L = &s.mu
	s.published.Store(last)
	return s
}

// Published returns the highest position p such that every position up to p is
// written and visible (validators.Positions). Any goroutine.
func (s *sequencer) Published() uint64 { return s.published.Load() }

// Assign opens the assignment of the n positions after the last one assigned and
// returns the first (validators.Positions). It waits while a Quiesce runs. It fails
// with the stop error once the sequencer stopped, and stops it when an assignment is
// still open (two writers at once) or n < 1.
func (s *sequencer) Assign(n int) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.quiescing && s.err == nil {
		s.quiet.Wait()
	}
	if s.err != nil {
		return 0, s.err
	}
	pub := s.published.Load()
	switch {
	case s.assigned != pub:
		return 0, s.stopLocked(fmt.Errorf("%w: %w: assigning %d positions while %d..%d are being written", validators.ErrStopped, errOutOfOrder, n, pub+1, s.assigned))
	case n < 1:
		return 0, s.stopLocked(fmt.Errorf("%w: assigning %d positions", validators.ErrStopped, n))
	}
	s.assigned += uint64(n)
	return pub + 1, nil
}

// Publish closes the open assignment first..last, now written, and makes it visible:
// published becomes last and its waiters wake (validators.Positions). It returns the
// stop error once the sequencer stopped, and stops it when first..last is not exactly
// the open assignment.
func (s *sequencer) Publish(first, last uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	pub := s.published.Load()
	if first != pub+1 || last != s.assigned || last < first {
		return s.stopLocked(fmt.Errorf("%w: %w: %d..%d completed while %d..%d are open", validators.ErrStopped, errOutOfOrder, first, last, pub+1, s.assigned))
	}
	s.published.Store(last)
	if len(s.waiters) > 0 {
		for p := first; p <= last; p++ {
			if ch, ok := s.waiters[p]; ok {
				close(ch)
				delete(s.waiters, p)
			}
		}
	}
	close(s.changed)
	s.changed = make(chan struct{})
	if s.quiescing {
		s.quiet.Broadcast()
	}
	return nil
}

// Stop records that position pos, of the open assignment, can be neither written nor
// filled (validators.Positions): every waiter wakes, and Err, Wait and every later
// Assign return an error matching validators.ErrStopped that wraps cause.
func (s *sequencer) Stop(pos uint64, cause error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked(fmt.Errorf("%w: position %d could not be written or filled: %w", validators.ErrStopped, pos, cause))
}

// stopLocked stops the sequencer with err unless it is stopped already, wakes every
// waiter, and returns the error it is stopped with.
func (s *sequencer) stopLocked(err error) error {
	if s.err != nil {
		return s.err
	}
	s.err = err
	for q, ch := range s.waiters {
		close(ch)
		delete(s.waiters, q)
	}
	close(s.changed)
	s.changed = make(chan struct{})
	s.quiet.Broadcast()
	return err
}

// Wait blocks until position p is published, or returns the stop error. It does not
// take a context: it is called for positions already assigned, whose writer will
// publish them or stop the sequencer.
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

// Err returns the error, matching validators.ErrStopped, that stopped the sequencer,
// or nil (validators.Positions).
func (s *sequencer) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Quiesce runs fn while no position is being assigned or written: it waits until the
// open assignment, if any, is published, and holds new assignments back (after
// validation, their commits holding their locks) until fn returns. fn receives the
// published position, which is then every assigned one, so it sees the log dense
// through it. It fails with the stop error once the sequencer stopped. It is how a
// checkpoint gets a dense log.
func (s *sequencer) Quiesce(fn func(published uint64) error) error {
	s.mu.Lock()
	for s.quiescing && s.err == nil {
		s.quiet.Wait() // another Quiesce
	}
	if s.err != nil {
		s.mu.Unlock()
		return s.err
	}
	s.quiescing = true
	defer func() {
		s.mu.Lock()
		s.quiescing = false
		s.quiet.Broadcast()
		s.mu.Unlock()
	}()
	for s.assigned != s.published.Load() && s.err == nil {
		s.quiet.Wait()
	}
	err, pub := s.err, s.published.Load()
	s.mu.Unlock()
	if err != nil {
		return err
	}
	return fn(pub)
}
