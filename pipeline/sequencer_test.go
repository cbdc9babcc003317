package pipeline

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rockline/rockline/validators"
)

// seqDeadline bounds every wait in these tests.
const seqDeadline = 10 * time.Second

func recvErr(t *testing.T, ch <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(seqDeadline):
		t.Fatalf("%s did not return", what)
		return nil
	}
}

func TestSequencerPublishesInOrder(t *testing.T) {
	s := newSequencer(10, nil)
	first, err := s.Assign(3) // 11, 12, 13
	if err != nil || first != 11 {
		t.Fatalf("Assign(3) = %d, %v; want 11, nil", first, err)
	}
	changed := s.Changed()
	waited := make(chan error, 1)
	go func() { waited <- s.Wait(12) }()
	if got := s.Published(); got != 10 {
		t.Fatalf("published %d with 11..13 open; want 10", got)
	}
	select {
	case <-changed:
		t.Fatal("Changed closed before the published position moved")
	default:
	}
	if err := s.Publish(11, 13); err != nil {
		t.Fatalf("Publish(11, 13) = %v", err)
	}
	if got := s.Published(); got != 13 {
		t.Fatalf("published %d; want 13", got)
	}
	select {
	case <-changed:
	case <-time.After(seqDeadline):
		t.Fatal("Changed not closed after publishing")
	}
	if err := recvErr(t, waited, "Wait(12)"); err != nil {
		t.Fatalf("Wait(12) = %v", err)
	}
	if err := s.Wait(5); err != nil {
		t.Fatalf("Wait on a published position = %v", err)
	}
	if first, err := s.Assign(1); err != nil || first != 14 {
		t.Fatalf("next Assign(1) = %d, %v; want 14, nil", first, err)
	}
}

// TestSequencerOutOfOrderStops: a completion that is not exactly an open assignment
// (or one already completed) is a broken invariant. The sequencer reports it by stopping, as a lost
// filler does, and publishes nothing past what is written.
func TestSequencerOutOfOrderStops(t *testing.T) {
	tests := []struct {
		name string
		// open assigns what the case needs (published stays 10) and returns the call
		// that breaks the order.
		open       func(t *testing.T, s *sequencer) func() error
		outOfOrder bool
	}{
		{"publish past the open assignment", func(t *testing.T, s *sequencer) func() error {
			mustAssign(t, s, 2) // 11..12
			return func() error { return s.Publish(12, 12) }
		}, true},
		{"publish part of the open assignment", func(t *testing.T, s *sequencer) func() error {
			mustAssign(t, s, 3) // 11..13
			return func() error { return s.Publish(11, 12) }
		}, true},
		{"publish beyond it", func(t *testing.T, s *sequencer) func() error {
			mustAssign(t, s, 1) // 11
			return func() error { return s.Publish(11, 12) }
		}, true},
		{"publish with nothing open", func(t *testing.T, s *sequencer) func() error {
			return func() error { return s.Publish(11, 11) }
		}, true},
		{"publish an assignment twice", func(t *testing.T, s *sequencer) func() error {
			mustAssign(t, s, 1) // 11
			mustAssign(t, s, 1) // 12
			go func() { _ = s.Publish(12, 12) }()
			return func() error {
				// 12 is closed (its Publish waits for 11) or about to be: publishing it
				// again is out of order either way, once the first has landed.
				for {
					s.mu.Lock()
					done := len(s.open) == 2 && s.open[1].done
					s.mu.Unlock()
					if done {
						return s.Publish(12, 12)
					}
					runtime.Gosched()
				}
			}
		}, true},
		{"assign no position", func(t *testing.T, s *sequencer) func() error {
			return func() error { _, err := s.Assign(0); return err }
		}, false},
	}
	type outcome struct {
		Stopped, OutOfOrder, ErrIsStop bool
		Published                      uint64
		WaiterStopped                  bool
		AssignAfter                    bool // a later Assign fails with ErrStopped
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSequencer(10, nil)
			waited := make(chan error, 1)
			go func() { waited <- s.Wait(11) }()
			breakOrder := tc.open(t, s)
			err := breakOrder()
			_, after := s.Assign(1)
			got := outcome{
				Stopped:       errors.Is(err, validators.ErrStopped),
				OutOfOrder:    errors.Is(err, errOutOfOrder),
				ErrIsStop:     err != nil && errors.Is(s.Err(), err),
				Published:     s.Published(),
				WaiterStopped: errors.Is(recvErr(t, waited, "Wait(11)"), validators.ErrStopped),
				AssignAfter:   errors.Is(after, validators.ErrStopped),
			}
			want := outcome{Stopped: true, OutOfOrder: tc.outOfOrder, ErrIsStop: true, Published: 10, WaiterStopped: true, AssignAfter: true}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("after %v (-want +got):\n%s", err, diff)
			}
		})
	}
}

// TestSequencerAssignmentsCompleteInAnyOrder: several assignments can be open at once
// (groups written side by side); a later one's Publish returns only once every
// earlier one is closed, and the published position moves over all of them at once.
func TestSequencerAssignmentsCompleteInAnyOrder(t *testing.T) {
	s := newSequencer(10, nil)
	if first := mustAssign(t, s, 2); first != 11 {
		t.Fatalf("first assignment starts at %d; want 11", first)
	}
	if first := mustAssign(t, s, 1); first != 13 {
		t.Fatalf("second assignment starts at %d; want 13", first)
	}
	later := make(chan error, 1)
	go func() { later <- s.Publish(13, 13) }()
	waited := make(chan error, 1)
	go func() { waited <- s.Wait(13) }()
	if got := s.Published(); got != 10 {
		t.Fatalf("published %d with 11..12 open; want 10", got)
	}
	select {
	case err := <-later:
		t.Fatalf("Publish(13, 13) returned %v before 11..12 was closed", err)
	case err := <-waited:
		t.Fatalf("Wait(13) returned %v before 11..12 was closed", err)
	default:
	}
	if err := s.Publish(11, 12); err != nil {
		t.Fatalf("Publish(11, 12) = %v", err)
	}
	if err := recvErr(t, later, "Publish(13, 13)"); err != nil {
		t.Fatalf("Publish(13, 13) = %v", err)
	}
	if err := recvErr(t, waited, "Wait(13)"); err != nil {
		t.Fatalf("Wait(13) = %v", err)
	}
	if got := s.Published(); got != 13 {
		t.Fatalf("published %d; want 13", got)
	}
}

// TestSequencerStopWakesWaitingPublish: a Publish waiting for an earlier assignment
// returns the stop error when that assignment is stopped instead.
func TestSequencerStopWakesWaitingPublish(t *testing.T) {
	s := newSequencer(10, nil)
	mustAssign(t, s, 1) // 11
	mustAssign(t, s, 1) // 12
	later := make(chan error, 1)
	go func() { later <- s.Publish(12, 12) }()
	cause := errors.New("fillers lost")
	s.Stop(11, cause)
	if err := recvErr(t, later, "Publish(12, 12)"); !errors.Is(err, validators.ErrStopped) || !errors.Is(err, cause) {
		t.Fatalf("Publish(12, 12) = %v; want the stop error", err)
	}
	if got := s.Published(); got != 10 {
		t.Fatalf("published %d after the stop; want 10", got)
	}
}

func mustAssign(t *testing.T, s *sequencer, n int) uint64 {
	t.Helper()
	first, err := s.Assign(n)
	if err != nil {
		t.Fatalf("Assign(%d) = %v", n, err)
	}
	return first
}

func TestSequencerStopWakesWaiters(t *testing.T) {
	s := newSequencer(0, nil)
	mustAssign(t, s, 2)
	waited := make(chan error, 1)
	go func() { waited <- s.Wait(2) }()
	s.Stop(1, errors.New("disk gone"))
	if err := recvErr(t, waited, "Wait(2)"); !errors.Is(err, validators.ErrStopped) {
		t.Fatalf("Wait after stop = %v; want validators.ErrStopped", err)
	}
	if !errors.Is(s.Err(), validators.ErrStopped) {
		t.Fatalf("Err() = %v", s.Err())
	}
	if err := s.Wait(3); !errors.Is(err, validators.ErrStopped) {
		t.Fatalf("Wait after stop = %v; want validators.ErrStopped", err)
	}
	if err := s.Publish(1, 2); !errors.Is(err, validators.ErrStopped) || s.Published() != 0 {
		t.Fatalf("Publish after stop = %v, published %d; want ErrStopped, 0", err, s.Published())
	}
	if _, err := s.Assign(1); !errors.Is(err, validators.ErrStopped) {
		t.Fatalf("Assign after stop = %v; want validators.ErrStopped", err)
	}
	if err := s.Quiesce(func(uint64) error { t.Error("Quiesce ran on a stopped sequencer"); return nil }); !errors.Is(err, validators.ErrStopped) {
		t.Fatalf("Quiesce after stop = %v; want validators.ErrStopped", err)
	}
}

func TestSequencerOldestReader(t *testing.T) {
	s := newSequencer(4, nil)
	a, _ := s.Acquire()
	mustAssign(t, s, 1)
	if err := s.Publish(5, 5); err != nil {
		t.Fatal(err)
	}
	b, _ := s.Acquire()
	if a != 4 || b != 5 {
		t.Fatalf("read positions %d, %d; want 4, 5", a, b)
	}
	if got := s.Oldest(); got != 4 {
		t.Fatalf("Oldest = %d; want 4", got)
	}
	s.Release(a)
	if got := s.Oldest(); got != 5 {
		t.Fatalf("Oldest after release = %d; want 5", got)
	}
	if n := s.OpenTransactions(); n != 1 {
		t.Fatalf("OpenTransactions = %d; want 1", n)
	}
	s.Release(b)
	if got, n := s.Oldest(), s.OpenTransactions(); got != 5 || n != 0 {
		t.Fatalf("Oldest, open = %d, %d; want 5, 0", got, n)
	}
}

// TestSequencerExclusive: a replay runs alone. Exclusive refuses while a transaction is
// registered, Acquire refuses while Exclusive runs (so no transaction can take a
// position a replay hands out again), and Replay refuses outside Exclusive.
func TestSequencerExclusive(t *testing.T) {
	s := newSequencer(0, nil)
	if err := s.Replay(1, func() error { return nil }); !errors.Is(err, ErrNotExclusive) {
		t.Fatalf("Replay outside Exclusive = %v; want ErrNotExclusive", err)
	}
	p, err := s.Acquire()
	if err != nil {
		t.Fatal(err)
	}
	ran := false
	if err := s.Exclusive(func() error { ran = true; return nil }); !errors.Is(err, ErrNotExclusive) || ran {
		t.Fatalf("Exclusive with an open transaction = %v (ran %v); want ErrNotExclusive, not run", err, ran)
	}
	s.Release(p)
	err = s.Exclusive(func() error {
		if _, err := s.Acquire(); !errors.Is(err, ErrReplaying) {
			t.Errorf("Acquire during Exclusive = %v; want ErrReplaying", err)
		}
		if err := s.Exclusive(func() error { return nil }); !errors.Is(err, ErrNotExclusive) {
			t.Errorf("nested Exclusive = %v; want ErrNotExclusive", err)
		}
		if err := s.Replay(2, func() error { return nil }); !errors.Is(err, ErrNotExclusive) {
			t.Errorf("Replay of a position that is not next = %v; want ErrNotExclusive", err)
		}
		return s.Replay(1, func() error { return nil })
	})
	if err != nil {
		t.Fatalf("Exclusive: %v", err)
	}
	if s.Published() != 1 || s.Err() != nil {
		t.Fatalf("Published = %d, Err = %v after a replay of position 1", s.Published(), s.Err())
	}
	if _, err := s.Acquire(); err != nil {
		t.Fatalf("Acquire after Exclusive = %v", err)
	}
}

// TestSequencerReplayWriteFailureStops: a replayed position whose write failed can be
// neither published nor filled, so the sequencer stops.
func TestSequencerReplayWriteFailureStops(t *testing.T) {
	s := newSequencer(0, nil)
	errDisk := errors.New("disk gone")
	err := s.Exclusive(func() error { return s.Replay(1, func() error { return errDisk }) })
	if !errors.Is(err, errDisk) || !errors.Is(s.Err(), validators.ErrStopped) || s.Published() != 0 {
		t.Fatalf("Replay = %v, Err = %v, published %d; want the write's error, ErrStopped, 0", err, s.Err(), s.Published())
	}
}

// TestSequencerQuiesce: a Quiesce waits for the open assignment to be published, so
// its function sees every assigned position written, and holds the next assignment
// back until it returns.
func TestSequencerQuiesce(t *testing.T) {
	s := newSequencer(0, nil)
	mustAssign(t, s, 2) // 1..2, open
	seen := make(chan uint64, 1)
	release := make(chan struct{})
	quiesced := make(chan error, 1)
	go func() {
		quiesced <- s.Quiesce(func(published uint64) error {
			seen <- published
			<-release
			return nil
		})
	}()
	if err := s.Publish(1, 2); err != nil {
		t.Fatal(err)
	}
	select {
	case p := <-seen:
		if p != 2 {
			t.Fatalf("Quiesce ran at published %d with 1..2 assigned; want 2", p)
		}
	case <-time.After(seqDeadline):
		t.Fatal("Quiesce did not run once the open assignment was published")
	}
	assigned := make(chan uint64, 1)
	go func() {
		first, err := s.Assign(1)
		if err != nil {
			t.Error(err)
		}
		assigned <- first
	}()
	// Give an Assign that ignored the Quiesce every chance to run; one that waits
	// cannot make this fail.
	for range 1000 {
		runtime.Gosched()
	}
	select {
	case p := <-assigned:
		t.Fatalf("Assign returned %d while a Quiesce ran", p)
	default:
	}
	close(release)
	if err := recvErr(t, quiesced, "Quiesce"); err != nil {
		t.Fatalf("Quiesce = %v", err)
	}
	select {
	case p := <-assigned:
		if p != 3 {
			t.Fatalf("Assign after Quiesce = %d; want 3", p)
		}
	case <-time.After(seqDeadline):
		t.Fatal("Assign still held back after Quiesce returned")
	}
}

// TestSequencerSyncCoversEveryPublished drives a sequencer with a sync function from
// eight writers (one assignment open at a time, as the writer queue does) and checks
// the promise Wait makes with Config.Sync: when it returns, a sync that began after
// the position was written has completed, and published positions only grow.
func TestSequencerSyncCoversEveryPublished(t *testing.T) {
	var clock, lastDone atomic.Int64 // lastDone: the start time of the latest completed sync
	var syncs atomic.Int64
	s := newSequencer(0, func() error {
		start := clock.Add(1)
		for range 3 {
			runtime.Gosched() // let writers write while it "runs"
		}
		for {
			old := lastDone.Load()
			if start <= old || lastDone.CompareAndSwap(old, start) {
				break
			}
		}
		syncs.Add(1)
		return nil
	})
	var writer sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	const perWriter = 300
	for range 8 {
		wg.Go(func() {
			for range perWriter {
				writer.Lock()
				first, err := s.Assign(1)
				if err != nil {
					writer.Unlock()
					errs <- err
					return
				}
				written := clock.Add(1)
				err = s.Publish(first, first)
				writer.Unlock()
				if err != nil {
					errs <- err
					return
				}
				if err := s.Wait(first); err != nil {
					errs <- err
					return
				}
				if got := lastDone.Load(); got <= written {
					errs <- fmt.Errorf("position %d published before a sync that began after its write (last sync began at %d, written at %d)", first, got, written)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := s.Drain(); err != nil {
		t.Fatal(err)
	}
	if got := s.Published(); got != 8*perWriter {
		t.Fatalf("published %d; want %d", got, 8*perWriter)
	}
	t.Logf("%d positions, %d syncs", 8*perWriter, syncs.Load())
}

// TestSequencerSyncFailureStops: a failed sync stops the sequencer with a *SyncError
// naming the positions it was to cover; they are never published, Wait returns the
// error, and Assign fails from then on.
func TestSequencerSyncFailureStops(t *testing.T) {
	injected := errors.New("injected")
	s := newSequencer(4, func() error { return injected })
	first, err := s.Assign(2)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Publish(first, first+1); err != nil {
		t.Fatal(err)
	}
	err = s.Wait(first)
	var se *SyncError
	if !errors.As(err, &se) || !errors.Is(err, ErrStopped) || !errors.Is(err, injected) || se.First != 5 || se.Last != 6 {
		t.Fatalf("Wait: err = %v; want a *SyncError for 5..6 matching ErrStopped and the cause", err)
	}
	if s.Published() != 4 {
		t.Fatalf("published %d after a failed sync; want 4", s.Published())
	}
	if _, err := s.Assign(1); !errors.Is(err, ErrStopped) {
		t.Fatalf("Assign after a failed sync: err = %v; want ErrStopped", err)
	}
	if err := s.Drain(); err != nil {
		t.Fatalf("Drain reported a failure it did not run: %v", err)
	}
}
