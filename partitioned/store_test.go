package partitioned_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/partitioned"
	"github.com/rockline/rockline/pipeline"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var ctx = context.Background()

// deadline bounds every wait, so a bug fails a test instead of hanging it.
const deadline = 30 * time.Second

// byPrefix routes streams by their category to fixed partitions: orders to 0,
// payments to 1, anything else by hash.
func byPrefix(stream string, n int) int {
	switch {
	case strings.HasPrefix(stream, "order-"):
		return 0
	case strings.HasPrefix(stream, "payment-"):
		return 1
	}
	return partitioned.ByName(stream, n)
}

func open(t *testing.T, dir string, cfg partitioned.Config) *partitioned.Store {
	t.Helper()
	s, err := partitioned.Open(dir, cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// TestConfig: bad configurations are typed errors naming the field; the partition
// count is fixed at creation.
func TestConfig(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	var ce *pipeline.ConfigError
	for _, n := range []int{0, -1, partitioned.MaxPartitions + 1} {
		if _, err := partitioned.Open(dir, partitioned.Config{Partitions: n}); !errors.As(err, &ce) || ce.Field != "Partitions" {
			t.Errorf("Partitions %d: %v, want a *ConfigError for Partitions", n, err)
		}
	}
	s, err := partitioned.Open(dir, partitioned.Config{Partitions: 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := partitioned.Open(dir, partitioned.Config{Partitions: 4}); !errors.As(err, &ce) || ce.Field != "Partitions" || !strings.Contains(err.Error(), "3") {
		t.Errorf("reopen with 4 partitions: %v, want a *ConfigError naming the 3 it was created with", err)
	}
	bad := open(t, dir, partitioned.Config{Partitions: 3, Partition: func(string, int) int { return 7 }})
	if _, err := bad.Append(ctx, "s", eventstore.Any, eventstore.Event{Type: "t"}); !errors.As(err, &ce) || ce.Field != "Partition" {
		t.Errorf("a partition function out of range: %v, want a *ConfigError for Partition", err)
	}
	if _, err := partitioned.New([]*pipeline.DB{nil}, partitioned.Config{Partitions: 2}); !errors.As(err, &ce) {
		t.Errorf("New with 1 database for 2 partitions: %v, want a *ConfigError", err)
	}
}

// TestRouting: ByCategory keeps a category's streams together; appends and reads
// route to the stream's partition, and each partition's log holds only its own.
func TestRouting(t *testing.T) {
	for _, n := range []int{2, 7, 64} {
		a, b := partitioned.ByCategory("order-1", n), partitioned.ByCategory("order-2", n)
		if a != b || a < 0 || a >= n {
			t.Errorf("ByCategory over %d: order-1 -> %d, order-2 -> %d", n, a, b)
		}
	}
	s := open(t, filepath.Join(t.TempDir(), "store"), partitioned.Config{Partitions: 2, Partition: byPrefix})
	for i, stream := range []string{"order-1", "payment-1", "order-2"} {
		res, err := s.Append(ctx, stream, eventstore.NoStream, eventstore.Event{Type: fmt.Sprint("t", i)})
		if err != nil {
			t.Fatal(err)
		}
		if want, _ := s.PartitionOf(stream); res.Partition != want {
			t.Errorf("%s appended to partition %d, want %d", stream, res.Partition, want)
		}
	}
	for p, want := range []uint64{2, 1} {
		_, db, err := s.Partition(p)
		if err != nil {
			t.Fatal(err)
		}
		if db.LastPosition() != want {
			t.Errorf("partition %d log at %d, want %d", p, db.LastPosition(), want)
		}
	}
	evs, err := s.ReadStream(ctx, "payment-1", 0, 10)
	if err != nil || len(evs) != 1 || evs[0].Type != "t1" {
		t.Errorf("ReadStream(payment-1) = %+v, %v", evs, err)
	}
	if _, _, err := s.Partition(2); err == nil {
		t.Error("Partition(2) of 2 succeeded")
	}
}

// TestUpdateIsOnePartition: a transaction appends to several streams of its partition
// atomically; an append to another partition's stream fails it whole.
func TestUpdateIsOnePartition(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "store"), partitioned.Config{Partitions: 2, Partition: byPrefix})
	p, err := s.Update(ctx, "order-1", func(tx *partitioned.Tx) error {
		return errors.Join(tx.Append("order-1", eventstore.NoStream, eventstore.Event{Type: "placed"}),
			tx.Append("order-2", eventstore.NoStream, eventstore.Event{Type: "placed"}))
	})
	if err != nil || p != 0 {
		t.Fatalf("Update over two order streams: partition %d, %v", p, err)
	}
	_, err = s.Update(ctx, "order-1", func(tx *partitioned.Tx) error {
		if err := tx.Append("order-1", eventstore.Revision(0), eventstore.Event{Type: "paid"}); err != nil {
			return err
		}
		return tx.Append("payment-1", eventstore.NoStream, eventstore.Event{Type: "taken"})
	})
	var cpe *partitioned.CrossPartitionError
	if !errors.As(err, &cpe) || !errors.Is(err, partitioned.ErrCrossPartition) || cpe.Other != "payment-1" || cpe.OtherPartition != 1 {
		t.Fatalf("Update reaching into partition 1: %v, want a *CrossPartitionError naming payment-1", err)
	}
	for _, stream := range []string{"order-1", "payment-1"} {
		evs, err := s.ReadStream(ctx, stream, 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[string]int{"order-1": 1, "payment-1": 0}[stream]; len(evs) != want {
			t.Errorf("%s holds %d events after the refused transaction, want %d", stream, len(evs), want)
		}
	}
}

// TestSubscribeToAllResumes: concurrent appends to every partition; a subscription
// over all partitions sees each event exactly once, each partition's in log order;
// closed part-way and resumed from its Positions, the two runs together are every
// event once.
func TestSubscribeToAllResumes(t *testing.T) {
	const parts, writers, per = 3, 4, 60
	s := open(t, filepath.Join(t.TempDir(), "store"), partitioned.Config{Partitions: parts, Partition: partitioned.ByName})
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() { // ends after per appends
			defer wg.Done()
			for i := range per {
				if _, err := s.Append(ctx, fmt.Sprintf("s%d-%d", w, i%5), eventstore.Any, eventstore.Event{ID: fmt.Sprintf("w%d-%d", w, i), Type: "t"}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	seen := map[string]int{}
	lastPos := make([]uint64, parts)
	var mu sync.Mutex
	half := make(chan struct{})
	handle := func(e partitioned.Event) error {
		mu.Lock()
		defer mu.Unlock()
		seen[e.ID]++
		if e.Position < lastPos[e.Partition] {
			return fmt.Errorf("partition %d: position %d after %d", e.Partition, e.Position, lastPos[e.Partition])
		}
		lastPos[e.Partition] = e.Position
		if len(seen) == writers*per/2 {
			close(half)
		}
		return nil
	}
	sub, err := s.SubscribeToAll(ctx, nil, handle, partitioned.SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-half:
	case <-time.After(deadline):
		t.Fatal("the subscription did not see half the events")
	}
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	resume := sub.Positions()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	all := make(chan struct{})
	var checkpoints []partitioned.Positions
	sub2, err := s.SubscribeToAll(ctx, resume, func(e partitioned.Event) error {
		if err := handle(e); err != nil {
			return err
		}
		if len(seen) == writers*per {
			close(all)
		}
		return nil
	}, partitioned.SubscribeOptions{CheckpointEvery: 10, Checkpoint: func(p partitioned.Positions) error {
		checkpoints = append(checkpoints, p)
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-all:
	case <-time.After(deadline):
		t.Fatalf("resumed subscription saw %d of %d events", len(seen), writers*per)
	}
	if err := sub2.Close(); err != nil {
		t.Fatal(err)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("event %s handled %d times", id, n)
		}
	}
	if len(checkpoints) == 0 || len(checkpoints[len(checkpoints)-1]) != parts {
		t.Errorf("checkpoints %v, want vectors of %d positions", checkpoints, parts)
	}
	for i := 1; i < len(checkpoints); i++ {
		for p := range parts {
			if checkpoints[i][p] < checkpoints[i-1][p] {
				t.Errorf("checkpoint %d went back in partition %d: %v after %v", i, p, checkpoints[i], checkpoints[i-1])
			}
		}
	}
}

// TestSubscriptionEndsOnHandlerError: a handler's error ends every partition's
// subscription and is what Wait returns.
func TestSubscriptionEndsOnHandlerError(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "store"), partitioned.Config{Partitions: 2, Partition: byPrefix})
	for _, stream := range []string{"order-1", "payment-1"} {
		if _, err := s.Append(ctx, stream, eventstore.Any, eventstore.Event{Type: "t"}); err != nil {
			t.Fatal(err)
		}
	}
	boom := errors.New("boom")
	sub, err := s.SubscribeToAll(ctx, nil, func(partitioned.Event) error { return boom }, partitioned.SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-sub.Done():
	case <-time.After(deadline):
		t.Fatal("the subscription did not end on the handler's error")
	}
	if err := sub.Wait(); !errors.Is(err, boom) {
		t.Errorf("Wait = %v, want the handler's error", err)
	}
	if _, err := s.SubscribeToAll(ctx, partitioned.Positions{1, 2, 3}, func(partitioned.Event) error { return nil }, partitioned.SubscribeOptions{}); err == nil {
		t.Error("a vector of 3 positions for 2 partitions was accepted")
	}
}
