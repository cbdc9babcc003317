package pipeline_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/rockline/rockline/pipeline"
)

// Example opens a database in a fresh folder, creates a column family, commits a
// transaction holding a write and an event, and reads both back: the value through a
// read-only transaction, the event through the commit's log entry.
func Example() {
	dir, err := os.MkdirTemp("", "rockline-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	db, err := pipeline.Open(dir, pipeline.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	accounts, err := db.CreateColumnFamily("accounts")
	if err != nil {
		log.Fatal(err)
	}

	// UpdatePosition is Update that also returns the commit's log position.
	pos, err := db.UpdatePosition(context.Background(), func(tx *pipeline.Txn) error {
		if err := tx.Put(accounts, []byte("alice"), []byte("100")); err != nil {
			return err
		}
		return tx.AddEvents(pipeline.Event{ID: "e1", Type: "AccountOpened", Data: []byte(`{"owner":"alice"}`)})
	})
	if err != nil {
		log.Fatal(err)
	}

	err = db.View(func(tx *pipeline.Txn) error {
		v, err := tx.Get(accounts, []byte("alice"))
		if err != nil {
			return err
		}
		fmt.Printf("alice = %s\n", v)
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}

	// Every commit has a log entry at a dense position (the family's creation took
	// position 1); it holds the commit's writes and events.
	entry, err := db.Entry(pos)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("position", entry.Position)
	for _, w := range entry.Writes {
		fmt.Printf("write %s/%s = %s\n", w.Family, w.Key, w.Value)
	}
	for _, ev := range entry.Events {
		fmt.Printf("event %d: %s %s %s\n", ev.Index, ev.ID, ev.Type, ev.Data)
	}
	// Output:
	// alice = 100
	// position 2
	// write accounts/alice = 100
	// event 0: e1 AccountOpened {"owner":"alice"}
}
