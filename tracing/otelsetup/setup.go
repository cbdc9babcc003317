package otelsetup

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"time"

	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdoutmetric"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Providers are the SDK providers Setup built. Pass them to pipeline.Config (and to
// instrumentation such as otelhttp); call Shutdown before exiting to flush.
type Providers struct {
	TracerProvider *sdktrace.TracerProvider
	MeterProvider  *sdkmetric.MeterProvider
}

// Setup validates cfg and builds a TracerProvider (batch span processor, sampler,
// resource with service name and version) and a MeterProvider (periodic reader for the
// configured exporter, plus any extra readers such as a Prometheus exporter). It never
// sets a global provider; the caller may. Exporters connect lazily, so Setup does not
// fail when the collector is down.
func Setup(ctx context.Context, cfg Config, readers ...sdkmetric.Reader) (*Providers, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.ServiceName == "" {
		cfg.ServiceName = "rockline"
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", cfg.ServiceName)}
	if cfg.ServiceVersion != "" {
		attrs = append(attrs, attribute.String("service.version", cfg.ServiceVersion))
	}
	// OTEL_RESOURCE_ATTRIBUTES first, then the Config (which ConfigFromEnv filled from
	// OTEL_SERVICE_NAME), so the service name the specification prefers wins.
	res, err := resource.New(ctx, resource.WithFromEnv(), resource.WithTelemetrySDK(), resource.WithAttributes(attrs...))
	if err != nil {
		return nil, &ConfigError{Field: "OTEL_RESOURCE_ATTRIBUTES", Value: os.Getenv("OTEL_RESOURCE_ATTRIBUTES"), Expected: "comma-separated key=value pairs, values percent-encoded", Err: err}
	}
	topts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res), sdktrace.WithSampler(sampler(cfg))}
	if exp, err := spanExporter(ctx, cfg); err != nil {
		return nil, err
	} else if exp != nil {
		topts = append(topts, sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(500*time.Millisecond)))
	}
	mopts := []sdkmetric.Option{sdkmetric.WithResource(res)}
	if cfg.MetricsExporter == ExporterPrometheus {
		r, err := prometheusReader(ctx)
		if err != nil {
			return nil, err
		}
		mopts = append(mopts, sdkmetric.WithReader(r))
	} else if exp, err := metricExporter(ctx, cfg); err != nil {
		return nil, err
	} else if exp != nil {
		mopts = append(mopts, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp)))
	}
	for _, r := range readers {
		mopts = append(mopts, sdkmetric.WithReader(r))
	}
	return &Providers{TracerProvider: sdktrace.NewTracerProvider(topts...), MeterProvider: sdkmetric.NewMeterProvider(mopts...)}, nil
}

// Shutdown flushes pending spans and metrics and stops the providers.
func (p *Providers) Shutdown(ctx context.Context) error {
	return errors.Join(p.TracerProvider.Shutdown(ctx), p.MeterProvider.Shutdown(ctx))
}

func sampler(cfg Config) sdktrace.Sampler {
	switch cfg.Sampler {
	case "always_off":
		return sdktrace.NeverSample()
	case "traceidratio":
		return sdktrace.TraceIDRatioBased(cfg.SamplerArg)
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample())
	case "parentbased_traceidratio":
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.SamplerArg))
	case "always_on":
		return sdktrace.AlwaysSample()
	}
	return sdktrace.ParentBased(sdktrace.AlwaysSample())
}

// endpoint returns the OTLP base URL for the protocol.
func endpoint(cfg Config) string {
	if cfg.Endpoint != "" {
		return cfg.Endpoint
	}
	if cfg.Protocol == ProtocolHTTP {
		return "http://localhost:4318"
	}
	return "http://localhost:4317"
}

func spanExporter(ctx context.Context, cfg Config) (sdktrace.SpanExporter, error) {
	switch cfg.TracesExporter {
	case ExporterStdout:
		return stdouttrace.New(stdouttrace.WithWriter(stdout(cfg)))
	case ExporterOTLP:
		base := endpoint(cfg)
		if cfg.Protocol == ProtocolHTTP {
			return otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(joinPath(base, "/v1/traces")))
		}
		return otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL(base))
	}
	return nil, nil
}

func metricExporter(ctx context.Context, cfg Config) (sdkmetric.Exporter, error) {
	switch cfg.MetricsExporter {
	case ExporterStdout:
		return stdoutmetric.New(stdoutmetric.WithWriter(stdout(cfg)))
	case ExporterOTLP:
		base := endpoint(cfg)
		if cfg.Protocol == ProtocolHTTP {
			return otlpmetrichttp.New(ctx, otlpmetrichttp.WithEndpointURL(joinPath(base, "/v1/metrics")))
		}
		return otlpmetricgrpc.New(ctx, otlpmetricgrpc.WithEndpointURL(base))
	}
	return nil, nil
}

// prometheusReader builds the Prometheus scrape endpoint with the contrib autoexport
// package, which reads OTEL_EXPORTER_PROMETHEUS_HOST and _PORT and serves /metrics;
// it needs OTEL_METRICS_EXPORTER=prometheus, which is how the specification asks for
// it. (An application that serves /metrics itself passes its own reader to Setup.)
func prometheusReader(ctx context.Context) (sdkmetric.Reader, error) {
	if v := os.Getenv("OTEL_METRICS_EXPORTER"); v != ExporterPrometheus {
		return nil, &ConfigError{Field: "Config.MetricsExporter", Value: ExporterPrometheus,
			Expected: fmt.Sprintf("OTEL_METRICS_EXPORTER=prometheus in the environment, which sets the Prometheus exporter up (it is %q), or a Prometheus reader passed to Setup", v)}
	}
	r, err := autoexport.NewMetricReader(ctx)
	if err != nil {
		return nil, &ConfigError{Field: "OTEL_EXPORTER_PROMETHEUS_PORT", Value: os.Getenv("OTEL_EXPORTER_PROMETHEUS_PORT"), Expected: "a port the Prometheus exporter can serve on", Err: err}
	}
	return r, nil
}

func joinPath(base, p string) string {
	u, err := url.Parse(base)
	if err != nil {
		return base + p
	}
	return u.JoinPath(p).String()
}

func stdout(cfg Config) interface{ Write([]byte) (int, error) } {
	if cfg.Stdout != nil {
		return cfg.Stdout
	}
	return os.Stdout
}
