package main

import (
	"os"
	"testing"
)

// TestAppendsEngines runs one contended and one uncontended appends cell on every
// engine for a moment, each ending with its read-back check (dense streams, no
// duplicate, nothing acknowledged lost). PostgreSQL runs when installed; with
// ROCKLINE_REQUIRE_PG=1 (make test, which installs it) its absence fails the test.
func TestAppendsEngines(t *testing.T) {
	cfg := smokeConfig(t)
	var logged []string
	engines := appendsEngines(func(s string) { logged = append(logged, s) })
	if len(engines) < 3 {
		if os.Getenv("ROCKLINE_REQUIRE_PG") != "" {
			t.Fatalf("PostgreSQL is required here: %v", logged)
		}
		t.Logf("running without PostgreSQL: %v", logged)
	}
	t.Cleanup(stopPG)
	cells := []appendsCell{
		{workers: 2, k: 3, streams: 10},
		{workers: 4, k: 1, streams: 2, shared: true, sync: true},
	}
	for _, e := range engines {
		for _, cell := range cells {
			t.Run(e.name+"/"+cell.label(), func(t *testing.T) {
				res := runAppendsOnce(cfg, e, cell, 1)
				if res.Error != "" {
					t.Fatalf("run failed: %s", res.Error)
				}
				if res.Appends == 0 || res.AppendsPerS <= 0 || res.Latency.P50 <= 0 {
					t.Errorf("no appends measured: %+v", res)
				}
				if cell.shared && res.Retries == 0 && res.Appends > 50 {
					t.Logf("%d appends on 2 shared streams from 4 workers met no wrong revision", res.Appends)
				}
			})
		}
	}
}
