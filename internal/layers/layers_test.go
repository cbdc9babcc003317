package layers_test

import (
	"strings"
	"testing"

	"github.com/rockline/rockline/internal/layers"
)

// TestModuleLayers: no package of the core module imports against the layering (see
// package layers): storage at the bottom, pipeline's public API above it, the layers
// above that, the fx modules, commands, examples and tests on top.
func TestModuleLayers(t *testing.T) { layers.TestModule(t, layers.Module+"/...", 10) }

// TestCheck: the rules, on imports made up for the purpose, the three that ran the wrong
// way before the layering was enforced among them.
func TestCheck(t *testing.T) {
	const m = layers.Module + "/"
	for _, tc := range []struct {
		name     string
		importer string
		imports  []string
		want     string // a substring of the one violation; "" for none
	}{
		{"fx module imports a layer", "pipeline/pipelinefx", []string{"pipeline", "eventstore"}, "pipelinefx imports " + m + "eventstore: " + m + "eventstore (Layer) is above " + m + "pipeline (Front): an fx module wires its own package only"},
		{"fx module imports its package", "pipeline/pipelinefx", []string{"pipeline", "tracing"}, ""},
		{"fx module of an engine wires a store", "jetstream/jetstreamfx", []string{"jetstream", "eventstore"}, "(Layer) is above " + m + "jetstream (Engine)"},
		{"fx module imports storage", "pipeline/pipelinefx", []string{"pipeline", "storage"}, "behind the front"},
		{"otelsetup is not an fx module", "tracing/otelsetup", []string{"tracing", "eventstore"}, ""},
		{"layer imports storage", "eventstore", []string{"pipeline", "storage"}, "behind the front"},
		{"engine imports a layer", "jetstream", []string{"pipeline", "eventstore"}, "(Layer) is above"},
		{"engine imports the stream rules", "jetstream", []string{"pipeline", "eventstore/revision"}, ""},
		{"front imports a layer", "pipeline", []string{"eventstore"}, "(Layer) is above"},
		{"storage imports the front", "storage", []string{"pipeline"}, "(Front) is above"},
		{"layer imports a layer", "eventstore", []string{"partitioned"}, "not in layers.Allowed"},
		{"allowed pair", "partitioned", []string{"eventstore", "pipeline"}, ""},
		{"fx imports fx", "pipeline/pipelinefx", []string{"eventstore/eventstorefx"}, "not in layers.Allowed"},
		{"fx module of the event store", "eventstore/eventstorefx", []string{"eventstore", "pipeline"}, ""},
		{"apps share code", "test/e2e", []string{"examples/bank/bankapp", "storage", "eventstore"}, ""},
		{"unranked package", "newpkg", nil, "has no rank"},
		{"unranked import", "pipeline", []string{"eventstore/newpkg"}, "has no rank"},
		{"outside the module", "pipeline", []string{"fmt", "github.com/linxGnu/grocksdb"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := layers.Package{ImportPath: m + tc.importer}
			for _, imp := range tc.imports {
				if imp == "fmt" || strings.HasPrefix(imp, "github.com/") { // outside the module
					p.Imports = append(p.Imports, imp)
				} else {
					p.Imports = append(p.Imports, m+imp)
				}
			}
			vs := layers.Check([]layers.Package{p})
			switch {
			case tc.want == "" && len(vs) != 0:
				t.Errorf("Check = %v; want no violation", vs)
			case tc.want != "" && (len(vs) != 1 || !strings.Contains(vs[0].String(), tc.want)):
				t.Errorf("Check = %v; want one violation saying %q", vs, tc.want)
			}
		})
	}
}

func TestRankOf(t *testing.T) {
	for path, want := range map[string]layers.Rank{
		"storage":                   layers.Storage,
		"pipeline":                  layers.Front,
		"pipeline/pipelinefx":       layers.Wiring,
		"eventstore/revision":       layers.Base,
		"jetstream":                 layers.Engine,
		"jetstream/jetstreamfx":     layers.Wiring,
		"jetstream/examples/orders": layers.App,
		"examples/bank/bankapp":     layers.App,
		"test/conformance":          layers.App,
		"cmd/rockline":              layers.App,
	} {
		if got, ok := layers.RankOf(layers.Module + "/" + path); !ok || got != want {
			t.Errorf("RankOf(%s) = %v, %v; want %v", path, got, ok, want)
		}
	}
	for _, path := range []string{"github.com/rockline/rocklinex", "fmt", layers.Module + "/examplesx"} {
		if r, ok := layers.RankOf(path); ok {
			t.Errorf("RankOf(%s) = %v; want no rank", path, r)
		}
	}
}
