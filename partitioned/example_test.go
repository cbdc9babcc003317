package partitioned_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/partitioned"
)

// A process manager crosses partitions: it follows the orders' partition and asks
// for a payment in the payments' partition, with an event ID made of the order
// event's partition and position, so running it again from an older Positions vector
// (a restart before its checkpoint was saved) appends each request once.
func Example_processManager() {
	dir, _ := os.MkdirTemp("", "partitioned-example-")
	defer os.RemoveAll(dir)
	route := func(stream string, n int) int { // orders in partition 0, payments in 1
		if strings.HasPrefix(stream, "order-") {
			return 0
		}
		return 1
	}
	store, err := partitioned.Open(dir, partitioned.Config{Partitions: 2, Partition: route})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()
	ctx := context.Background()
	for _, id := range []string{"1", "2"} {
		store.Append(ctx, "order-"+id, eventstore.NoStream, eventstore.Event{Type: "OrderPlaced", Data: []byte(id)})
	}

	// The process manager: one run, stopped once it has requested both payments.
	run := func(from partitioned.Positions) {
		done := make(chan struct{})
		requested := 0
		sub, _ := store.SubscribeToAll(ctx, from, func(e partitioned.Event) error {
			id := fmt.Sprintf("pay-for-%d-%d", e.Partition, e.Position) // derived from the source event
			_, err := store.Append(ctx, "payment-"+string(e.Data), eventstore.NoStream,
				eventstore.Event{ID: id, Type: "PaymentRequested", Data: e.Data})
			if err != nil && !errors.Is(err, eventstore.ErrWrongExpectedVersion) {
				return err
			}
			if requested++; requested == 2 {
				close(done)
			}
			return nil
		}, partitioned.SubscribeOptions{Filter: eventstore.Filter{TypePrefix: "OrderPlaced"}})
		<-done
		sub.Close()
	}
	run(nil)
	run(nil) // again from the start, as after a crash before any checkpoint

	for _, stream := range []string{"payment-1", "payment-2"} {
		evs, _ := store.ReadStream(ctx, stream, 0, 10)
		fmt.Println(stream, len(evs), "event(s)")
	}
	// Output:
	// payment-1 1 event(s)
	// payment-2 1 event(s)
}
