package eventstore_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/pipeline"
)

// Example opens the event store over a database, appends to a stream with an
// expected revision, reads the stream back, and shows the typed error of an append
// whose expectation no longer holds.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "rockline-eventstore-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	db, err := pipeline.Open(dir, pipeline.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	store, err := eventstore.New(db) // creates the store's family on first use
	if err != nil {
		log.Fatal(err)
	}

	// The first append expects no stream; the second expects the revision the first
	// returned.
	res, err := store.Append(ctx, "order-42", eventstore.NoStream,
		eventstore.Event{ID: "e1", Type: "OrderPlaced", Data: []byte(`{"total":30}`)})
	if err != nil {
		log.Fatal(err)
	}
	res, err = store.Append(ctx, "order-42", eventstore.Revision(res.NextExpectedRevision),
		eventstore.Event{ID: "e2", Type: "OrderPaid"},
		eventstore.Event{ID: "e3", Type: "OrderShipped"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("next expected revision:", res.NextExpectedRevision)

	events, err := store.ReadStream(ctx, "order-42", 0, eventstore.ToEnd)
	if err != nil {
		log.Fatal(err)
	}
	for _, ev := range events {
		fmt.Printf("%s@%d %s %s\n", ev.Stream, ev.Revision, ev.ID, ev.Type)
	}

	// A writer that still believes the stream ends at revision 0 is refused, and
	// nothing is written.
	_, err = store.Append(ctx, "order-42", eventstore.Revision(0), eventstore.Event{ID: "e4", Type: "OrderCancelled"})
	var wrong *eventstore.WrongExpectedVersionError
	if errors.As(err, &wrong) {
		fmt.Printf("refused: stream %s, expected %v, actual %v\n", wrong.Stream, wrong.Expected, wrong.Actual)
	}
	fmt.Println("is ErrWrongExpectedVersion:", errors.Is(err, eventstore.ErrWrongExpectedVersion))
	// Output:
	// next expected revision: 2
	// order-42@0 e1 OrderPlaced
	// order-42@1 e2 OrderPaid
	// order-42@2 e3 OrderShipped
	// refused: stream order-42, expected 0, actual 2
	// is ErrWrongExpectedVersion: true
}
