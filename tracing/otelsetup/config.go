// Package otelsetup builds OpenTelemetry SDK providers and exporters (OTLP for Jaeger
// and collectors, stdout, none, plus extra readers such as Prometheus) from a Config or
// the standard OTEL_* variables, for the examples and for services that embed
// rockline. The library never imports it: pipeline links the OpenTelemetry API only
// (see package tracing), so an application chooses its own SDK set-up, this one or
// another.
//
// The variables are read by the OpenTelemetry packages themselves, not here: the
// contrib autoexport package builds the exporters (OTEL_TRACES_EXPORTER,
// OTEL_METRICS_EXPORTER, OTEL_EXPORTER_OTLP_*, OTEL_EXPORTER_PROMETHEUS_*), the SDK
// reads OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG, and the resource package reads
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES. What stays rockline's own is the
// default when no exporter variable is set (no export at all, rather than OTLP to
// localhost), and one check: an OTLP endpoint variable must be an http:// or https://
// URL, which the exporters would otherwise ignore, sending to localhost.
package otelsetup

import (
	"io"
	"net/url"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/rockline/rockline/internal/settings"
)

// Exporter names for Config.TracesExporter and Config.MetricsExporter.
const (
	ExporterOTLP   = "otlp"
	ExporterStdout = "stdout"
	ExporterNone   = "none"
	// ExporterPrometheus (metrics only) serves a Prometheus scrape endpoint, set up by
	// the OpenTelemetry contrib autoexport package from OTEL_METRICS_EXPORTER=prometheus
	// and OTEL_EXPORTER_PROMETHEUS_HOST / _PORT (default localhost:9464).
	ExporterPrometheus = "prometheus"
)

// OTLP protocols for Config.Protocol.
const (
	ProtocolGRPC = "grpc"
	ProtocolHTTP = "http/protobuf"
)

// Config describes the exporters Setup builds. The zero value exports nothing.
type Config struct {
	// ServiceName and ServiceVersion are the resource's service.name (default
	// "rockline") and service.version. With FromEnv, OTEL_SERVICE_NAME and
	// OTEL_RESOURCE_ATTRIBUTES override them; without, they override the variables.
	ServiceName    string
	ServiceVersion string
	// TracesExporter and MetricsExporter are "otlp", "stdout" or "none" (default);
	// MetricsExporter may also be "prometheus" when OTEL_METRICS_EXPORTER says so
	// (see ExporterPrometheus). With FromEnv they are the fallback used when the
	// environment names no exporter.
	TracesExporter  string
	MetricsExporter string
	// Protocol is the OTLP protocol of the exporters built from this Config: "grpc"
	// (default, port 4317) or "http/protobuf" (port 4318). (Exporters built from the
	// environment default to http/protobuf, as the specification has it.)
	Protocol string
	// Endpoint is the OTLP base URL, e.g. "http://127.0.0.1:4317"; "http://" means no
	// TLS. Empty means the protocol's default on localhost.
	Endpoint string
	// Sampler samples the spans. nil leaves it to the SDK: OTEL_TRACES_SAMPLER and
	// OTEL_TRACES_SAMPLER_ARG when set, else parent-based always-on, as the
	// specification has it. With FromEnv, a set OTEL_TRACES_SAMPLER wins over Sampler.
	Sampler sdktrace.Sampler
	// Stdout receives the output of the "stdout" exporters built from this Config
	// (default os.Stdout). The "console" exporters autoexport builds from the
	// environment write to os.Stdout.
	Stdout io.Writer
	// FromEnv makes the standard OTEL_* variables win over the fields above (see
	// ConfigFromEnv, which sets it). For each signal, when OTEL_TRACES_EXPORTER
	// (OTEL_METRICS_EXPORTER) is set, the contrib autoexport package builds the
	// exporter from the variables alone; when it is not, the field above applies, and
	// for traces an unset TracesExporter with OTEL_EXPORTER_OTLP_ENDPOINT or
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT set means OTLP.
	FromEnv bool
}

// ErrInvalidConfig is matched by every *ConfigError. It is the sentinel of every
// rockline package (pipeline.ErrInvalidConfig and the others) too.
var ErrInvalidConfig = settings.ErrInvalid

// ConfigError names a refused setting: Field is the environment variable
// ("OTEL_EXPORTER_OTLP_PROTOCOL") or the Config field ("Config.Protocol"), Value the
// value given and Expected what is accepted; Err is the cause when an OpenTelemetry
// package refused the value first, else nil. Its message reads
// `rockline: <Field> = <Value>: expected <Expected>` and it matches ErrInvalidConfig.
//
// It is one type shared by every rockline package: pipeline.ConfigError,
// storage.ConfigError and lanes.ConfigError are the same type.
type ConfigError = settings.Error

// Validate checks every field and returns the first problem as a *ConfigError whose
// Field is "Config.<Field>". It reads no environment variable: with FromEnv, the
// variables are checked by Setup, as the exporters are built from them.
func (c Config) Validate() error {
	switch c.TracesExporter {
	case "", ExporterOTLP, ExporterStdout, ExporterNone:
	default:
		return &ConfigError{Field: "Config.TracesExporter", Value: c.TracesExporter, Expected: `"otlp", "stdout" or "none"`}
	}
	switch c.MetricsExporter {
	case "", ExporterOTLP, ExporterStdout, ExporterNone, ExporterPrometheus:
	default:
		return &ConfigError{Field: "Config.MetricsExporter", Value: c.MetricsExporter, Expected: `"otlp", "stdout", "prometheus" or "none"`}
	}
	switch c.Protocol {
	case "", ProtocolGRPC, ProtocolHTTP:
	default:
		return &ConfigError{Field: "Config.Protocol", Value: c.Protocol, Expected: `"grpc" or "http/protobuf"`}
	}
	if c.Endpoint != "" {
		return checkEndpoint("Config.Endpoint", c.Endpoint)
	}
	return nil
}

// endpointVars are the OTLP endpoint variables. They are the one thing Setup checks
// itself: the OTLP exporters report an endpoint that is not a URL to OpenTelemetry's
// error handler only, and then send to localhost instead.
var endpointVars = []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"}

// checkEndpoint returns a *ConfigError for field unless v is an http:// or https://
// URL with a host, as the specification requires of an OTLP endpoint.
func checkEndpoint(field, v string) error {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return &ConfigError{Field: field, Value: v, Expected: "an http:// or https:// URL with a host, e.g. http://127.0.0.1:4318", Err: err}
	}
	return nil
}

// ConfigFromEnv returns base with FromEnv set, so that Setup lets the standard
// OTEL_* variables win over base's fields, and base's own Validate error. It reads
// no variable itself: the OpenTelemetry packages read them when Setup builds the
// providers (see the package documentation and Config.FromEnv), and a variable they
// refuse fails Setup with a *ConfigError naming it.
func ConfigFromEnv(base Config) (Config, error) {
	base.FromEnv = true
	return base, base.Validate()
}
