package partitioned_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/partitioned"
	"github.com/rockline/rockline/pipeline"
)

// TestConditionsStayInOnePartition: AppendIf and Tx.Require check conditions on
// streams of the append's partition as the event store does, and refuse one on a
// stream of another partition with a *CrossPartitionError naming it, writing nothing.
func TestConditionsStayInOnePartition(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "store"), partitioned.Config{Partitions: 2, Partition: byPrefix})
	if _, err := s.Append(ctx, "order-1", eventstore.NoStream, eventstore.Event{Type: "placed"}); err != nil {
		t.Fatal(err)
	}
	res, err := s.AppendIf(ctx, "order-2", eventstore.NoStream, []eventstore.Condition{eventstore.StreamAt("order-1", eventstore.Revision(0))}, eventstore.Event{Type: "placed"})
	if err != nil || res.Partition != 0 {
		t.Fatalf("AppendIf with a condition in its partition: partition %d, %v", res.Partition, err)
	}
	_, err = s.AppendIf(ctx, "order-3", eventstore.NoStream, []eventstore.Condition{eventstore.StreamAt("order-1", eventstore.NoStream)}, eventstore.Event{Type: "placed"})
	if !errors.Is(err, eventstore.ErrConditionFailed) {
		t.Errorf("AppendIf with a condition that does not hold: %v, want ErrConditionFailed", err)
	}
	cross := []eventstore.Condition{eventstore.StreamAt("payment-1", eventstore.NoStream)}
	_, err = s.AppendIf(ctx, "order-4", eventstore.NoStream, cross, eventstore.Event{Type: "placed"})
	var cpe *partitioned.CrossPartitionError
	if !errors.As(err, &cpe) || cpe.Other != "payment-1" || cpe.OtherPartition != 1 {
		t.Errorf("AppendIf with a condition in another partition: %v, want a *CrossPartitionError naming payment-1", err)
	}
	_, err = s.Update(ctx, "order-5", func(tx *partitioned.Tx) error {
		if err := tx.Require(cross...); err != nil {
			return err
		}
		return tx.Append("order-5", eventstore.NoStream, eventstore.Event{Type: "placed"})
	})
	if !errors.As(err, &cpe) || cpe.Other != "payment-1" {
		t.Errorf("Tx.Require across partitions: %v, want a *CrossPartitionError naming payment-1", err)
	}
	// A query condition would see one partition's events: refused with two.
	q := eventstore.Query{Items: []eventstore.QueryItem{{Tags: []string{"customer:1"}}}}
	_, err = s.AppendIf(ctx, "order-6", eventstore.NoStream, []eventstore.Condition{eventstore.StreamAt("order-1", eventstore.Any), eventstore.NoneMatching(q, 0)}, eventstore.Event{Type: "placed"})
	var ae *pipeline.ArgumentError
	if !errors.As(err, &ae) || ae.Arg != "conditions[1]" {
		t.Errorf("a query condition over two partitions: %v, want an *ArgumentError naming conditions[1]", err)
	}
	for stream, want := range map[string]int{"order-2": 1, "order-3": 0, "order-4": 0, "order-5": 0, "order-6": 0} {
		evs, err := s.ReadStream(ctx, stream, 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != want {
			t.Errorf("%s holds %d events, want %d", stream, len(evs), want)
		}
	}
}
