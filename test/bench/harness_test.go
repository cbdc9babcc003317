package main

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// The harness's own smoke tests: every engine runs both workloads for a moment
// against a real database, and the conflicts check sees no lost update from the
// engines that validate. Figures are not asserted here; they belong to runs of the
// harness, not to unit tests.

func smokeConfig(t *testing.T) *config {
	return &config{duration: 300 * time.Millisecond, runTimeout: 2 * time.Minute, dir: t.TempDir(), keyspace: 256}
}

func TestEnginesRunKeysWorkload(t *testing.T) {
	cfg := smokeConfig(t)
	sc := scenario{ID: "a", Label: "smoke keys", DBs: 1, Workers: 2, Keys: 8, Inflight: 2, SyncWorkers: 1}
	for _, kind := range allKinds {
		t.Run(kind, func(t *testing.T) {
			res := runScenarioOnce(cfg, sc, engineSpec{Name: kind, Kind: kind}, 1)
			if res.Error != "" {
				t.Fatalf("run failed: %s", res.Error)
			}
			if res.Commits == 0 || res.CommitsPerS <= 0 || res.CommitLat.P50 <= 0 {
				t.Errorf("no commits measured: %+v", res)
			}
			if res.Conflicts != 0 {
				t.Errorf("%d conflicts on disjoint keys", res.Conflicts)
			}
			// rockline hands an async commit to its lanes and wakes the caller when it is
			// published: the run counts scheduling waits for it, with a p99.
			if (kind == kindParallel || kind == kindSerial) && (res.SchedWaitsPerCommit <= 0 || res.SchedWaitP99 <= 0) {
				t.Errorf("scheduling waits %.3f per commit, p99 %.1fµs; want both above 0", res.SchedWaitsPerCommit, res.SchedWaitP99)
			}
		})
	}
}

func TestValidatingEnginesLoseNoUpdate(t *testing.T) {
	cfg := smokeConfig(t)
	sc := scenario{ID: "d", Label: "smoke conflicts", DBs: 1, Workers: 4, Keys: 1, Inflight: 2, HotKeys: 2}
	for _, kind := range allKinds {
		if kind == kindRaw {
			continue // no validation: it may lose updates, and says so in its check column
		}
		t.Run(kind, func(t *testing.T) {
			res := runScenarioOnce(cfg, sc, engineSpec{Name: kind, Kind: kind}, 1)
			if res.Error != "" {
				t.Fatalf("run failed: %s", res.Error)
			}
			if res.Commits == 0 || res.LostUpdates == nil {
				t.Fatalf("no commits or no check: %+v", res)
			}
			if *res.LostUpdates != 0 {
				t.Errorf("%d updates lost (counter sum %d, commits %d)", *res.LostUpdates, *res.CounterSum, res.Commits)
			}
		})
	}
}

func TestScenarioEngines(t *testing.T) {
	cfg := &config{engines: allKinds, scenarios: map[string]bool{"e": true, "f": true}, baseWorkers: 4, baseKeys: 64,
		baseF: 2, mixSync: 2, buckets: []int{4096}}
	got := map[string][]string{}
	for _, s := range buildScenarios(cfg) {
		for _, e := range s.Engines {
			got[s.Label] = append(got[s.Label], e.Name)
		}
	}
	if names := got["e WAL off W=4 K=64 F=2"]; slices.Contains(names, kindBadger) || !slices.Contains(names, kindRaw) {
		t.Errorf("WAL off engines = %v; want every engine but %s", names, kindBadger)
	}
	if names := got["e WAL on W=4 K=64 F=2"]; !slices.Contains(names, kindBadger) {
		t.Errorf("WAL on engines = %v; want %s among them", names, kindBadger)
	}
	if names := got["f buckets, mix W=4 (2 sync) K=64 F=2"]; !slices.Equal(names, []string{"rockline-parallel/b4096", kindSerial, kindNative}) {
		t.Errorf("bucket sweep engines = %v", names)
	}
}

// TestWALOffBaseline: when Badger would be the baseline, the WAL-off scenario (which
// has no Badger) divides by its first engine instead of by nothing.
func TestWALOffBaseline(t *testing.T) {
	cfg := &config{engines: []string{kindBadger, kindParallel, kindRaw}, scenarios: map[string]bool{"e": true},
		baseWorkers: 4, baseKeys: 64, baseF: 2}
	for _, s := range buildScenarios(cfg) {
		found := false
		for _, e := range s.Engines {
			found = found || e.Name == s.Baseline
		}
		if !found {
			t.Errorf("%s: baseline %q is not among its engines", s.Label, s.Baseline)
		}
	}
}

// TestLargeScenario runs the data-larger-than-memory scenario with a tiny load: both
// bloom settings load, every engine opens a database holding the loaded keys (its
// workers fail the run on a missing one) and commits, the tables print, and every
// file the scenario made is gone afterwards.
func TestLargeScenario(t *testing.T) {
	cfg := smokeConfig(t)
	cfg.rounds, cfg.largeKeys, cfg.largeCacheMiB, cfg.largeWorkers, cfg.largeKeysPerCommit = 1, 3000, 8, 2, 4
	cfg.largeEngines = []string{kindParallel, kindNative, kindRaw}
	var progress []string
	var emitted int
	loads, rounds := runLarge(cfg, func(s string) { progress = append(progress, s) }, func(any) { emitted++ }, func(bool) {})
	if len(loads) != 2 || len(rounds) != 1 || len(rounds[0]) != 6 {
		t.Fatalf("%d loads, %d rounds (%v); want 2 loads and one round of 6 runs\n%s", len(loads), len(rounds), rounds, strings.Join(progress, "\n"))
	}
	for _, l := range loads {
		if l.Error != "" || l.Keys != 3000 || l.Files != largeGroups || l.FileBytes < 3000*largeValueLen {
			t.Errorf("load %+v", l)
		}
	}
	for _, r := range rounds[0] {
		if r.Error != "" || r.Commits == 0 || r.CommitLat.P50 <= 0 {
			t.Errorf("%s bloom %s: %+v", r.Engine, r.Bloom, r)
		}
		if lv := strings.Split(r.LevelsAtStart, "/"); r.Engine != kindParallel && (len(lv) != 7 || lv[6] != "1" || slices.Equal(lv[:6], []string{"0", "0", "0", "0", "0", "0"})) {
			t.Errorf("%s bloom %s: data files per level L0..L6 after the load %q, want the bottom group on L6 and the others above it", r.Engine, r.Bloom, r.LevelsAtStart)
		}
		if r.DataMissPerC+r.DataHitPerC == 0 {
			t.Errorf("%s bloom %s: no data block read through the block cache: %+v", r.Engine, r.Bloom, r)
		}
	}
	if emitted != 8 {
		t.Errorf("%d JSON lines, want 8 (6 runs, 2 loads)", emitted)
	}
	var b strings.Builder
	writeLargeTables(&b, cfg, loads, rounds)
	for _, want := range []string{"| rockline-parallel | on |", "| native-occ | off |", "| raw-batch | ", "on ÷ off"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("tables lack %q:\n%s", want, b.String())
		}
	}
	left, err := os.ReadDir(cfg.dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("files left in %s: %v", cfg.dir, left)
	}
}
