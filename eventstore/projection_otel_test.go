package eventstore_test

import (
	"context"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/pipeline"
	"github.com/rockline/rockline/tracing"
)

// TestProjectionTelemetry: with a real SDK, a projection records a span per batch
// (named, with its projection, event count and position), its handler time, the events
// it applied, and a lag gauge that reads zero once it has caught up.
func TestProjectionTelemetry(t *testing.T) {
	db, es, _ := openStore(t, pipeline.Config{})
	appendLoad(t, es, "x", 12) // 9 order events
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	if _, err := db.EnsureColumnFamily("counts"); err != nil {
		t.Fatal(err)
	}
	c := &counter{db: db}
	p, err := es.StartProjection(ctx, eventstore.ProjectionConfig{Name: "counts", Filter: ordersOnly, Handle: c.handle,
		MaxBatchEvents: 4, TracerProvider: tp, MeterProvider: mp})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	caughtUp(t, db, p)
	caughtUp(t, db, p) // and past its own last commit: the log is still from here on

	events := 0
	for _, s := range rec.Ended() {
		if s.Name() != tracing.SpanProjectionBatch {
			continue
		}
		attrs := map[string]int64{}
		for _, a := range s.Attributes() {
			attrs[string(a.Key)] = a.Value.AsInt64()
			if a.Key == tracing.AttrProjection && a.Value.AsString() != "counts" {
				t.Errorf("span names projection %q", a.Value.AsString())
			}
		}
		events += int(attrs[string(tracing.AttrEvents)])
		if attrs[string(tracing.AttrPosition)] == 0 {
			t.Errorf("batch span without a position: %v", s.Attributes())
		}
	}
	if events != 9 {
		t.Errorf("batch spans count %d events, want 9", events)
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			found[m.Name] = true
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				if m.Name == tracing.MetricProjectionEvents && (len(d.DataPoints) != 1 || d.DataPoints[0].Value != 9) {
					t.Errorf("%s = %+v, want 9", m.Name, d.DataPoints)
				}
			case metricdata.Gauge[int64]:
				if m.Name == tracing.MetricProjectionLag && (len(d.DataPoints) != 1 || d.DataPoints[0].Value != 0) {
					t.Errorf("%s = %+v, want 0 once caught up", m.Name, d.DataPoints)
				}
			}
		}
	}
	for _, name := range []string{tracing.MetricProjectionEvents, tracing.MetricProjectionLag, tracing.MetricProjectionHandlerDuration} {
		if !found[name] {
			t.Errorf("metric %s not recorded (have %v)", name, found)
		}
	}
}
