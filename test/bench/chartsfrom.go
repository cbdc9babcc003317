package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
)

// readChartData reads saved --json output (one JSON object a line; other lines, such
// as the markdown tables that follow on stdout, are skipped) into the data the charts
// are drawn from. Several files are read as one run: a scenario cell present in two
// of them gets the rounds of both.
func readChartData(paths []string) (chartData, error) {
	d := chartData{appends: map[string][]appendsResult{}}
	aggByKey := map[string]*aggregate{}
	largeByRound := map[int][]largeResult{}
	var largeRounds []int
	for _, path := range paths {
		f, err := os.Open(path)
		if err != nil {
			return d, fmt.Errorf("results: %w", err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 0, 1<<16), 1<<24)
		for n := 1; sc.Scan(); n++ {
			line := bytes.TrimSpace(sc.Bytes())
			if len(line) == 0 || line[0] != '{' {
				continue
			}
			var head struct {
				Scenario string `json:"scenario"`
				Engine   string `json:"engine"`
			}
			if err := json.Unmarshal(line, &head); err != nil {
				f.Close()
				return d, fmt.Errorf("%s:%d: %w", path, n, err)
			}
			var dst any
			switch head.Scenario {
			case "memory", "events", "jsbare", "cluster", "scale", "index", "":
				continue // not charted
			case "memtable":
				d.memtable = append(d.memtable, memtableResult{})
				dst = &d.memtable[len(d.memtable)-1]
			case "appends":
				var r appendsResult
				if err := json.Unmarshal(line, &r); err != nil {
					f.Close()
					return d, fmt.Errorf("%s:%d: %w", path, n, err)
				}
				d.appends[r.Cell+"|"+r.Engine] = append(d.appends[r.Cell+"|"+r.Engine], r)
				if !slices.Contains(d.appendsEngines, r.Engine) {
					d.appendsEngines = append(d.appendsEngines, r.Engine)
				}
				continue
			case "large":
				if head.Engine == "" {
					continue // a load's figures, not charted
				}
				var r largeResult
				if err := json.Unmarshal(line, &r); err != nil {
					f.Close()
					return d, fmt.Errorf("%s:%d: %w", path, n, err)
				}
				if _, ok := largeByRound[r.Round]; !ok {
					largeRounds = append(largeRounds, r.Round)
				}
				largeByRound[r.Round] = append(largeByRound[r.Round], r)
				continue
			default: // the key-value scenarios: a-f, tracing
				var r runResult
				if err := json.Unmarshal(line, &r); err != nil {
					f.Close()
					return d, fmt.Errorf("%s:%d: %w", path, n, err)
				}
				k := r.Label + "|" + r.Engine
				a := aggByKey[k]
				if a == nil {
					a = &aggregate{label: r.Label, engine: r.Engine, baseline: r.Baseline}
					aggByKey[k] = a
					d.aggs = append(d.aggs, a)
				}
				a.runs = append(a.runs, r)
				continue
			}
			if err := json.Unmarshal(line, dst); err != nil {
				f.Close()
				return d, fmt.Errorf("%s:%d: %w", path, n, err)
			}
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return d, fmt.Errorf("%s: %w", path, err)
		}
	}
	slices.SortStableFunc(d.appendsEngines, func(a, b string) int { return engineIndex(a) - engineIndex(b) })
	slices.Sort(largeRounds)
	for _, r := range largeRounds {
		d.large = append(d.large, largeByRound[r])
	}
	return d, nil
}

// chartsFromFiles draws the charts of saved results (--charts-from) into --charts and
// returns the process's exit code.
func chartsFromFiles(cfg *config) int {
	d, err := readChartData(cfg.chartsFrom)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	files, err := writeCharts(cfg.charts, d)
	for _, f := range files {
		fmt.Fprintf(os.Stderr, "bench: wrote %s (%s)\n", f.Name, f.Title)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: charts:", err)
		return 1
	}
	if len(files) == 0 {
		fmt.Fprintln(os.Stderr, "bench: no chartable results in", cfg.chartsFrom)
		return 1
	}
	return 0
}
