package pipeline

import (
	"errors"
	"testing"
	"time"

	"github.com/rockline/rockline/validators"
)

func TestSequencerPublishesInOrder(t *testing.T) {
	s := newSequencer(10)
	first := s.next(3) // 11, 12, 13
	if first != 11 || s.Assigned() != 13 {
		t.Fatalf("next(3) = %d, assigned %d; want 11, 13", first, s.Assigned())
	}
	changed := s.Changed()
	waited := make(chan error, 1)
	go func() { waited <- s.Wait(12) }()

	s.markDone(13, 13)
	s.markDone(12, 12)
	if got := s.Published(); got != 10 {
		t.Fatalf("published %d with 11 not done; want 10", got)
	}
	select {
	case <-changed:
		t.Fatal("Changed closed before the published position moved")
	default:
	}
	s.markDone(11, 11)
	if got := s.Published(); got != 13 {
		t.Fatalf("published %d; want 13", got)
	}
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("Changed not closed after publishing")
	}
	select {
	case err := <-waited:
		if err != nil {
			t.Fatalf("Wait(12) = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Wait(12) not woken")
	}
	if err := s.Wait(5); err != nil {
		t.Fatalf("Wait on a published position = %v", err)
	}
}

func TestSequencerStopWakesWaiters(t *testing.T) {
	s := newSequencer(0)
	s.next(2)
	waited := make(chan error, 1)
	go func() { waited <- s.Wait(2) }()
	s.markDone(2, 2)
	s.stop(1, errors.New("disk gone"))
	select {
	case err := <-waited:
		if !errors.Is(err, validators.ErrStopped) {
			t.Fatalf("Wait after stop = %v; want validators.ErrStopped", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("stop did not wake the waiter")
	}
	if !errors.Is(s.Err(), validators.ErrStopped) {
		t.Fatalf("Err() = %v", s.Err())
	}
	if err := s.Wait(3); !errors.Is(err, validators.ErrStopped) {
		t.Fatalf("Wait after stop = %v; want validators.ErrStopped", err)
	}
}

func TestSequencerOldestReader(t *testing.T) {
	s := newSequencer(4)
	a, _ := s.Acquire()
	s.next(1)
	s.markDone(5, 5)
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
	s := newSequencer(0)
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
		return s.Replay(1, func() error { return nil })
	})
	if err != nil {
		t.Fatalf("Exclusive: %v", err)
	}
	if s.Published() != 1 {
		t.Fatalf("Published = %d after a replay of position 1", s.Published())
	}
	if _, err := s.Acquire(); err != nil {
		t.Fatalf("Acquire after Exclusive = %v", err)
	}
}
