package main

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestAppendsEngines runs one contended and one uncontended appends cell on every
// engine for a moment, each ending with its read-back check (dense streams, no
// duplicate, nothing acknowledged lost). PostgreSQL runs when installed; with
// ROCKLINE_REQUIRE_PG=1 (make test, which installs it) its absence fails the test.
func TestAppendsEngines(t *testing.T) {
	cfg := smokeConfig(t)
	var logged []string
	engines := appendsEngines(allAppendsKinds, func(s string) { logged = append(logged, s) })
	if !slices.ContainsFunc(engines, func(e appendsEngine) bool { return e.name == "postgresql" }) {
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
				if e.name == kindDiskAppends && cell.sync && res.PerFsync != 1 {
					t.Errorf("disk anchor: %.2f appends per fsync, want exactly 1", res.PerFsync)
				}
				if cell.shared && res.Retries == 0 && res.Appends > 50 {
					t.Logf("%d appends on 2 shared streams from 4 workers met no wrong revision", res.Appends)
				}
			})
		}
	}
}

// TestAppendsPayload checks the events the workers append: about 200 bytes of flat
// JSON whose keys are in jsonb's order (PostgreSQL's read-back depends on it), distinct
// for distinct (worker, seq, i).
func TestAppendsPayload(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range [][3]int{{0, 0, 0}, {7, 123456789, 9}, {0, 1, 0}, {1, 0, 0}, {0, 0, 1}, {12, 3, 4}, {1, 23, 4}} {
		b := appendsPayload(c[0], c[1], c[2])
		if len(b) != 200 {
			t.Errorf("payload %v is %d bytes, want 200", c, len(b))
		}
		var v struct {
			I      int    `json:"i"`
			Pad    string `json:"pad"`
			Seq    int    `json:"seq"`
			Worker int    `json:"worker"`
		}
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("payload %v is not JSON: %v: %s", c, err, b)
		}
		if v.Worker != c[0] || v.Seq != c[1] || v.I != c[2] {
			t.Errorf("payload %v decodes to %+v", c, v)
		}
		if !strings.HasPrefix(string(b), `{"i":`) || seen[string(b)] {
			t.Errorf("payload %v: wrong key order or repeated: %s", c, b)
		}
		seen[string(b)] = true
	}
}
