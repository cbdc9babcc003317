package e2e

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
)

// jaegerPorts are the loopback ports a test Jaeger listens on.
type jaegerPorts struct {
	OTLPGRPC, OTLPHTTP, QueryHTTP, QueryGRPC, Health int
}

// jaegerConfig is a Jaeger v2 (OpenTelemetry Collector) configuration with every
// listener on 127.0.0.1, in-memory storage, no self-tracing and no internal metrics
// endpoint (which would otherwise listen on :8888).
const jaegerConfig = `service:
  extensions: [jaeger_storage, jaeger_query, healthcheckv2]
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [jaeger_storage_exporter]
  telemetry:
    resource:
      service.name: jaeger
    metrics:
      level: none
    logs:
      level: info

extensions:
  healthcheckv2:
    use_v2: true
    http:
      endpoint: 127.0.0.1:%[5]d
  jaeger_query:
    storage:
      traces: memstore
    enable_tracing: false
    http:
      endpoint: 127.0.0.1:%[3]d
    grpc:
      endpoint: 127.0.0.1:%[4]d
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 10000

receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:%[1]d
      http:
        endpoint: 127.0.0.1:%[2]d

exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
`

// writeJaegerConfig picks free loopback ports and writes the config into a temporary
// folder of t, returning its path and the ports.
func writeJaegerConfig(t *testing.T) (string, jaegerPorts) {
	t.Helper()
	ps := freePorts(t, 5)
	p := jaegerPorts{OTLPGRPC: ps[0], OTLPHTTP: ps[1], QueryHTTP: ps[2], QueryGRPC: ps[3], Health: ps[4]}
	path := filepath.Join(t.TempDir(), "jaeger.yaml")
	cfg := fmt.Sprintf(jaegerConfig, p.OTLPGRPC, p.OTLPHTTP, p.QueryHTTP, p.QueryGRPC, p.Health)
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, p
}

// freePorts returns n distinct ports that were free on 127.0.0.1 a moment ago (all
// listeners are held until every port is picked, so they differ).
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports
}
