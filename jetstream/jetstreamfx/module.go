// Package jetstreamfx provides a rockline database on NATS JetStream to applications
// wired with go.uber.org/fx: the same *pipeline.DB that pipelinefx provides on the
// local engine, so an application moves from one machine to a cluster by swapping the
// module and its settings, nothing else (the layers' modules, such as
// eventstore/eventstorefx for the event store, take the DB from the graph either way).
//
// Module needs a Settings value (the servers to connect to, the partition and the
// pipeline.Config) and optionally a *nats.Conn, a trace.TracerProvider and a
// metric.MeterProvider from the graph. Given a connection, it uses it and leaves it
// open; otherwise it connects to Settings.URL and closes that connection after the
// database. It provides *pipeline.DB and nothing else.
//
// The constructor connects and opens the partition (creating its stream when
// missing) within Settings.OpenTimeout, so an unreachable cluster or a bad setting
// fails the application's start with the typed error (a *pipeline.ConfigError for a
// bad setting). An OnStop hook closes the database within the stop deadline.
package jetstreamfx

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/fx"

	"github.com/rockline/rockline/jetstream"
	"github.com/rockline/rockline/pipeline"
)

// Module provides *pipeline.DB on a JetStream partition.
var Module = fx.Module("rockline-jetstream", fx.Provide(New))

// DefaultOpenTimeout bounds connecting and opening the partition when
// Settings.OpenTimeout is zero.
const DefaultOpenTimeout = 30 * time.Second

// Settings tell the module where the cluster is and which partition to open.
type Settings struct {
	// URL lists the NATS servers, comma-separated ("nats://127.0.0.1:4222,..."). Used
	// only when the graph provides no *nats.Conn; required then.
	URL string
	// Partition configures the partition (its stream, subjects, replicas: see
	// jetstream.Config).
	Partition jetstream.Config
	// Config configures the DB (pipeline.OpenEngine says which fields apply).
	Config pipeline.Config
	// OpenTimeout bounds connecting and opening; 0 means DefaultOpenTimeout.
	OpenTimeout time.Duration
}

// Validate checks the settings that the module itself reads; the partition's and
// the DB's are checked when they open. It returns a *pipeline.ConfigError.
func (s *Settings) Validate(haveConn bool) error {
	if s.OpenTimeout < 0 {
		return &pipeline.ConfigError{Field: "OpenTimeout", Value: s.OpenTimeout, Expected: ">= 0 (0: 30s)"}
	}
	if !haveConn && s.URL == "" {
		return &pipeline.ConfigError{Field: "URL", Value: `""`, Expected: "NATS server URLs, comma-separated, when the graph provides no *nats.Conn"}
	}
	return nil
}

// Params are the module's inputs.
type Params struct {
	fx.In

	Lifecycle      fx.Lifecycle
	Settings       Settings
	Conn           *nats.Conn           `optional:"true"`
	TracerProvider trace.TracerProvider `optional:"true"`
	MeterProvider  metric.MeterProvider `optional:"true"`
}

// Result is the module's output.
type Result struct {
	fx.Out

	DB *pipeline.DB
}

// New connects (unless the graph provides a connection), opens the partition and the
// DB on it, and registers their Close on the lifecycle. Providers
// from the graph override Settings.Config's when set.
func New(p Params) (Result, error) {
	s := p.Settings
	if err := s.Validate(p.Conn != nil); err != nil {
		return Result{}, err
	}
	timeout := s.OpenTimeout
	if timeout == 0 {
		timeout = DefaultOpenTimeout
	}
	cfg := s.Config
	if p.TracerProvider != nil {
		cfg.TracerProvider = p.TracerProvider
	}
	if p.MeterProvider != nil {
		cfg.MeterProvider = p.MeterProvider
	}
	nc, owned := p.Conn, false
	if nc == nil {
		var err error
		nc, err = nats.Connect(s.URL, nats.Timeout(timeout), nats.Name("rockline"), nats.MaxReconnects(-1))
		if err != nil {
			return Result{}, fmt.Errorf("jetstreamfx: connect to %s: %w", s.URL, err)
		}
		owned = true
	}
	closeConn := func() {
		if owned {
			nc.Close()
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	db, err := jetstream.OpenDB(ctx, nc, s.Partition, cfg)
	if err != nil {
		closeConn()
		return Result{}, fmt.Errorf("jetstreamfx: open partition %q: %w", s.Partition.Stream, err)
	}
	p.Lifecycle.Append(fx.Hook{OnStop: func(ctx context.Context) error {
		return closeWithin(ctx, func() error {
			err := db.Close()
			closeConn() // after the database: it uses the connection until then
			return err
		})
	}})
	return Result{DB: db}, nil
}

// closeWithin runs close, waiting at most until ctx ends; close keeps going in the
// background if the deadline passes first, and the hook reports ctx's error.
func closeWithin(ctx context.Context, close func() error) error {
	done := make(chan error, 1)
	go func() { done <- close() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("jetstreamfx: close did not finish within the stop deadline: %w", ctx.Err())
	}
}
