package tracing

import "go.opentelemetry.io/otel/metric"

// Meter returns rockline's meter from mp.
func Meter(mp metric.MeterProvider) metric.Meter { return mp.Meter(ScopeName) }
