package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"html"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// syntheticResults is a small result set with every chart's material: scenario a on a
// 2×2×2 grid plus a cell of scenario b, a memtable sweep, the appends scenario and
// the large scenario, two rounds each.
func syntheticResults() chartData {
	var d chartData
	engines := []string{kindParallel, kindSerial, kindNative, kindRaw}
	add := func(sc scenario) {
		for i, e := range engines {
			a := &aggregate{label: sc.Label, engine: e, baseline: kindNative}
			for r := 1; r <= 2; r++ {
				cps := float64(1000*(i+1)*sc.Workers*r) / float64(sc.Keys)
				a.runs = append(a.runs, runResult{Scenario: sc.ID, Label: sc.Label, Engine: e, Round: r, Params: sc.params(),
					CommitsPerS: cps, Commits: uint64(cps), CommitLat: latency{P50: 10 * float64(i+1), P95: 40, P99: 90, Max: 2000}})
			}
			d.aggs = append(d.aggs, a)
		}
	}
	for _, w := range []int{2, 4} {
		for _, k := range []int{1, 64} {
			for _, f := range []int{1, 4} {
				add(scenario{ID: "a", Label: "a W=" + itoa(w) + " K=" + itoa(k) + " F=" + itoa(f), Workers: w, Keys: k, Inflight: f, DBs: 1})
			}
		}
	}
	add(scenario{ID: "b", Label: "b 4 DBs", Workers: 4, Keys: 64, Inflight: 2, DBs: 4})
	for _, size := range []float64{4, 32} {
		for _, count := range []int{2, 4} {
			d.memtable = append(d.memtable, memtableResult{Scenario: "memtable", Engine: kindParallel, WriteBufferMiB: size, WriteBuffers: count,
				TargetRate: 1000, KeysPerCommit: 16, ValueBytes: 1024, Seconds: 5, StallMillis: 100 / size * float64(4-count), DeviceWriteMiB: 500 - size})
		}
	}
	d.appends = map[string][]appendsResult{}
	d.appendsEngines = []string{kindRocklineAppends, "postgresql", "jetstream"}
	for _, c := range appendsCells() {
		for i, e := range d.appendsEngines {
			for r := 1; r <= 2; r++ {
				d.appends[c.label()+"|"+e] = append(d.appends[c.label()+"|"+e], appendsResult{Scenario: "appends", Cell: c.label(), Engine: e, Round: r,
					AppendsPerS: float64(20000 / (i + 1))})
			}
		}
	}
	for r := 1; r <= 2; r++ {
		var round []largeResult
		for i, e := range []string{kindParallel, kindNative, kindRaw} {
			for _, b := range []string{"on", "off"} {
				round = append(round, largeResult{Scenario: "large", Engine: e, Bloom: b, Round: r, Keys: 3000, BlockCacheMiB: 8, Workers: 2, KeysPerCommit: 4,
					CommitsPerS: float64(3000 + 100*i), CommitLat: latency{P99: 4000}})
			}
		}
		d.large = append(d.large, round)
	}
	return d
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// svgText parses an SVG as XML and returns its text content, one string per element.
func svgText(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(b))
	dec.Entity = xml.HTMLEntity
	var texts []string
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s does not parse as XML: %v", filepath.Base(path), err)
		}
		if cd, ok := tok.(xml.CharData); ok {
			if s := strings.TrimSpace(string(cd)); s != "" {
				texts = append(texts, html.UnescapeString(s))
			}
		}
	}
	return texts
}

func checkCharts(t *testing.T, dir string, files []chartFile, want []string) {
	t.Helper()
	var names []string
	for _, f := range files {
		names = append(names, f.Name)
		texts := svgText(t, filepath.Join(dir, f.Name))
		if !slices.Contains(texts, f.Title) {
			t.Errorf("%s: title %q not drawn", f.Name, f.Title)
		}
		if len(f.Legend) == 0 {
			t.Errorf("%s: no legend entries", f.Name)
		}
		for _, l := range f.Legend {
			if !slices.Contains(texts, l) {
				t.Errorf("%s: legend entry %q not drawn", f.Name, l)
			}
		}
	}
	for _, w := range want {
		if !slices.Contains(names, w) {
			t.Errorf("chart %s not written (wrote %v)", w, names)
		}
	}
}

// TestChartsRenderEveryKind draws every chart kind from synthetic results and checks
// each SVG parses and shows its title and legend.
func TestChartsRenderEveryKind(t *testing.T) {
	dir := t.TempDir()
	files, err := writeCharts(dir, syntheticResults())
	if err != nil {
		t.Fatal(err)
	}
	checkCharts(t, dir, files, []string{"ratios.svg", "throughput-workers.svg", "latency-a.svg", "latency-b.svg", "memtable.svg", "appends.svg", "large.svg"})
	want := map[string][]string{
		"ratios.svg":  {kindParallel, kindSerial},
		"appends.svg": {kindRocklineAppends, "postgresql", "jetstream"},
		"large.svg":   {"bloom on", "bloom off"},
	}
	for _, f := range files {
		if w, ok := want[f.Name]; ok && !slices.Equal(f.Legend, w) {
			t.Errorf("%s: legend %v, want %v", f.Name, f.Legend, w)
		}
	}
}

// TestChartsFromJSONLines writes the synthetic results as --json output would (with a
// markdown line among them), reads them back with readChartData and draws the same
// charts.
func TestChartsFromJSONLines(t *testing.T) {
	d := syntheticResults()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, a := range d.aggs {
		for _, r := range a.runs {
			enc.Encode(r)
		}
	}
	for _, m := range d.memtable {
		enc.Encode(m)
	}
	for _, c := range appendsCells() {
		for _, e := range d.appendsEngines {
			for _, r := range d.appends[c.label()+"|"+e] {
				enc.Encode(r)
			}
		}
	}
	for _, round := range d.large {
		for _, r := range round {
			enc.Encode(r)
		}
	}
	enc.Encode(&largeLoad{Scenario: "large", Bloom: "on", Keys: 3000})
	enc.Encode(memResult{Scenario: "memory", Engine: kindParallel})
	// Scenarios without charts are skipped, not read as key-value runs.
	enc.Encode(indexResult{Scenario: "index", Method: "scan"})
	enc.Encode(map[string]any{"scenario": "jsbare", "cell": "W=1", "side": "api", "commit_latency": map[string]float64{"p99_us": 1}})
	buf.WriteString("\n## rockline bench (quick mode)\n\n| a | b |\n")
	path := filepath.Join(t.TempDir(), "run.jsonl")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := readChartData([]string{path})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.aggs) != len(d.aggs) || len(got.memtable) != len(d.memtable) || len(got.appends) != len(d.appends) || len(got.large) != len(d.large) {
		t.Fatalf("read %d aggregates, %d memtable runs, %d appends series, %d large rounds; want %d, %d, %d, %d",
			len(got.aggs), len(got.memtable), len(got.appends), len(got.large), len(d.aggs), len(d.memtable), len(d.appends), len(d.large))
	}
	if !slices.Equal(got.appendsEngines, d.appendsEngines) {
		t.Errorf("appends engines %v, want %v", got.appendsEngines, d.appendsEngines)
	}
	dir := t.TempDir()
	files, err := writeCharts(dir, got)
	if err != nil {
		t.Fatal(err)
	}
	checkCharts(t, dir, files, []string{"ratios.svg", "throughput-workers.svg", "latency-a.svg", "memtable.svg", "appends.svg", "large.svg"})
}

// TestChartsOfNothing: no results, no charts, no error.
func TestChartsOfNothing(t *testing.T) {
	files, err := writeCharts(t.TempDir(), chartData{})
	if err != nil || len(files) != 0 {
		t.Errorf("writeCharts of nothing = %v, %v; want no files and no error", files, err)
	}
}
