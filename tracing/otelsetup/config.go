// Package otelsetup builds OpenTelemetry SDK providers and exporters (OTLP for Jaeger
// and collectors, stdout, none, plus extra readers such as Prometheus) from a Config or
// the standard OTEL_* variables, for the examples and for services that embed
// rockline. The library never imports it: pipeline links the OpenTelemetry API only
// (see package tracing), so an application chooses its own SDK set-up, this one or
// another.
package otelsetup

import (
	"io"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"

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
	ServiceName    string // resource service.name (default "rockline")
	ServiceVersion string // resource service.version
	// TracesExporter and MetricsExporter are "otlp", "stdout" or "none" (default);
	// MetricsExporter may also be "prometheus" when OTEL_METRICS_EXPORTER says so
	// (see ExporterPrometheus).
	TracesExporter  string
	MetricsExporter string
	// Protocol is the OTLP protocol: "grpc" (default, port 4317) or "http/protobuf"
	// (port 4318).
	Protocol string
	// Endpoint is the OTLP base URL, e.g. "http://127.0.0.1:4317"; "http://" means no
	// TLS. Empty means the protocol's default on localhost.
	Endpoint string
	// Sampler is an OTEL_TRACES_SAMPLER name: parentbased_always_on (the default, as
	// the specification has it), parentbased_always_off, parentbased_traceidratio,
	// always_on, always_off, traceidratio. SamplerArg is the ratio for the
	// *traceidratio ones.
	Sampler    string
	SamplerArg float64
	// Stdout receives the stdout exporters' output (default os.Stdout).
	Stdout io.Writer
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

var samplers = []string{"always_on", "always_off", "traceidratio", "parentbased_always_on", "parentbased_always_off", "parentbased_traceidratio"}

// Validate checks every field and returns the first problem as a *ConfigError whose
// Field is "Config.<Field>".
func (c Config) Validate() error { return c.validate(func(f string) string { return "Config." + f }) }

func (c Config) validate(name func(field string) string) error {
	switch c.TracesExporter {
	case "", ExporterOTLP, ExporterStdout, ExporterNone:
	default:
		return &ConfigError{Field: name("TracesExporter"), Value: c.TracesExporter, Expected: `"otlp", "stdout" or "none"`}
	}
	switch c.MetricsExporter {
	case "", ExporterOTLP, ExporterStdout, ExporterNone, ExporterPrometheus:
	default:
		return &ConfigError{Field: name("MetricsExporter"), Value: c.MetricsExporter, Expected: `"otlp", "stdout", "prometheus" or "none"`}
	}
	switch c.Protocol {
	case "", ProtocolGRPC, ProtocolHTTP:
	default:
		return &ConfigError{Field: name("Protocol"), Value: c.Protocol, Expected: `"grpc" or "http/protobuf"`}
	}
	if c.Endpoint != "" {
		u, err := url.Parse(c.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return &ConfigError{Field: name("Endpoint"), Value: c.Endpoint, Expected: "an http:// or https:// URL with a host, e.g. http://127.0.0.1:4317"}
		}
	}
	if c.Sampler != "" && !slices.Contains(samplers, c.Sampler) {
		return &ConfigError{Field: name("Sampler"), Value: c.Sampler, Expected: "one of " + strings.Join(samplers, ", ")}
	}
	if c.SamplerArg < 0 || c.SamplerArg > 1 {
		return &ConfigError{Field: name("SamplerArg"), Value: c.SamplerArg, Expected: "a ratio between 0 and 1"}
	}
	return nil
}

// envNames maps Config fields to the standard variables ConfigFromEnv reads.
var envNames = map[string]string{
	"ServiceName":     "OTEL_SERVICE_NAME",
	"TracesExporter":  "OTEL_TRACES_EXPORTER",
	"MetricsExporter": "OTEL_METRICS_EXPORTER",
	"Protocol":        "OTEL_EXPORTER_OTLP_PROTOCOL",
	"Endpoint":        "OTEL_EXPORTER_OTLP_ENDPOINT",
	"Sampler":         "OTEL_TRACES_SAMPLER",
	"SamplerArg":      "OTEL_TRACES_SAMPLER_ARG",
}

// ConfigFromEnv reads the standard OTEL_* variables over base: OTEL_SERVICE_NAME,
// OTEL_TRACES_EXPORTER and OTEL_METRICS_EXPORTER ("otlp", "console" or "stdout",
// "none", and "prometheus" for metrics), OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_PROTOCOL ("grpc",
// "http/protobuf"), OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG. Setting
// OTEL_EXPORTER_OTLP_ENDPOINT alone turns OTLP trace export on. A bad value returns a
// *ConfigError naming the variable.
func ConfigFromEnv(base Config) (Config, error) {
	return configFrom(base, os.LookupEnv)
}

func configFrom(c Config, lookup func(string) (string, bool)) (Config, error) {
	get := func(field string, dst *string) {
		if v, ok := lookup(envNames[field]); ok && v != "" {
			*dst = strings.TrimSpace(v)
		}
	}
	get("ServiceName", &c.ServiceName)
	get("TracesExporter", &c.TracesExporter)
	get("MetricsExporter", &c.MetricsExporter)
	get("Protocol", &c.Protocol)
	get("Endpoint", &c.Endpoint)
	get("Sampler", &c.Sampler)
	if c.TracesExporter == "console" {
		c.TracesExporter = ExporterStdout
	}
	if c.MetricsExporter == "console" {
		c.MetricsExporter = ExporterStdout
	}
	if _, set := lookup(envNames["TracesExporter"]); !set && c.TracesExporter == "" && c.Endpoint != "" {
		c.TracesExporter = ExporterOTLP
	}
	if v, ok := lookup(envNames["SamplerArg"]); ok && v != "" {
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil {
			return c, &ConfigError{Field: envNames["SamplerArg"], Value: v, Expected: "a number between 0 and 1", Err: err}
		}
		c.SamplerArg = f
	}
	return c, c.validate(func(f string) string { return envNames[f] })
}
