package otelsetup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"go.uber.org/goleak"

	"github.com/rockline/rockline/tracing"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConfigFromEnv(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		wantVar string // empty: no error
		check   func(t *testing.T, c Config)
	}{
		{name: "empty means nothing exported", env: nil, check: func(t *testing.T, c Config) {
			if c.TracesExporter != "" || c.MetricsExporter != "" {
				t.Errorf("exporters %q/%q; want none", c.TracesExporter, c.MetricsExporter)
			}
		}},
		{name: "endpoint alone turns OTLP traces on", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317"}, check: func(t *testing.T, c Config) {
			if c.TracesExporter != ExporterOTLP || c.Endpoint != "http://127.0.0.1:4317" {
				t.Errorf("got %+v", c)
			}
		}},
		{name: "console is stdout", env: map[string]string{"OTEL_TRACES_EXPORTER": "console", "OTEL_SERVICE_NAME": "bank"}, check: func(t *testing.T, c Config) {
			if c.TracesExporter != ExporterStdout || c.ServiceName != "bank" {
				t.Errorf("got %+v", c)
			}
		}},
		{name: "ratio sampler", env: map[string]string{"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.25"}, check: func(t *testing.T, c Config) {
			if c.Sampler != "traceidratio" || c.SamplerArg != 0.25 {
				t.Errorf("got %+v", c)
			}
		}},
		{name: "bad protocol", env: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, wantVar: "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{name: "bad exporter", env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, wantVar: "OTEL_TRACES_EXPORTER"},
		{name: "bad metrics exporter", env: map[string]string{"OTEL_METRICS_EXPORTER": "prom"}, wantVar: "OTEL_METRICS_EXPORTER"},
		{name: "prometheus metrics", env: map[string]string{"OTEL_METRICS_EXPORTER": "prometheus"}, check: func(t *testing.T, c Config) {
			if c.MetricsExporter != ExporterPrometheus {
				t.Errorf("got %+v", c)
			}
		}},
		{name: "prometheus is for metrics only", env: map[string]string{"OTEL_TRACES_EXPORTER": "prometheus"}, wantVar: "OTEL_TRACES_EXPORTER"},
		{name: "endpoint without scheme", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "127.0.0.1:4317"}, wantVar: "OTEL_EXPORTER_OTLP_ENDPOINT"},
		{name: "bad sampler", env: map[string]string{"OTEL_TRACES_SAMPLER": "sometimes"}, wantVar: "OTEL_TRACES_SAMPLER"},
		{name: "sampler arg not a number", env: map[string]string{"OTEL_TRACES_SAMPLER_ARG": "half"}, wantVar: "OTEL_TRACES_SAMPLER_ARG"},
		{name: "sampler arg out of range", env: map[string]string{"OTEL_TRACES_SAMPLER_ARG": "1.5"}, wantVar: "OTEL_TRACES_SAMPLER_ARG"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := configFrom(Config{}, func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			if tc.wantVar == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				tc.check(t, c)
				return
			}
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Field != tc.wantVar || !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("error %v; want a *ConfigError naming %s", err, tc.wantVar)
			}
			if !strings.Contains(err.Error(), tc.wantVar) {
				t.Errorf("message %q does not name %s", err, tc.wantVar)
			}
		})
	}
}

func TestSetupStdoutExportsSpansOnShutdown(t *testing.T) {
	var out bytes.Buffer
	p, err := Setup(context.Background(), Config{TracesExporter: ExporterStdout, ServiceName: "svc", ServiceVersion: "1.2.3", Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	_, span := p.TracerProvider.Tracer("test").Start(context.Background(), tracing.SpanCommit)
	span.End()
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{tracing.SpanCommit, `"svc"`, `"1.2.3"`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("stdout export lacks %s:\n%s", want, out.String())
		}
	}
}

// A real OTLP/HTTP exporter posts protobuf spans to a real HTTP server on loopback.
func TestSetupOTLPHTTPReachesCollector(t *testing.T) {
	var traces, metrics atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Content-Type") != "application/x-protobuf" {
			t.Errorf("content type %q", r.Header.Get("Content-Type"))
		}
		switch r.URL.Path {
		case "/v1/traces":
			traces.Add(1)
		case "/v1/metrics":
			metrics.Add(1)
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	p, err := Setup(context.Background(), Config{TracesExporter: ExporterOTLP, MetricsExporter: ExporterOTLP, Protocol: ProtocolHTTP, Endpoint: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	_, span := p.TracerProvider.Tracer("test").Start(context.Background(), tracing.SpanCommit)
	span.End()
	counter, _ := p.MeterProvider.Meter("test").Int64Counter("rockline.test")
	counter.Add(context.Background(), 1)
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if traces.Load() == 0 || metrics.Load() == 0 {
		t.Fatalf("collector got %d trace and %d metric exports; want at least one of each", traces.Load(), metrics.Load())
	}
}

func TestSetupRejectsBadConfig(t *testing.T) {
	_, err := Setup(context.Background(), Config{TracesExporter: "jaeger"})
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Field != "Config.TracesExporter" {
		t.Fatalf("Setup = %v; want *ConfigError naming Config.TracesExporter", err)
	}
}

// OTEL_METRICS_EXPORTER=prometheus serves a real scrape endpoint on the host and port
// the environment names, which Shutdown closes.
func TestSetupPrometheusFromEnv(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	t.Setenv("OTEL_METRICS_EXPORTER", "prometheus")
	t.Setenv("OTEL_EXPORTER_PROMETHEUS_HOST", "127.0.0.1")
	t.Setenv("OTEL_EXPORTER_PROMETHEUS_PORT", strconv.Itoa(port))
	cfg, err := ConfigFromEnv(Config{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := Setup(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	counter, _ := p.MeterProvider.Meter("test").Int64Counter("rockline.scraped")
	counter.Add(context.Background(), 7)
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "rockline_scraped") {
		t.Errorf("scrape lacks rockline_scraped:\n%.2000s", body)
	}
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// Asked for in the Config without the environment, prometheus is a *ConfigError that
// says how to set it up.
func TestSetupPrometheusNeedsEnv(t *testing.T) {
	t.Setenv("OTEL_METRICS_EXPORTER", "")
	_, err := Setup(context.Background(), Config{MetricsExporter: ExporterPrometheus})
	var ce *ConfigError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "OTEL_METRICS_EXPORTER=prometheus") {
		t.Fatalf("Setup = %v; want a *ConfigError naming OTEL_METRICS_EXPORTER=prometheus", err)
	}
}

// OTEL_RESOURCE_ATTRIBUTES reaches the exported resource, and the default sampler is
// parent-based: the child of a remote parent that was not sampled is not recorded.
func TestSetupResourceFromEnvAndParentBasedSampler(t *testing.T) {
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=model-test")
	var out bytes.Buffer
	p, err := Setup(context.Background(), Config{TracesExporter: ExporterStdout, ServiceName: "svc", Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	tr := p.TracerProvider.Tracer("test")
	unsampled := trace.ContextWithRemoteSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}, Remote: true,
	}))
	_, child := tr.Start(unsampled, "child")
	if child.IsRecording() {
		t.Error("a child of an unsampled remote parent is recording: the default sampler is not parent-based")
	}
	child.End()
	_, root := tr.Start(context.Background(), tracing.SpanCommit)
	root.End()
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "model-test") {
		t.Errorf("stdout export lacks the resource attribute from OTEL_RESOURCE_ATTRIBUTES:\n%.2000s", out.String())
	}
}
