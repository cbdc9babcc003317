#!/usr/bin/env bash
# make jaeger-demo: start Jaeger on loopback (in-memory storage, no self-tracing), run
# the bank service with a 5-second load exporting OTLP/HTTP (the specification's
# default protocol, which autoexport follows) to it, and print the slowest
# trace as a tree read from Jaeger's query API. Jaeger is stopped by its process id.
set -euo pipefail
bin=${1:?usage: demo.sh JAEGER_BIN}
dir=$(mktemp -d)
cleanup() {
  if [ -n "${pid:-}" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$dir"
}
trap cleanup EXIT

cat > "$dir/jaeger.yaml" <<'YAML'
service:
  extensions: [jaeger_storage, jaeger_query, healthcheckv2]
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
extensions:
  healthcheckv2:
    use_v2: true
    http:
      endpoint: 127.0.0.1:13133
  jaeger_query:
    storage:
      traces: memstore
    enable_tracing: false
    http:
      endpoint: 127.0.0.1:16686
    grpc:
      endpoint: 127.0.0.1:16685
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 10000
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:4317
      http:
        endpoint: 127.0.0.1:4318
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
YAML

"$bin" --config "file:$dir/jaeger.yaml" > "$dir/jaeger.log" 2>&1 &
pid=$!
for _ in $(seq 1 300); do
  if (exec 3<>/dev/tcp/127.0.0.1/4318) 2>/dev/null && (exec 3<>/dev/tcp/127.0.0.1/16686) 2>/dev/null; then break; fi
  kill -0 "$pid" 2>/dev/null || { echo "jaeger exited:"; cat "$dir/jaeger.log"; exit 1; }
  sleep 0.1
done
echo "jaeger $pid listening on 127.0.0.1 (OTLP 4317/4318, query 16686)"

OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 OTEL_SERVICE_NAME=bank \
  go run ./examples/bank -addr 127.0.0.1:0 -load 5s
echo
echo "slowest bank trace, from Jaeger's query API:"
go run ./examples/traces -query http://127.0.0.1:16686 -service bank
