package jetstream_test

import (
	"os/exec"
	"testing"

	"github.com/rockline/rockline/internal/layers"
)

// TestModuleLayers: the jetstream module keeps to the core's layering (package
// internal/layers of the core): the engine (this package) imports pipeline and what is
// below it, never the event store or anything else above pipeline; jetstreamfx wires
// the engine's DB only; the examples and jstest are on top.
func TestModuleLayers(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH to list packages with")
	}
	pkgs, err := layers.List(gobin, ".", layers.Module+"/jetstream/...")
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < 3 {
		t.Fatalf("go list found %d packages of the jetstream module; want all", len(pkgs))
	}
	for _, v := range layers.Check(pkgs) {
		t.Error(v)
	}
}
