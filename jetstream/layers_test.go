package jetstream_test

import (
	"testing"

	"github.com/rockline/rockline/internal/layers"
)

// TestModuleLayers: the jetstream module keeps to the core's layering (package
// internal/layers of the core): the engine (this package) imports pipeline and what is
// below it, never the event store or anything else above pipeline; jetstreamfx wires
// the engine's DB only; the examples and jstest are on top.
func TestModuleLayers(t *testing.T) { layers.TestModule(t, layers.Module+"/jetstream/...", 3) }
