package pipeline

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rockline/rockline/storage"
	"github.com/rockline/rockline/validators"
)

// sequencer hands out the log's dense positions and publishes them to readers (the
// commit path's visible position: Pebble's visible sequence number, Badger's oracle),
// tracks the read positions of open transactions, and gives a replay or a checkpoint
// the log to itself. The validator reaches it only as its Env.Positions.
//
// Positions are assigned in order, by the one goroutine that leads the validators'
// writer queue at the time (validators/leader.go): every commit, inline or laned, data
// or a family's record, and every filler goes through it; Replay writes only inside
// Exclusive, when no commit can be in flight, one position at a time. A leader hands
// the queue on once its group's positions are assigned, and writes the group while
// the next leader assigns and writes the next one, so several assignments can be open
// (written at once, RocksDB grouping their writes). They complete in any order but
// count as written only in order: written moves over an assignment once it and every
// earlier one are closed, and a Publish returns only then, so a commit is answered
// only once every position below it is written. A Publish of anything but an open
// assignment is a broken invariant: the sequencer stops with an error (matching
// validators.ErrStopped), never publishing a position that is not written.
//
// With a sync function (Config.Sync: the writer writes without an fsync, and sync is
// storage's SyncWAL), a written position is published only once an fsync that began
// after its write returned has succeeded, so published positions are durable. The
// writer does not wait for it: while one group's fsync runs, the next groups are
// assigned and written (Pebble's commit pipeline keeps its WAL sync in flight the same
// way). There is no syncer goroutine: whoever waits for an unpublished written
// position (Wait, Quiesce, Drain) runs the fsync itself when none is running, covering
// everything written when it starts, then publishes and, if more was written
// meanwhile, wakes one waiter for it to run the next. One worker thus commits with no
// hand-off, and many share each fsync. A sync that follows another may first gather:
// wait, for at most half the last fsync's duration, until as many positions as the
// last one covered are written again (gatherLocked), so that the committers it just
// answered share the next fsync instead of waiting for the one after. A failed fsync
// stops the sequencer with a *SyncError: nothing is published after it.
//
// Invariants:
//   - published <= written <= assigned, all only grow; positions 1..written are all
//     written to RocksDB (data and log entry, or a filler); positions 1..published are
//     written and, with a sync function, durable.
//   - Without a sync function published == written whenever mu is free.
//   - open lists the assignments written+1..assigned in order, each closed (done) or
//     not; its first entry is never done while mu is free (closing it moves written).
//   - written < assigned only while some assignment is open (its writer is writing it)
//     or after the sequencer stopped with one open.
//   - Publish closes exactly one open assignment, and returns only once written
//     covers it (or the sequencer stopped); anything else stops the sequencer.
//   - syncing is true while exactly one goroutine gathers for or runs sync (outside mu,
//     but for the gather's waits on quiet); published
//     moves only to the written value read, under mu, before that sync began, and only
//     if it succeeded and the sequencer is not stopped. Once stopped, published never
//     moves again.
//   - With views (useViews), the current view is replaced only together with
//     published, by the sync whose snapshot it is, taken after that sync read the
//     position it covers and before its fsync: it holds every published position and
//     only durable writes.
//   - When a sync ends with written > published, a waiter for an unpublished written
//     position is woken to run the next one (or, with none registered, the next Wait,
//     Quiesce or Drain runs it), so no written position stays unpublished while
//     anyone waits for it.
//   - Every waiter for position p is woken when published >= p, when the sequencer
//     stops, or to run a sync; a woken waiter re-checks and waits again if needed.
//   - readers counts open transactions per read position; Acquire reads published under
//     mu, so a pruning Oldest that runs after it sees it.
//   - exclusive is set (under mu) only while readers is empty, and while it is set
//     Acquire fails: a replay, which writes without validation, runs alone.
//   - quiescing is set while a Quiesce runs; Assign waits while it is set, and the
//     Quiesce's function runs only once no position is assigned and unpublished, so it
//     sees the log dense up to published with nothing in flight.
type sequencer struct {
	published atomic.Uint64 // written under mu, read anywhere

	mu       sync.Mutex
	quiet    sync.Cond // on mu: an assignment closed, a sync ended, a Quiesce ended, or stopped
	assigned uint64
	written  uint64
	open     []assignment // written+1..assigned, in order (see the invariants)
	sync     func() error // nil: published follows written
	// snapshot, with sync, takes the view installed with each successful sync; view is
	// the current one (see view).
	snapshot func() (*storage.Snapshot, error)
	view     *view
	syncing  bool
	// gathering is set while a sync's runner waits for gatherTarget positions to be
	// written, for at most gatherWindow (gatherLocked); syncing is set meanwhile.
	gathering    bool
	gatherTarget uint64
	gatherWindow time.Duration
	waiters      map[uint64]chan struct{}
	changed      chan struct{}
	err          error
	readers      map[uint64]int
	exclusive    bool // Exclusive runs
	quiescing    bool // Quiesce runs
}

// assignment is one open assignment, first..last, done once its writer published it.
type assignment struct {
	first, last uint64
	done        bool
}

// errOutOfOrder is wrapped, with validators.ErrStopped, by the error that stops the
// sequencer when an assignment would complete out of order.
var errOutOfOrder = errors.New("log positions completed out of order")

// newSequencer starts a sequencer whose positions 1..last are already published.
// With sync non-nil, written positions are published only after sync (which must make
// every write that returned before it durable) has succeeded; see sequencer. Call
// useViews to have it hand out durable views (view.go) with them.
func newSequencer(last uint64, sync func() error) *sequencer {
	s := &sequencer{
		waiters:  make(map[uint64]chan struct{}),
		changed:  make(chan struct{}),
		readers:  make(map[uint64]int),
		assigned: last,
		written:  last,
		sync:     sync,
	}
	s.quiet.L = &s.mu
	s.published.Store(last)
	return s
}

// useViews makes the sequencer take a view with snapshot before every sync and
// install it with the positions the sync publishes, starting with initial (which must
// hold every published position). Call it before any other method.
func (s *sequencer) useViews(snapshot func() (*storage.Snapshot, error), initial *storage.Snapshot) {
	s.snapshot = snapshot
	s.view = &view{snap: initial, refs: 1}
}

// Published returns the highest position p such that every position up to p is
// written and visible, and durable with a sync function (validators.Positions). Any
// goroutine.
func (s *sequencer) Published() uint64 { return s.published.Load() }

// Assign opens the assignment of the n positions after the last one assigned and
// returns the first (validators.Positions). Earlier assignments may still be open. It
// waits while a Quiesce runs. It fails with the stop error once the sequencer
// stopped, and stops it when n < 1.
func (s *sequencer) Assign(n int) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.quiescing && s.err == nil {
		s.quiet.Wait()
	}
	if s.err != nil {
		return 0, s.err
	}
	if n < 1 {
		return 0, s.stopLocked(fmt.Errorf("%w: assigning %d positions", validators.ErrStopped, n))
	}
	first := s.assigned + 1
	s.assigned += uint64(n)
	s.open = append(s.open, assignment{first: first, last: s.assigned})
	return first, nil
}

// Publish closes the open assignment first..last, now written (validators.Positions),
// and returns once every earlier assignment is closed too, so that written covers it.
// Without a sync function it is then visible: published follows written and the
// waiters wake. With one, the positions are published by a later sync (see
// sequencer); the writer does not wait for that. It returns the stop error once the
// sequencer stopped (while it waits, too), and stops it when first..last is not an
// open assignment.
func (s *sequencer) Publish(first, last uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	i := slices.IndexFunc(s.open, func(a assignment) bool { return a.first == first })
	if i < 0 || s.open[i].last != last || s.open[i].done {
		return s.stopLocked(fmt.Errorf("%w: %w: %d..%d completed while %v are open", validators.ErrStopped, errOutOfOrder, first, last, s.open))
	}
	s.open[i].done = true
	if i > 0 {
		for s.written < last && s.err == nil {
			s.quiet.Wait() // an earlier assignment is still being written
		}
		return s.err
	}
	k := 0
	for k < len(s.open) && s.open[k].done {
		s.written = s.open[k].last
		k++
	}
	s.open = s.open[:copy(s.open, s.open[k:])]
	if s.sync == nil {
		s.advanceLocked(s.written)
	}
	if k > 1 || s.quiescing || s.gathering {
		// a later Publish waits for this one; a Quiesce may now run the sync; a
		// gather may be complete
		s.quiet.Broadcast()
	}
	return nil
}

// advanceLocked publishes every position up to to (<= written), waking its waiters.
func (s *sequencer) advanceLocked(to uint64) {
	from := s.published.Load()
	if to <= from {
		return
	}
	s.published.Store(to)
	if len(s.waiters) > 0 {
		if to-from <= uint64(len(s.waiters)) {
			for p := from + 1; p <= to; p++ {
				if ch, ok := s.waiters[p]; ok {
					close(ch)
					delete(s.waiters, p)
				}
			}
		} else {
			for p, ch := range s.waiters {
				if p <= to {
					close(ch)
					delete(s.waiters, p)
				}
			}
		}
	}
	close(s.changed)
	s.changed = make(chan struct{})
	if s.quiescing {
		s.quiet.Broadcast()
	}
}

// syncLocked runs one sync, with mu released during it, covering every position
// written when it starts, and publishes them if it succeeded; a failure stops the
// sequencer with a *SyncError. Afterwards, if more is written than published, it
// wakes one waiter for such a position to run the next sync, and leaves it a gather
// (see gatherLocked). The caller holds mu, has checked that no sync runs and that
// written > published, and holds mu again when it returns. gather says whether the
// caller may wait for the gather first (a Wait; not Quiesce, which holds writers
// back, nor Drain, for which none will come). It returns the *SyncError when its
// sync failed.
func (s *sequencer) syncLocked(gather bool) error {
	s.syncing = true
	if gather {
		s.gatherLocked()
	}
	s.gatherTarget = 0
	from, to := s.published.Load()+1, s.written
	s.mu.Unlock()
	start := time.Now()
	var snap *storage.Snapshot
	var err error
	if s.snapshot != nil {
		// Taken after to was read, so it holds every position up to to, and before
		// the fsync, so everything it holds is durable once the fsync returns.
		snap, err = s.snapshot()
	}
	if err == nil {
		err = s.sync()
	}
	took := time.Since(start)
	s.mu.Lock()
	s.syncing = false
	var failed error
	var unused *storage.Snapshot
	switch {
	case err != nil:
		failed = &SyncError{First: from, Last: to, Err: err}
		s.stopLocked(failed)
		unused = snap
	case s.err != nil:
		unused = snap
	default:
		if snap != nil {
			unused = s.installViewLocked(snap)
		}
		s.advanceLocked(to)
		// The committers just answered are building their next commits: ask the next
		// sync to wait, briefly, until as many positions again are written, so that
		// they share it with those written meanwhile (see gatherLocked).
		s.gatherTarget = s.written + (to - from + 1)
		s.gatherWindow = min(took/gatherFraction, maxGather)
		if s.written > to {
			for p, ch := range s.waiters {
				if p <= s.written { // its position is written: it can run the next sync
					close(ch)
					delete(s.waiters, p)
					break
				}
			}
		}
	}
	s.quiet.Broadcast() // a Quiesce or Drain may run the next sync, or is done
	if unused != nil {
		s.mu.Unlock()
		unused.Release()
		s.mu.Lock()
	}
	return failed
}

// gatherFraction and maxGather bound a gather: at most this fraction of the last
// fsync's duration, and never more than maxGather.
const (
	gatherFraction = 2
	maxGather      = 2 * time.Millisecond
)

// gatherLocked waits, before a sync that follows another one with commits left over,
// until gatherTarget positions are written, for at most gatherWindow, or until the
// sequencer stops or a Quiesce starts. Without it, the committers a sync answers
// always write their next commits while the following sync already runs, so with N
// committers each sync covers about N/2 of them (measured: 4.2 per fsync from 8
// appenders); waiting a fraction of an fsync lets both halves share one. One committer
// never gathers: its sync leaves nothing over. The caller holds mu and has set
// syncing, so no other sync starts meanwhile.
func (s *sequencer) gatherLocked() {
	if s.gatherTarget <= s.written || s.gatherWindow <= 0 || s.quiescing {
		return
	}
	deadline := time.Now().Add(s.gatherWindow)
	s.gathering = true
	t := time.AfterFunc(s.gatherWindow, func() {
		s.mu.Lock()
		s.quiet.Broadcast()
		s.mu.Unlock()
	})
	for s.err == nil && !s.quiescing && s.written < s.gatherTarget && time.Now().Before(deadline) {
		s.quiet.Wait()
	}
	t.Stop()
	s.gathering = false
}

// Drain publishes every written position, running syncs as needed, and returns once
// none is left unpublished or the sequencer stopped. It returns the *SyncError of a
// sync it ran itself that failed (an earlier stop is not Drain's to report). Close
// calls it once no writer can start, so that no sync is in flight when storage closes.
func (s *sequencer) Drain() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.err == nil && (s.syncing || s.written > s.published.Load()) {
		if s.syncing {
			s.quiet.Wait()
		} else if err := s.syncLocked(false); err != nil {
			return err
		}
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
// publish them or stop the sequencer. With a sync function, a Wait for a written
// position runs the sync itself when none is running (see sequencer).
func (s *sequencer) Wait(p uint64) error {
	if s.published.Load() >= p {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		if s.published.Load() >= p {
			return nil
		}
		if s.err != nil {
			return s.err
		}
		if s.sync != nil && !s.syncing && s.written >= p {
			_ = s.syncLocked(true) // a failure stops the sequencer: the loop returns its error
			continue
		}
		ch, ok := s.waiters[p]
		if !ok {
			ch = make(chan struct{})
			s.waiters[p] = ch
		}
		s.mu.Unlock()
		<-ch
		s.mu.Lock()
	}
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
// open assignment, if any, is written and every written position published (running
// the sync itself when needed), and holds new assignments back (after
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
	s.quiet.Broadcast() // a gathering sync stops waiting for writers held back now
	defer func() {
		s.mu.Lock()
		s.quiescing = false
		s.quiet.Broadcast()
		s.mu.Unlock()
	}()
	for s.assigned != s.published.Load() && s.err == nil {
		if s.sync != nil && !s.syncing && s.written == s.assigned {
			_ = s.syncLocked(false) // written, not yet durable: make it so (a failure stops the loop)
			continue
		}
		s.quiet.Wait()
	}
	err, pub := s.err, s.published.Load()
	s.mu.Unlock()
	if err != nil {
		return err
	}
	return fn(pub)
}
