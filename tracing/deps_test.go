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
	libs := []string{"pipeline", "pipeline/pipelinefx", "eventstore", "eventstore/eventstorefx", "eventstore/revision", "partitioned", "storage", "validators", "lanes", "tracing"}
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

// TestCoreModuleRequiresNoNATS: the core's go.mod requires neither NATS nor the
// harness's own dependencies (Badger, pgx, gonum/plot): those are in the jetstream and
// test/bench modules, so an application on the local engine never downloads them.
func TestCoreModuleRequiresNoNATS(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH to list modules with")
	}
	out, err := exec.Command(gobin, "list", "-m", "all").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -m all: %v\n%s", err, out)
	}
	for _, mod := range strings.Split(string(out), "\n") {
		for _, banned := range []string{"github.com/nats-io/", "github.com/dgraph-io/badger", "github.com/jackc/pgx", "gonum.org/v1/plot"} {
			if strings.HasPrefix(mod, banned) {
				t.Errorf("the core module's graph holds %s", mod)
			}
		}
	}
}
