// Command orders is a small event-sourced orders service: commands become events on a
// stream per order, appended with expected revisions and guarded by business rules; an
// exactly-once projection keeps a read model of every order and the totals, learning
// each order from its events' stream; a concurrent load shows conflicts and stale
// revisions being handled; the read model is then checked against the streams. The
// service is package ordersapp; this command runs it on the local engine, and
// jetstream/examples/orders runs the same on a NATS JetStream cluster.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/rockline/rockline/examples/orders/ordersapp"
	"github.com/rockline/rockline/pipeline"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "orders:", err)
		os.Exit(1)
	}
}

func run() error {
	keep := flag.String("dir", "", "database folder, kept afterwards (default: a temporary folder removed at exit)")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := *keep
	if dir == "" {
		tmp, err := os.MkdirTemp("", "rockline-orders-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	db, err := pipeline.Open(dir, pipeline.Config{})
	if err != nil {
		return err
	}
	defer db.Close()
	if err := ordersapp.Run(ctx, db, os.Stdout); err != nil {
		return err
	}
	if err := db.Close(); err != nil {
		return err
	}
	fmt.Println("database closed")
	return nil
}
