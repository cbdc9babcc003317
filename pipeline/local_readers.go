package pipeline

import "fmt"

// The sequencer's readers: the read positions of open transactions, which bound the
// conflict table's pruning (Oldest), and Exclusive, under which Replay writes without
// validation. See sequencer for the invariants.

// Acquire registers an open transaction and returns its read position: the published
// position at this moment. Pair it with Release. It fails with ErrReplaying while
// Exclusive runs.
func (s *sequencer) Acquire() (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.acquireLocked()
}

func (s *sequencer) acquireLocked() (uint64, error) {
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
	s.releaseLocked(p)
	s.mu.Unlock()
}

func (s *sequencer) releaseLocked(p uint64) {
	if n := s.readers[p]; n <= 1 {
		delete(s.readers, p)
	} else {
		s.readers[p] = n - 1
	}
}

// Oldest returns the lowest read position of any open transaction, or the published
// position when none is open (validators.Positions: the conflict table is pruned up to
// it). No open or future transaction can have a read position below it.
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

// Replay assigns position pos, which must be the next one, to a write that bypasses
// validation, runs write, and publishes pos (with a sync function, after an fsync),
// returning once it is published. It is for restoring a database from a
// log and runs only inside Exclusive, where no commit can be assigned a position. If
// write fails the sequencer stops, since pos can no longer be filled safely.
func (s *sequencer) Replay(pos uint64, write func() error) error {
	s.mu.Lock()
	exclusive, stopped, pub := s.exclusive, s.err, s.published.Load()
	s.mu.Unlock()
	switch {
	case !exclusive:
		return ErrNotExclusive
	case stopped != nil:
		return stopped
	case pos != pub+1:
		return fmt.Errorf("%w: position %d is not next (published %d)", ErrNotExclusive, pos, pub)
	}
	first, err := s.Assign(1) // waits for a Quiesce, so a checkpoint sees pos written or not assigned
	if err != nil {
		return err
	}
	if first != pos { // another writer inside Exclusive
		s.Stop(first, fmt.Errorf("%w: replaying %d, assigned %d", errOutOfOrder, pos, first))
		return s.Err()
	}
	if err := write(); err != nil {
		s.Stop(pos, err)
		return err
	}
	if err := s.Publish(pos, pos); err != nil {
		return err
	}
	return s.Wait(pos) // with a sync function, published once an fsync covers it
}
