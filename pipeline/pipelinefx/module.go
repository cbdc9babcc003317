// Package pipelinefx provides a rockline database to applications wired with
// go.uber.org/fx.
//
// Module needs a Settings value (the folder and the pipeline.Config) and optionally a
// trace.TracerProvider and a metric.MeterProvider from the graph; without them the
// database uses otel's global providers. It provides *pipeline.DB and nothing else: it
// never provides what it does not own (no logger, no providers, no layer built on the
// database; the event store's module is eventstore/eventstorefx, which takes the
// *pipeline.DB this module provides). The database is opened by the constructor, so a
// bad configuration fails the application's start with the *pipeline.ConfigError, and
// it is closed by an OnStop hook that drains the commit lanes within the stop deadline.
package pipelinefx

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/fx"

	"github.com/rockline/rockline/pipeline"
)

// Module provides *pipeline.DB.
var Module = fx.Module("rockline", fx.Provide(New))

// Settings tell the module where the database lives and how to open it.
type Settings struct {
	Dir    string
	Config pipeline.Config
}

// Params are the module's inputs.
type Params struct {
	fx.In

	Lifecycle      fx.Lifecycle
	Settings       Settings
	TracerProvider trace.TracerProvider `optional:"true"`
	MeterProvider  metric.MeterProvider `optional:"true"`
}

// Result is the module's output.
type Result struct {
	fx.Out

	DB *pipeline.DB
}

// New opens the database and registers its Close on the lifecycle. Providers from the
// graph override Settings.Config's when set.
func New(p Params) (Result, error) {
	cfg := p.Settings.Config
	if p.TracerProvider != nil {
		cfg.TracerProvider = p.TracerProvider
	}
	if p.MeterProvider != nil {
		cfg.MeterProvider = p.MeterProvider
	}
	db, err := pipeline.Open(p.Settings.Dir, cfg)
	if err != nil {
		return Result{}, fmt.Errorf("pipelinefx: open %s: %w", p.Settings.Dir, err)
	}
	p.Lifecycle.Append(fx.Hook{OnStop: func(ctx context.Context) error { return closeWithin(ctx, db) }})
	return Result{DB: db}, nil
}

// closeWithin closes db, waiting at most until ctx ends. Close keeps draining in the
// background if the deadline passes first; the hook then reports ctx's error.
func closeWithin(ctx context.Context, db *pipeline.DB) error {
	done := make(chan error, 1)
	go func() { done <- db.Close() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("pipelinefx: close did not finish within the stop deadline: %w", ctx.Err())
	}
}
