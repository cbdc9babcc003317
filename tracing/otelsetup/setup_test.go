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
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"go.uber.org/goleak"

	"github.com/rockline/rockline/tracing"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// otelVars are the variables the tests set; each test starts with all of them empty,
// which the OpenTelemetry packages treat as unset, whatever the environment of the test
// run holds.
var otelVars = []string{
	"OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES",
	"OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER",
	"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
	"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL",
	"OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG", "OTEL_METRICS_PRODUCERS",
}

func setEnv(t *testing.T, env map[string]string) {
	t.Helper()
	for _, k := range otelVars {
		t.Setenv(k, "")
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
}

// setupFromEnv runs ConfigFromEnv(base) and Setup under env.
func setupFromEnv(t *testing.T, base Config, env map[string]string) (*Providers, error) {
	t.Helper()
	setEnv(t, env)
	cfg, err := ConfigFromEnv(base)
	if err != nil {
		t.Fatalf("ConfigFromEnv: %v", err)
	}
	if !cfg.FromEnv {
		t.Fatal("ConfigFromEnv did not set FromEnv")
	}
	return Setup(context.Background(), cfg)
}

// emit records one span and one counter increment, then shuts p down (flushing both).
func emit(t *testing.T, p *Providers) {
	t.Helper()
	_, span := p.TracerProvider.Tracer("test").Start(context.Background(), tracing.SpanCommit)
	span.End()
	counter, err := p.MeterProvider.Meter("test").Int64Counter("rockline.test")
	if err != nil {
		t.Fatal(err)
	}
	counter.Add(context.Background(), 1)
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// collector is a real HTTP server on loopback counting OTLP/HTTP exports by signal.
type collector struct {
	*httptest.Server
	traces, metrics atomic.Int32
}

func newCollector(t *testing.T) *collector {
	c := &collector{}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Content-Type") != "application/x-protobuf" {
			t.Errorf("content type %q", r.Header.Get("Content-Type"))
		}
		switch r.URL.Path {
		case "/v1/traces":
			c.traces.Add(1)
		case "/v1/metrics":
			c.metrics.Add(1)
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(c.Close)
	return c
}

// Every Config field is checked by Validate, by ConfigFromEnv and by Setup, each
// returning a *ConfigError naming the field.
func TestConfigInvalid(t *testing.T) {
	for _, tc := range []struct {
		cfg   Config
		field string
		value any
	}{
		{Config{TracesExporter: "zipkin"}, "Config.TracesExporter", "zipkin"},
		{Config{TracesExporter: ExporterPrometheus}, "Config.TracesExporter", ExporterPrometheus},
		{Config{MetricsExporter: "prom"}, "Config.MetricsExporter", "prom"},
		{Config{Protocol: "http/json"}, "Config.Protocol", "http/json"},
		{Config{Endpoint: "127.0.0.1:4317"}, "Config.Endpoint", "127.0.0.1:4317"},
		{Config{Endpoint: "http://"}, "Config.Endpoint", "http://"},
	} {
		t.Run(tc.field+"="+fmt.Sprint(tc.value), func(t *testing.T) {
			_, fromEnvErr := ConfigFromEnv(tc.cfg)
			_, setupErr := Setup(context.Background(), tc.cfg)
			for _, err := range []error{tc.cfg.Validate(), fromEnvErr, setupErr} {
				var ce *ConfigError
				if !errors.As(err, &ce) || ce.Field != tc.field || ce.Value != tc.value || !errors.Is(err, ErrInvalidConfig) {
					t.Fatalf("error %v; want a *ConfigError naming %s = %v", err, tc.field, tc.value)
				}
				if !strings.HasPrefix(err.Error(), "rockline: "+tc.field+" = ") || ce.Expected == "" {
					t.Errorf("message %q does not name the field and what was expected", err)
				}
			}
		})
	}
}

// With nothing set, a Config from the environment exports nothing, as the zero Config
// does (not OTLP to localhost, autoexport's default); with nothing set but the Config's
// exporter, that one is used.
func TestFromEnvUnsetFallsBackToConfig(t *testing.T) {
	var out bytes.Buffer
	p, err := setupFromEnv(t, Config{Stdout: &out}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.TracesExporter != ExporterNone || p.MetricsExporter != ExporterNone {
		t.Errorf("exporters %q/%q; want none", p.TracesExporter, p.MetricsExporter)
	}
	emit(t, p)
	if out.Len() != 0 {
		t.Errorf("nothing configured, yet the stdout writer got:\n%.2000s", out.String())
	}

	p, err = setupFromEnv(t, Config{TracesExporter: ExporterStdout, MetricsExporter: ExporterStdout, Stdout: &out}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.TracesExporter != ExporterStdout || p.MetricsExporter != ExporterStdout {
		t.Errorf("exporters %q/%q; want the Config's stdout", p.TracesExporter, p.MetricsExporter)
	}
	emit(t, p)
	for _, want := range []string{tracing.SpanCommit, "rockline.test"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the Config's stdout exporters did not write %s:\n%.2000s", want, out.String())
		}
	}
}

// OTEL_*_EXPORTER=none wins over the Config's exporters.
func TestFromEnvNoneWinsOverConfig(t *testing.T) {
	var out bytes.Buffer
	p, err := setupFromEnv(t, Config{TracesExporter: ExporterStdout, MetricsExporter: ExporterStdout, Stdout: &out},
		map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none"})
	if err != nil {
		t.Fatal(err)
	}
	if p.TracesExporter != ExporterNone || p.MetricsExporter != ExporterNone {
		t.Errorf("exporters %q/%q; want none", p.TracesExporter, p.MetricsExporter)
	}
	emit(t, p)
	if out.Len() != 0 {
		t.Errorf("OTEL_*_EXPORTER=none, yet the Config's stdout exporters wrote:\n%.2000s", out.String())
	}
}

// autoexport builds real OTLP exporters from the variables: OTEL_EXPORTER_OTLP_ENDPOINT
// alone turns OTLP trace export on (and only trace export), in the specification's
// default protocol, http/protobuf; the exporter variables turn each signal on, over
// the Config's choice.
func TestFromEnvOTLP(t *testing.T) {
	t.Run("endpoint alone", func(t *testing.T) {
		c := newCollector(t)
		p, err := setupFromEnv(t, Config{}, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": c.URL})
		if err != nil {
			t.Fatal(err)
		}
		if p.TracesExporter != ExporterOTLP || p.MetricsExporter != ExporterNone {
			t.Errorf("exporters %q/%q; want otlp/none", p.TracesExporter, p.MetricsExporter)
		}
		emit(t, p)
		if c.traces.Load() == 0 || c.metrics.Load() != 0 {
			t.Fatalf("collector got %d trace and %d metric exports; want traces only", c.traces.Load(), c.metrics.Load())
		}
	})
	t.Run("exporter variables over the Config", func(t *testing.T) {
		c := newCollector(t)
		var out bytes.Buffer
		p, err := setupFromEnv(t, Config{TracesExporter: ExporterStdout, MetricsExporter: ExporterStdout, Protocol: ProtocolGRPC, Stdout: &out}, map[string]string{
			"OTEL_TRACES_EXPORTER":        "otlp",
			"OTEL_METRICS_EXPORTER":       "otlp",
			"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
			"OTEL_EXPORTER_OTLP_ENDPOINT": c.URL,
		})
		if err != nil {
			t.Fatal(err)
		}
		if p.TracesExporter != ExporterOTLP || p.MetricsExporter != ExporterOTLP {
			t.Errorf("exporters %q/%q; want otlp/otlp", p.TracesExporter, p.MetricsExporter)
		}
		emit(t, p)
		if c.traces.Load() == 0 || c.metrics.Load() == 0 {
			t.Fatalf("collector got %d trace and %d metric exports; want at least one of each", c.traces.Load(), c.metrics.Load())
		}
		if out.Len() != 0 {
			t.Errorf("the Config's stdout exporters wrote although the variables chose OTLP:\n%.2000s", out.String())
		}
	})
}

// OTEL_TRACES_EXPORTER=console and OTEL_METRICS_EXPORTER=console write to the process's
// standard output: autoexport's console exporters take os.Stdout when the package is
// loaded, so the test runs itself as a child process and reads the child's output.
func TestFromEnvConsole(t *testing.T) {
	if os.Getenv("ROCKLINE_OTELSETUP_CONSOLE_CHILD") == "1" {
		p, err := Setup(context.Background(), Config{ServiceName: "console-child", FromEnv: true})
		if err != nil {
			t.Fatal(err)
		}
		if p.TracesExporter != "console" || p.MetricsExporter != "console" {
			t.Errorf("exporters %q/%q; want console/console", p.TracesExporter, p.MetricsExporter)
		}
		emit(t, p)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestFromEnvConsole$", "-test.count=1")
	cmd.Env = append(os.Environ(), "ROCKLINE_OTELSETUP_CONSOLE_CHILD=1", "OTEL_TRACES_EXPORTER=console", "OTEL_METRICS_EXPORTER=console")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	for _, want := range []string{tracing.SpanCommit, `"console-child"`, "rockline.test"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the child's standard output lacks %s:\n%.3000s", want, out)
		}
	}
}

// A variable autoexport or the resource package refuses fails Setup with a *ConfigError
// naming the variable and its value, matching ErrInvalidConfig, with their error as the
// cause, and so does an OTLP endpoint variable that is not a URL (checked by Setup, as
// the exporters would ignore it); nothing is left running (goleak checks, in TestMain: the one case builds a
// gRPC span exporter before the metrics variable fails).
func TestFromEnvInvalid(t *testing.T) {
	for _, tc := range []struct {
		name  string
		env   map[string]string
		field string
		value string
	}{
		{"unknown traces exporter", map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, "OTEL_TRACES_EXPORTER", "zipkin"},
		{"prometheus is for metrics only", map[string]string{"OTEL_TRACES_EXPORTER": "prometheus"}, "OTEL_TRACES_EXPORTER", "prometheus"},
		{"unknown metrics exporter", map[string]string{"OTEL_METRICS_EXPORTER": "prom"}, "OTEL_METRICS_EXPORTER", "prom"},
		{"bad protocol", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, "OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"},
		{"bad traces protocol", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "thrift"}, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "thrift"},
		{"bad protocol with the endpoint alone", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "udp"}, "OTEL_EXPORTER_OTLP_PROTOCOL", "udp"},
		{"bad metrics protocol", map[string]string{"OTEL_METRICS_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "json"}, "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "json"},
		{"metrics fail after traces were built", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc", "OTEL_METRICS_EXPORTER": "statsd"}, "OTEL_METRICS_EXPORTER", "statsd"},
		{"endpoint without a scheme", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "127.0.0.1:4318"}, "OTEL_EXPORTER_OTLP_ENDPOINT", "127.0.0.1:4318"},
		{"traces endpoint without a host", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://"}, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://"},
		{"resource attribute without a value", map[string]string{"OTEL_RESOURCE_ATTRIBUTES": "deployment.environment"}, "OTEL_RESOURCE_ATTRIBUTES", "deployment.environment"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := setupFromEnv(t, Config{}, tc.env)
			if err == nil {
				p.Shutdown(context.Background())
				t.Fatal("Setup succeeded")
			}
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Field != tc.field || ce.Value != tc.value || !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("Setup = %v; want a *ConfigError naming %s = %q", err, tc.field, tc.value)
			}
			if (ce.Err == nil && !strings.Contains(tc.field, "ENDPOINT")) || ce.Expected == "" {
				t.Errorf("%#v: want the OpenTelemetry package's error as the cause and what was expected", ce)
			}
			if want := fmt.Sprintf("rockline: %s = %q: expected ", tc.field, tc.value); !strings.HasPrefix(err.Error(), want) {
				t.Errorf("message %q does not start %q", err, want)
			}
		})
	}
}

// The sampler: the SDK reads OTEL_TRACES_SAMPLER (and _ARG) when the Config gives none;
// with FromEnv the variable wins over the Config's; without, the Config's wins.
func TestSampler(t *testing.T) {
	unsampledParent := trace.ContextWithRemoteSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}, Remote: true,
	}))
	for _, tc := range []struct {
		name      string
		env       map[string]string
		cfg       Config
		parent    context.Context
		recording bool
	}{
		{"always_on from the variable ignores the parent", map[string]string{"OTEL_TRACES_SAMPLER": "always_on"}, Config{}, unsampledParent, true},
		{"traceidratio 0 from the variables", map[string]string{"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0"}, Config{}, context.Background(), false},
		{"the Config's sampler", nil, Config{Sampler: sdktrace.NeverSample()}, context.Background(), false},
		{"the Config's sampler over the variable", map[string]string{"OTEL_TRACES_SAMPLER": "always_on"}, Config{Sampler: sdktrace.NeverSample()}, context.Background(), false},
		{"FromEnv: the variable over the Config's sampler", map[string]string{"OTEL_TRACES_SAMPLER": "always_off"}, Config{Sampler: sdktrace.AlwaysSample(), FromEnv: true}, context.Background(), false},
		{"FromEnv: the Config's sampler when the variable is unset", nil, Config{Sampler: sdktrace.AlwaysSample(), FromEnv: true}, unsampledParent, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			setEnv(t, tc.env)
			p, err := Setup(context.Background(), tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Shutdown(context.Background())
			_, span := p.TracerProvider.Tracer("test").Start(tc.parent, "span")
			defer span.End()
			if span.IsRecording() != tc.recording {
				t.Errorf("span recording = %v, want %v", span.IsRecording(), tc.recording)
			}
		})
	}
}

// With FromEnv, OTEL_SERVICE_NAME wins over Config.ServiceName; without, the Config's
// name wins.
func TestServiceName(t *testing.T) {
	for _, fromEnv := range []bool{true, false} {
		t.Run(fmt.Sprintf("FromEnv=%v", fromEnv), func(t *testing.T) {
			setEnv(t, map[string]string{"OTEL_SERVICE_NAME": "svc-from-env"})
			var out bytes.Buffer
			p, err := Setup(context.Background(), Config{ServiceName: "svc-from-config", TracesExporter: ExporterStdout, Stdout: &out, FromEnv: fromEnv})
			if err != nil {
				t.Fatal(err)
			}
			emit(t, p)
			want, not := `"svc-from-config"`, `"svc-from-env"`
			if fromEnv {
				want, not = not, want
			}
			if !strings.Contains(out.String(), want) || strings.Contains(out.String(), not) {
				t.Errorf("exported resource does not name %s alone:\n%.2000s", want, out.String())
			}
		})
	}
}

func TestSetupStdoutExportsSpansOnShutdown(t *testing.T) {
	setEnv(t, nil)
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

// A real OTLP/HTTP exporter built from the Config posts protobuf spans and metrics to
// a real HTTP server on loopback.
func TestSetupOTLPHTTPReachesCollector(t *testing.T) {
	setEnv(t, nil)
	c := newCollector(t)
	p, err := Setup(context.Background(), Config{TracesExporter: ExporterOTLP, MetricsExporter: ExporterOTLP, Protocol: ProtocolHTTP, Endpoint: c.URL})
	if err != nil {
		t.Fatal(err)
	}
	if p.TracesExporter != ExporterOTLP || p.MetricsExporter != ExporterOTLP {
		t.Errorf("exporters %q/%q; want otlp/otlp", p.TracesExporter, p.MetricsExporter)
	}
	emit(t, p)
	if c.traces.Load() == 0 || c.metrics.Load() == 0 {
		t.Fatalf("collector got %d trace and %d metric exports; want at least one of each", c.traces.Load(), c.metrics.Load())
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
	p, err := setupFromEnv(t, Config{}, map[string]string{
		"OTEL_METRICS_EXPORTER":         "prometheus",
		"OTEL_EXPORTER_PROMETHEUS_HOST": "127.0.0.1",
		"OTEL_EXPORTER_PROMETHEUS_PORT": strconv.Itoa(port),
	})
	if err != nil {
		t.Fatal(err)
	}
	if p.MetricsExporter != ExporterPrometheus {
		t.Errorf("metrics exporter %q, want prometheus", p.MetricsExporter)
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
	setEnv(t, nil)
	_, err := Setup(context.Background(), Config{MetricsExporter: ExporterPrometheus})
	var ce *ConfigError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "OTEL_METRICS_EXPORTER=prometheus") {
		t.Fatalf("Setup = %v; want a *ConfigError naming OTEL_METRICS_EXPORTER=prometheus", err)
	}
}

// OTEL_RESOURCE_ATTRIBUTES reaches the exported resource, and the default sampler is
// parent-based: the child of a remote parent that was not sampled is not recorded.
func TestSetupResourceFromEnvAndParentBasedSampler(t *testing.T) {
	setEnv(t, map[string]string{"OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=model-test"})
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
