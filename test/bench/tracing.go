package main

import (
	"context"
	"sync/atomic"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Tracing variants of rockline-parallel (the tracing scenario).
const (
	traceNone   = ""       // Config.TracerProvider nil: otel's global provider (a no-op here)
	traceNoop   = "noop"   // trace/noop provider
	traceNever  = "never"  // sdktrace provider, NeverSample
	traceAlways = "always" // sdktrace provider, AlwaysSample, batch processor, discarding exporter
)

// discardExporter is a SpanExporter that drops every span, counting them.
type discardExporter struct{ spans atomic.Int64 }

func (e *discardExporter) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.spans.Add(int64(len(spans)))
	return nil
}

func (e *discardExporter) Shutdown(context.Context) error { return nil }

// tracerSetup is a provider for one engine instance and how to shut it down.
type tracerSetup struct {
	provider trace.TracerProvider
	exporter *discardExporter // set for traceAlways
	shutdown func() error
}

func newTracer(variant string) tracerSetup {
	switch variant {
	case traceNoop:
		return tracerSetup{provider: noop.NewTracerProvider(), shutdown: func() error { return nil }}
	case traceNever:
		tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
		return tracerSetup{provider: tp, shutdown: func() error { return shutdownProvider(tp) }}
	case traceAlways:
		exp := &discardExporter{}
		tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithBatcher(exp))
		return tracerSetup{provider: tp, exporter: exp, shutdown: func() error { return shutdownProvider(tp) }}
	}
	return tracerSetup{shutdown: func() error { return nil }}
}

func shutdownProvider(tp *sdktrace.TracerProvider) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return tp.Shutdown(ctx)
}
