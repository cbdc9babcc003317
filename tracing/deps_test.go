package tracing_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLibraryLinksAPIOnly: the library's packages link the OpenTelemetry API and
// nothing of the SDK, its exporters or gRPC; those belong to tracing/otelsetup, which
// only applications import.
func TestLibraryLinksAPIOnly(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH to list dependencies with")
	}
	libs := []string{"pipeline", "pipeline/pipelinefx", "eventstore", "storage", "validators", "lanes", "tracing"}
	for _, lib := range libs {
		out, err := exec.Command(gobin, "list", "-deps", "github.com/rockline/rockline/"+lib).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", lib, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, banned := range []string{"go.opentelemetry.io/otel/sdk", "go.opentelemetry.io/otel/exporters", "google.golang.org/grpc", "github.com/nats-io"} {
				if strings.HasPrefix(dep, banned) {
					t.Errorf("%s links %s", lib, dep)
				}
			}
		}
	}
}
