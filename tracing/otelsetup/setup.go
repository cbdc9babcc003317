package otelsetup

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
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

// The variables that choose each signal's exporter, as the specification names them.
const (
	envTracesExporter  = "OTEL_TRACES_EXPORTER"
	envMetricsExporter = "OTEL_METRICS_EXPORTER"
	envSampler         = "OTEL_TRACES_SAMPLER"
)

// Providers are the SDK providers Setup built. Pass them to pipeline.Config (and to
// instrumentation such as otelhttp); call Shutdown before exiting to flush.
type Providers struct {
	TracerProvider *sdktrace.TracerProvider
	MeterProvider  *sdkmetric.MeterProvider
	// TracesExporter and MetricsExporter name the exporters Setup built, for logs and
	// start-up banners: the Config's name ("otlp", "stdout"), the environment's
	// ("otlp", "console", "prometheus", or another name registered with autoexport),
	// or "none". Extra readers passed to Setup are not counted.
	TracesExporter  string
	MetricsExporter string
}

// Setup validates cfg and builds a TracerProvider (batch span processor, sampler,
// resource with service name and version) and a MeterProvider (periodic reader for the
// configured exporter, plus any extra readers such as a Prometheus exporter). With
// cfg.FromEnv the exporters come from the OTEL_* variables where they name one (see
// Config.FromEnv); a variable the OpenTelemetry packages refuse returns a *ConfigError
// naming it, its value and what is accepted, with their error as the cause, and so
// does an OTLP endpoint variable that is not an http:// or https:// URL (which the
// exporters would otherwise ignore). It never
// sets a global provider; the caller may. Exporters connect lazily, so Setup does not
// fail when the collector is down. On error nothing is left running.
func Setup(ctx context.Context, cfg Config, readers ...sdkmetric.Reader) (*Providers, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.FromEnv {
		for _, v := range endpointVars {
			if e := os.Getenv(v); e != "" {
				if err := checkEndpoint(v, e); err != nil {
					return nil, err
				}
			}
		}
	}
	res, err := newResource(ctx, cfg)
	if err != nil {
		return nil, err
	}
	p := &Providers{TracesExporter: ExporterNone, MetricsExporter: ExporterNone}
	topts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
	if cfg.Sampler != nil && !(cfg.FromEnv && os.Getenv(envSampler) != "") {
		topts = append(topts, sdktrace.WithSampler(cfg.Sampler))
	}
	exp, name, err := newSpanExporter(ctx, cfg)
	if err != nil {
		return nil, err
	}
	mopts := []sdkmetric.Option{sdkmetric.WithResource(res)}
	r, mname, err := newMetricReader(ctx, cfg)
	if err != nil {
		if exp != nil {
			err = errors.Join(err, exp.Shutdown(ctx))
		}
		return nil, err
	}
	// WithBatcher starts the batch processor's goroutine: only once nothing can fail.
	if exp != nil {
		p.TracesExporter = name
		topts = append(topts, sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(500*time.Millisecond)))
	}
	if r != nil {
		p.MetricsExporter = mname
		mopts = append(mopts, sdkmetric.WithReader(r))
	}
	for _, r := range readers {
		mopts = append(mopts, sdkmetric.WithReader(r))
	}
	p.TracerProvider = sdktrace.NewTracerProvider(topts...)
	p.MeterProvider = sdkmetric.NewMeterProvider(mopts...)
	return p, nil
}

// Shutdown flushes pending spans and metrics and stops the providers.
func (p *Providers) Shutdown(ctx context.Context) error {
	return errors.Join(p.TracerProvider.Shutdown(ctx), p.MeterProvider.Shutdown(ctx))
}

// newResource describes the service. The resource package reads OTEL_SERVICE_NAME
// and OTEL_RESOURCE_ATTRIBUTES; later sources win, so with FromEnv they come after the
// Config's attributes, and without it before them.
func newResource(ctx context.Context, cfg Config) (*resource.Resource, error) {
	name := cfg.ServiceName
	if name == "" {
		name = "rockline"
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", name)}
	if cfg.ServiceVersion != "" {
		attrs = append(attrs, attribute.String("service.version", cfg.ServiceVersion))
	}
	opts := []resource.Option{resource.WithTelemetrySDK(), resource.WithFromEnv(), resource.WithAttributes(attrs...)}
	if cfg.FromEnv {
		opts = []resource.Option{resource.WithTelemetrySDK(), resource.WithAttributes(attrs...), resource.WithFromEnv()}
	}
	res, err := resource.New(ctx, opts...)
	if err != nil {
		return nil, &ConfigError{Field: "OTEL_RESOURCE_ATTRIBUTES", Value: os.Getenv("OTEL_RESOURCE_ATTRIBUTES"), Expected: "comma-separated key=value pairs, values percent-encoded", Err: err}
	}
	return res, nil
}

// newSpanExporter returns the span exporter and its name, or nil for none. With
// FromEnv, autoexport builds it from OTEL_TRACES_EXPORTER; when that is unset, the
// fallback is the Config's exporter, or, if the Config names none and an OTLP endpoint
// variable is set, autoexport's default (OTLP, configured from the variables).
func newSpanExporter(ctx context.Context, cfg Config) (sdktrace.SpanExporter, string, error) {
	if !cfg.FromEnv {
		exp, err := configSpanExporter(ctx, cfg)
		return exp, cfg.TracesExporter, err
	}
	name, fromConfig := os.Getenv(envTracesExporter), false
	fallback := func(ctx context.Context) (sdktrace.SpanExporter, error) {
		if cfg.TracesExporter == "" && (os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "") {
			name = ExporterOTLP
			return autoexport.NewSpanExporter(ctx) // the variable is unset: autoexport's default, otlp
		}
		name, fromConfig = cfg.TracesExporter, true
		return configSpanExporter(ctx, cfg)
	}
	exp, err := autoexport.NewSpanExporter(ctx, autoexport.WithFallbackSpanExporter(fallback))
	if err != nil {
		if fromConfig {
			return nil, "", err
		}
		return nil, "", envError(envTracesExporter, name, "TRACES", []string{"otlp", "console", "none"}, err)
	}
	if exp == nil || autoexport.IsNoneSpanExporter(exp) {
		return nil, "", nil
	}
	return exp, name, nil
}

// newMetricReader returns the metric reader and its exporter's name, or nil for none.
// With FromEnv, autoexport builds it from OTEL_METRICS_EXPORTER; when that is unset,
// the fallback is the Config's exporter.
func newMetricReader(ctx context.Context, cfg Config) (sdkmetric.Reader, string, error) {
	if !cfg.FromEnv {
		r, err := configMetricReader(ctx, cfg)
		return r, cfg.MetricsExporter, err
	}
	name, fromConfig := os.Getenv(envMetricsExporter), false
	fallback := func(ctx context.Context) (sdkmetric.Reader, error) {
		name, fromConfig = cfg.MetricsExporter, true
		return configMetricReader(ctx, cfg)
	}
	r, err := autoexport.NewMetricReader(ctx, autoexport.WithFallbackMetricReader(fallback))
	if err != nil {
		if fromConfig {
			return nil, "", err
		}
		return nil, "", envError(envMetricsExporter, name, "METRICS", []string{"otlp", "console", "prometheus", "none"}, err)
	}
	if r == nil || autoexport.IsNoneMetricReader(r) {
		return nil, "", nil
	}
	return r, name, nil
}

// envError turns autoexport's error, which names no variable, into a *ConfigError
// that does: the OTLP protocol variable in effect when it holds a protocol autoexport
// does not know, else the exporter variable. name is the exporter autoexport was
// asked for (the variable's value, or otlp, its default). known lists the exporter
// names autoexport registers itself; an application may register more.
func envError(exporterVar, name, signal string, known []string, err error) error {
	if name == ExporterOTLP {
		for _, v := range []string{"OTEL_EXPORTER_OTLP_" + signal + "_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
			if proto := os.Getenv(v); proto != "" {
				if proto != ProtocolGRPC && proto != ProtocolHTTP {
					return &ConfigError{Field: v, Value: proto, Expected: `"grpc" or "http/protobuf"`, Err: err}
				}
				break // the one autoexport uses
			}
		}
	}
	value := os.Getenv(exporterVar)
	if !slices.Contains(known, name) {
		return &ConfigError{Field: exporterVar, Value: value, Expected: oneOf(known) + ", or a name registered with autoexport", Err: err}
	}
	return &ConfigError{Field: exporterVar, Value: value, Expected: "an exporter that autoexport can build from the OTEL_* variables", Err: err}
}

// oneOf renders names as `"a", "b" or "c"`.
func oneOf(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	if len(q) < 2 {
		return strings.Join(q, "")
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

// configSpanExporter builds the span exporter the Config names, or nil for none.
func configSpanExporter(ctx context.Context, cfg Config) (sdktrace.SpanExporter, error) {
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

// configMetricReader builds the reader for the metrics exporter the Config names, or
// nil for none.
func configMetricReader(ctx context.Context, cfg Config) (sdkmetric.Reader, error) {
	var exp sdkmetric.Exporter
	var err error
	switch cfg.MetricsExporter {
	case ExporterPrometheus:
		return prometheusReader(ctx)
	case ExporterStdout:
		exp, err = stdoutmetric.New(stdoutmetric.WithWriter(stdout(cfg)))
	case ExporterOTLP:
		base := endpoint(cfg)
		if cfg.Protocol == ProtocolHTTP {
			exp, err = otlpmetrichttp.New(ctx, otlpmetrichttp.WithEndpointURL(joinPath(base, "/v1/metrics")))
		} else {
			exp, err = otlpmetricgrpc.New(ctx, otlpmetricgrpc.WithEndpointURL(base))
		}
	default:
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return sdkmetric.NewPeriodicReader(exp), nil
}

// prometheusReader builds the Prometheus scrape endpoint with the contrib autoexport
// package, which reads OTEL_EXPORTER_PROMETHEUS_HOST and _PORT and serves /metrics;
// it needs OTEL_METRICS_EXPORTER=prometheus, which is how the specification asks for
// it. (An application that serves /metrics itself passes its own reader to Setup.)
func prometheusReader(ctx context.Context) (sdkmetric.Reader, error) {
	if v := os.Getenv(envMetricsExporter); v != ExporterPrometheus {
		return nil, &ConfigError{Field: "Config.MetricsExporter", Value: ExporterPrometheus,
			Expected: fmt.Sprintf("OTEL_METRICS_EXPORTER=prometheus in the environment, which sets the Prometheus exporter up (it is %q), or a Prometheus reader passed to Setup", v)}
	}
	r, err := autoexport.NewMetricReader(ctx)
	if err != nil {
		return nil, &ConfigError{Field: "OTEL_EXPORTER_PROMETHEUS_PORT", Value: os.Getenv("OTEL_EXPORTER_PROMETHEUS_PORT"), Expected: "a port the Prometheus exporter can serve on", Err: err}
	}
	return r, nil
}

// endpoint returns the OTLP base URL for the Config's protocol.
func endpoint(cfg Config) string {
	if cfg.Endpoint != "" {
		return cfg.Endpoint
	}
	if cfg.Protocol == ProtocolHTTP {
		return "http://localhost:4318"
	}
	return "http://localhost:4317"
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
