package otelsetup

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

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
			var se *SettingError
			if !errors.As(err, &se) || se.Name != tc.wantVar || !errors.Is(err, ErrInvalidSetting) {
				t.Fatalf("error %v; want a *SettingError naming %s", err, tc.wantVar)
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
	var se *SettingError
	if !errors.As(err, &se) || se.Name != "Config.TracesExporter" {
		t.Fatalf("Setup = %v; want *SettingError naming Config.TracesExporter", err)
	}
}
