// Command orders runs the orders service of examples/orders (package ordersapp) on a
// NATS JetStream cluster instead of the local engine: the same code, a *pipeline.DB
// from the jetstreamfx module, one partition replicated on every node (3 by
// default). `make demo-cluster` starts a 3-node cluster on 127.0.0.1 with a cached
// nats-server binary, runs this command against it and stops the cluster.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"go.uber.org/fx"

	"github.com/rockline/rockline/examples/orders/ordersapp"
	"github.com/rockline/rockline/jetstream"
	"github.com/rockline/rockline/jetstream/jetstreamfx"
	"github.com/rockline/rockline/pipeline"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "orders:", err)
		os.Exit(1)
	}
}

func run() error {
	servers := flag.String("servers", "nats://127.0.0.1:4222", "NATS server URLs, comma-separated")
	stream := flag.String("stream", "ORDERS", "the partition's JetStream stream (created when missing)")
	replicas := flag.Int("replicas", 3, "replicas of the stream")
	flag.Parse()
	settings := jetstreamfx.Settings{
		URL:       *servers,
		Partition: jetstream.Config{Stream: *stream, Subject: "orders", Replicas: *replicas},
	}
	var db *pipeline.DB
	app := fx.New(fx.Supply(settings), jetstreamfx.Module, fx.Populate(&db), fx.NopLogger)
	if err := app.Err(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := app.Start(ctx); err != nil {
		return err
	}
	fmt.Printf("partition %s: %d replicas on %s\n", *stream, *replicas, *servers)
	start := time.Now()
	err := ordersapp.Run(ctx, db, os.Stdout)
	fmt.Printf("ran in %v\n", time.Since(start).Round(time.Millisecond))
	if serr := app.Stop(context.Background()); err == nil {
		err = serr
	}
	if err == nil {
		fmt.Println("database and connection closed")
	}
	return err
}
