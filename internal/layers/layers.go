// Package layers states which way rockline's imports may point, and checks it.
//
// Every package of the core module, and of the modules beside it whose import paths
// start with the core's (jetstream), has a rank. From the bottom:
//
//	Base     helpers that import nothing of the module: internal/settings,
//	         internal/storagefaults, internal/logentry, internal/layers, tracing,
//	         eventstore/revision (the stream rules the event store shares with engines)
//	Storage  storage (RocksDB), internal/testhooks
//	Local    the local engine's parts: validators, lanes
//	Front    pipeline, the public API every layer is built on
//	Engine   engines in their own modules that implement pipeline.Engine: jetstream
//	Layer    eventstore, partitioned
//	Wiring   the fx modules (pipeline/pipelinefx, eventstore/eventstorefx,
//	         jetstream/jetstreamfx) and tracing/otelsetup
//	App      cmd, examples, test, jetstream/examples, jetstream/jstest
//
// The rules, over the packages' own (non-test) imports:
//
//   - a package imports only packages of a lower rank;
//   - within a rank, only the pairs in Allowed (and anything at App: applications and
//     tests share code);
//   - Storage and Local sit behind the Front: only Front, the ranks below it and App
//     import them, so a layer, an engine or an fx module uses pipeline's errors and
//     limits, not storage's;
//   - an fx module (a package P/Pfx) wires its own package P only: it imports nothing
//     ranked above P, so pipelinefx provides pipeline's DB and not the event store
//     (eventstorefx does);
//   - a package of the module without a rank is a failure too, so a new package is
//     placed on purpose.
//
// Tests may import upward (pipeline's external tests run the event store); the build
// itself does not.
package layers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"sort"
	"strings"
)

// Module is the core module's path; every package checked lives under it.
const Module = "github.com/rockline/rockline"

// Rank is a package's height in the layering.
type Rank int

// The ranks, bottom first.
const (
	Base Rank = iota
	Storage
	Local
	Front
	Engine
	Layer
	Wiring
	App
)

var rankNames = [...]string{"Base", "Storage", "Local", "Front", "Engine", "Layer", "Wiring", "App"}

func (r Rank) String() string {
	if r < 0 || int(r) >= len(rankNames) {
		return fmt.Sprintf("Rank(%d)", int(r))
	}
	return rankNames[r]
}

// ranks places the module's packages, by path relative to Module; a trailing "/..."
// covers the folder and everything under it. The longest match wins.
var ranks = map[string]Rank{
	"internal/settings":      Base,
	"internal/storagefaults": Base,
	"internal/logentry":      Base,
	"internal/layers":        Base,
	"tracing":                Base,
	"eventstore/revision":    Base,

	"storage":            Storage,
	"internal/testhooks": Storage,

	"validators": Local,
	"lanes":      Local,

	"pipeline": Front,

	"jetstream": Engine,

	"eventstore":  Layer,
	"partitioned": Layer,

	"pipeline/pipelinefx":     Wiring,
	"eventstore/eventstorefx": Wiring,
	"jetstream/jetstreamfx":   Wiring,
	"tracing/otelsetup":       Wiring,

	"cmd/...":                App,
	"examples/...":           App,
	"test/...":               App,
	"jetstream/examples/...": App,
	"jetstream/jstest":       App,
}

// Allowed lists the imports between two packages of one rank that are part of the
// design, importer -> imported, by path relative to Module.
var Allowed = map[[2]string]string{
	{"partitioned", "eventstore"}: "a partitioned store spreads streams over the event stores of its partitions",
}

// RankOf returns the rank of the package path (a full import path under Module), and
// false for a path outside the module or one the table does not place.
func RankOf(path string) (Rank, bool) {
	rel, ok := relative(path)
	if !ok {
		return 0, false
	}
	if r, ok := ranks[rel]; ok {
		return r, true
	}
	best, found := "", false
	var rank Rank
	for pat, r := range ranks {
		dir, wild := strings.CutSuffix(pat, "/...")
		if !wild || (rel != dir && !strings.HasPrefix(rel, dir+"/")) {
			continue
		}
		if len(dir) > len(best) || !found {
			best, rank, found = dir, r, true
		}
	}
	return rank, found
}

// relative returns path relative to Module, or false when it is not under it.
func relative(path string) (string, bool) {
	if path == Module {
		return "", true
	}
	return strings.CutPrefix(path, Module+"/")
}

// Package is one package and its own (non-test) imports, as go list reports them.
type Package struct {
	ImportPath string
	Imports    []string
}

// Violation is one import against the layering.
type Violation struct {
	Importer, Imported string
	Reason             string
}

func (v Violation) String() string {
	return fmt.Sprintf("%s imports %s: %s", v.Importer, v.Imported, v.Reason)
}

// Check returns every import of pkgs that goes against the layering, sorted; imports
// of packages outside the module are not its business.
func Check(pkgs []Package) []Violation {
	var out []Violation
	for _, p := range pkgs {
		pr, ok := RankOf(p.ImportPath)
		if !ok {
			if _, in := relative(p.ImportPath); in {
				out = append(out, Violation{Importer: p.ImportPath, Reason: "the package has no rank: place it in internal/layers"})
			}
			continue
		}
		for _, imp := range p.Imports {
			if _, in := relative(imp); !in || imp == p.ImportPath {
				continue
			}
			ir, ok := RankOf(imp)
			if !ok {
				out = append(out, Violation{Importer: p.ImportPath, Imported: imp, Reason: "the imported package has no rank: place it in internal/layers"})
				continue
			}
			if reason := rule(p.ImportPath, pr, imp, ir); reason != "" {
				out = append(out, Violation{Importer: p.ImportPath, Imported: imp, Reason: reason})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Importer != out[j].Importer {
			return out[i].Importer < out[j].Importer
		}
		return out[i].Imported < out[j].Imported
	})
	return out
}

// rule returns why importer (of rank pr) may not import imported (of rank ir), or "".
func rule(importer string, pr Rank, imported string, ir Rank) string {
	switch {
	case ir > pr:
		return fmt.Sprintf("%s (%s) is above %s (%s): imports point down", imported, ir, importer, pr)
	case ir == pr && pr != App:
		a, _ := relative(importer)
		b, _ := relative(imported)
		if _, ok := Allowed[[2]string{a, b}]; !ok {
			return fmt.Sprintf("both are %s, and the pair is not in layers.Allowed", pr)
		}
	case (ir == Storage || ir == Local) && pr > Front && pr != App:
		return fmt.Sprintf("%s (%s) is behind the front: a %s package uses pipeline's API, errors and limits", imported, ir, pr)
	}
	if owner, ok := fxOwner(importer); ok {
		if or, ok := RankOf(owner); ok && ir > or {
			return fmt.Sprintf("%s (%s) is above %s (%s): an fx module wires its own package only", imported, ir, owner, or)
		}
	}
	return ""
}

// fxOwner returns P for the fx module P/Pfx ("pipeline" for "pipeline/pipelinefx").
func fxOwner(path string) (string, bool) {
	i := strings.LastIndexByte(path, '/')
	if i < 0 {
		return "", false
	}
	owner, base := path[:i], path[i+1:]
	j := strings.LastIndexByte(owner, '/')
	return owner, base == owner[j+1:]+"fx"
}

// List runs go list in dir over patterns (e.g. "./...") and returns the packages with
// their own imports.
func List(gobin, dir string, patterns ...string) ([]Package, error) {
	args := append([]string{"list", "-json=ImportPath,Imports"}, patterns...)
	cmd := exec.Command(gobin, args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list %s in %s: %v\n%s", strings.Join(patterns, " "), dir, err, stderr.Bytes())
	}
	var pkgs []Package
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p Package
		if err := dec.Decode(&p); err != nil {
			return nil, fmt.Errorf("go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs, nil
}
