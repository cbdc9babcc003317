// Command bench runs the same workloads against rockline (both validation policies),
// RocksDB's OptimisticTransactionDB (native-occ, the anchor), a raw WriteBatch with
// no validation (raw-batch, the ceiling) and, in the full run, Badger v4's optimistic
// transactions (badger-v4) in one process, rotating the engine order each round.
// Every engine writes the same data: data keys plus one log record per commit
// holding the write set (rockline's own log entry; for the other engines a record
// under a sequence key in a "log" column family, or in Badger, which has no column
// families, under a one-byte key prefix per family).
//
//	go -C test/bench run . --quick   # under 5 minutes on 2 cores
//	go -C test/bench run .           # full run, about 70 minutes on 2 cores (--plan prints the estimate)
//
//	go -C test/bench run . --scenarios scale --memtable=false   # one event store grown to 100k, then 1M events
//
//	go -C test/bench run . --charts DIR                        # also SVG charts of the results in DIR
//	go -C test/bench run . --charts-from run.jsonl --charts DIR # charts of a saved run's JSON lines, no run
//
// stdout: one JSON line per run, then markdown tables; stderr: progress lines with the
// elapsed time and the estimated time remaining. Compare
// engines within one run, as ratios; absolute figures depend on the machine.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

type config struct {
	quick                         bool
	eventCount                    int
	indexEvents                   int
	duration, runTimeout          time.Duration
	rounds                        int
	engines                       []string
	scenarios                     map[string]bool
	grid                          [][2]int // (workers, keys) pairs of scenario a
	inflight                      []int
	keyspace                      int
	dbs                           int
	baseWorkers, baseKeys, baseF  int
	mixSync                       int
	conflictWorkers, conflictF    int
	hotKeys                       int
	buckets, memBuckets           []int
	memDBs                        int
	sync                          bool
	lanes                         int
	memtable                      bool
	memtableSizes, memtableCounts []int
	memtableScale                 int
	rate                          int
	memtableDuration              time.Duration
	memtableEngines               []string
	memtableWorkers               int
	memtableKeyspace              int
	largeKeys, largeCacheMiB      int
	largeWorkers                  int
	largeKeysPerCommit            int
	largeEngines                  []string
	appendsEngines                []string // appends: engines that run (allAppendsKinds order)
	scaleSizes                    []int    // scale: event counts the database grows through
	scaleDuration, scaleSettle    time.Duration
	scaleWorkers                  int
	scaleLoadWorkers              int
	scaleLoadBatch                int
	jsbareSides                   []string // jsbare: sides measured (api, bare, bare+reads)
	jsbareWorkers                 []int    // jsbare: worker counts of the commit cells
	jsbarePartitions              []int    // jsbare: partition counts of the scaling cells (none: skipped)
	jsbareScaleWorkers            int      // jsbare: workers of the scaling cells
	dir                           string
	json, plan                    bool
	cpuProfile                    string
	charts                        string   // folder the SVG charts go to ("" for none)
	chartsFrom                    []string // saved --json output to draw charts from, instead of running
}

func intList(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", f, err)
		}
		out = append(out, n)
	}
	return out, nil
}

func strList(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func parseFlags() (*config, string) {
	c := &config{}
	fs := flag.CommandLine
	fs.BoolVar(&c.quick, "quick", false, "quick mode: short runs and a subset of scenarios (under 5 minutes on 2 cores)")
	fs.DurationVar(&c.duration, "duration", 0, "measured time per run (default 3s quick, 10s full)")
	fs.DurationVar(&c.runTimeout, "run-timeout", 90*time.Second, "a run taking longer than its duration plus this aborts the process")
	fs.IntVar(&c.rounds, "rounds", 3, "rounds per scenario (figures are medians, with min and max)")
	engines := fs.String("engines", "", "engines compared: any of "+strings.Join(allKinds, ",")+" (default: all full; all but "+kindBadger+" quick)")
	scen := fs.String("scenarios", "", "scenarios to run: a (workers × keys grid), b (four databases), c (async/sync mix), d (conflicts), e (WAL off/on), f (bucket sweep on c), s (a's cells with an fsync per commit, commits per fsync), memory, tracing, events (projections and filtered subscriptions), large (data larger than the block cache, bloom filters on and off; needs about 2x4.3 GiB of disk at the default --large-keys), scale (one event store grown through --scale-sizes events, appends and stream reads measured at each size), index (1% of --index-events read through the type index and by a scan) (default: all full; a,b,c,d,memory,tracing,events quick)")
	fs.IntVar(&c.eventCount, "event-count", 0, "events scenario: events per run (default 20000 quick, 100000 full)")
	fs.IntVar(&c.indexEvents, "index-events", 0, "index: events loaded, 1% of one type read through the type index and by a scan (default 100000 quick, 10000000 full)")
	workers := fs.String("workers", "2,4,8", "scenario a: workers (crossed with --keys unless --grid is given)")
	keys := fs.String("keys", "1,64,1000", "scenario a: keys per transaction")
	grid := fs.String("grid", "", "scenario a: explicit W:K pairs, e.g. 4:64,2:1000 (default quick: 4:64,2:1000)")
	inflight := fs.String("inflight", "", "scenario a: commits in flight per worker, i.e. goroutines per worker (default 2 quick, 1,4 full)")
	fs.IntVar(&c.keyspace, "keyspace", 4096, "keys per goroutine's disjoint key space (at least K), cycled through")
	fs.IntVar(&c.dbs, "dbs", 4, "scenario b: databases, one worker each")
	fs.IntVar(&c.baseWorkers, "base-workers", 4, "workers of scenarios c, e, f, tracing")
	fs.IntVar(&c.baseKeys, "base-keys", 64, "keys per transaction of scenarios b, c, e, f, tracing")
	fs.IntVar(&c.baseF, "base-inflight", 2, "commits in flight per worker of scenarios b, c, e, f, tracing")
	fs.IntVar(&c.mixSync, "mix-sync", 2, "scenarios c, f: workers using CommitInline (the rest use Commit)")
	fs.IntVar(&c.conflictWorkers, "conflict-workers", 4, "scenario d: workers")
	fs.IntVar(&c.conflictF, "conflict-inflight", 2, "scenario d: commits in flight per worker")
	fs.IntVar(&c.hotKeys, "hot-keys", 16, "scenario d: hot counter keys")
	buckets := fs.String("buckets", "4096,16384,65536,1048576", "scenario f: rockline-parallel bucket counts")
	memBuckets := fs.String("mem-buckets", "4096,65536,1048576", "memory: rockline-parallel bucket counts")
	fs.IntVar(&c.memDBs, "mem-dbs", 10, "memory: empty databases opened per variant")
	fs.BoolVar(&c.sync, "sync", false, "fsync the WAL on every commit (all engines)")
	fs.IntVar(&c.lanes, "lanes", 0, "rockline commit lanes (0: rockline's default, min(4, GOMAXPROCS))")
	fs.BoolVar(&c.memtable, "memtable", true, "run the memtable sweep")
	msizes := fs.String("memtable-sizes", "", "memtable sweep: write buffer sizes in MiB before scaling (default 64,128,256,512; quick 64,512)")
	mcounts := fs.String("memtable-counts", "2,4", "memtable sweep: max write buffer numbers")
	fs.IntVar(&c.memtableScale, "memtable-scale", 0, "memtable sweep: divide sizes by this (default 16 quick, 1 full)")
	fs.IntVar(&c.rate, "rate", 1000, "memtable sweep: target commits/s (16 keys × 1 KiB each)")
	fs.DurationVar(&c.memtableDuration, "memtable-duration", 0, "memtable sweep: time per configuration (default 5s quick, 60s full)")
	mengines := fs.String("memtable-engines", kindParallel, "memtable sweep: engines")
	fs.IntVar(&c.memtableWorkers, "memtable-workers", 8, "memtable sweep: goroutines serving the paced load")
	fs.IntVar(&c.memtableKeyspace, "memtable-keyspace", 1<<18, "memtable sweep: uniform key space")
	fs.IntVar(&c.largeKeys, "large-keys", 10_000_000, "large: keys bulk-loaded (200-byte values; 10 million is about 2 GiB, written twice: bloom on and off)")
	fs.IntVar(&c.largeCacheMiB, "large-cache-mib", 64, "large: block cache of every engine, MiB")
	fs.IntVar(&c.largeWorkers, "large-workers", 4, "large: workers, one transaction in flight each")
	fs.IntVar(&c.largeKeysPerCommit, "large-keys-per-commit", 4, "large: random existing keys each transaction reads, then writes")
	aengines := fs.String("appends-engines", strings.Join(allAppendsKinds, ","), "appends: engines, any of "+strings.Join(allAppendsKinds, ",")+" (null: the harness's own CPU per append, at default durability; disk: a write and an fdatasync per append, with an fsync per append)")
	lengines := fs.String("large-engines", strings.Join([]string{kindParallel, kindNative, kindRaw}, ","), "large: engines (any but "+kindBadger+")")
	scaleSizes := fs.String("scale-sizes", "", "scale: event counts the database grows through, increasing (default 100000,1000000 quick, 1000000,10000000 full)")
	fs.DurationVar(&c.scaleDuration, "scale-duration", 0, "scale: measured time of each phase (appends, reads) at each size (default --duration)")
	fs.DurationVar(&c.scaleSettle, "scale-settle", 10*time.Minute, "scale: longest wait after each growth for flushes and compactions to finish")
	fs.IntVar(&c.scaleWorkers, "scale-workers", runtime.GOMAXPROCS(0), "scale: workers appending, then reading, at each size (default one per core: more closed-loop writers than cores measure the scheduler at p99, RESULTS.md 2026-12-03)")
	fs.IntVar(&c.scaleLoadWorkers, "scale-load-workers", 8, "scale: workers appending during each growth")
	fs.IntVar(&c.scaleLoadBatch, "scale-load-batch", 10, "scale: events per commit during each growth (1..100; a stream's 100 events take 100/batch commits)")
	jsSides := fs.String("jsbare-sides", strings.Join(jsbareSides, ","), "jsbare: sides measured, any of "+strings.Join(jsbareSides, ",")+" (the partitions cells run api and bare)")
	jsWorkers := fs.String("jsbare-workers", "1,8", "jsbare: worker counts of the cells comparing each side with the bare publish")
	jsParts := fs.String("jsbare-partitions", "1,2,4", "jsbare: partition counts of the scaling cells (empty: none)")
	fs.IntVar(&c.jsbareScaleWorkers, "jsbare-partition-workers", 8, "jsbare: workers of the scaling cells")
	fs.StringVar(&c.dir, "dir", os.TempDir(), "where temporary databases go (removed afterwards)")
	fs.BoolVar(&c.json, "json", true, "print one JSON line per run to stdout")
	fs.BoolVar(&c.plan, "plan", false, "print the plan and its estimated duration, then exit")
	fs.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of this process's runs to this file (go tool pprof; not the memory scenario's child processes)")
	fs.StringVar(&c.charts, "charts", "", "write SVG charts of the results into this folder (created if missing; make bench passes test/bench/charts)")
	chartsFrom := fs.String("charts-from", "", "draw the charts from saved --json output (comma-separated JSON-lines files, e.g. results/2026-11-30-full.jsonl, relative to test/bench) instead of running; needs --charts")
	child := fs.String("memory-child", "", "internal: measure one engine variant's open cost and print JSON")
	flag.Parse()

	def := func(v *string, quick, full string) {
		if *v == "" {
			*v = full
			if c.quick {
				*v = quick
			}
		}
	}
	def(scen, "a,b,c,d,memory,tracing,events", "a,b,c,d,e,f,s,memory,tracing,events,appends")
	if c.indexEvents == 0 {
		c.indexEvents = 10000000
		if c.quick {
			c.indexEvents = 100000
		}
	}
	if c.eventCount == 0 {
		c.eventCount = 100000
		if c.quick {
			c.eventCount = 20000
		}
	}
	def(engines, strings.Join(quickKinds, ","), strings.Join(allKinds, ","))
	def(inflight, "2", "1,4")
	def(scaleSizes, "100000,1000000", "1000000,10000000")
	def(msizes, "64,512", "64,128,256,512")
	if c.quick && *grid == "" {
		*grid = "4:64,2:1000"
	}
	if c.duration == 0 {
		c.duration = 10 * time.Second
		if c.quick {
			c.duration = 3 * time.Second
		}
	}
	if c.scaleDuration == 0 {
		c.scaleDuration = c.duration
	}
	if c.memtableScale == 0 {
		c.memtableScale = 1
		if c.quick {
			c.memtableScale = 16
		}
	}
	if c.memtableDuration == 0 {
		c.memtableDuration = 60 * time.Second
		if c.quick {
			c.memtableDuration = 5 * time.Second
		}
	}
	var errs []string
	must := func(dst *[]int, s, name string) {
		v, err := intList(s)
		if err != nil {
			errs = append(errs, fmt.Sprintf("--%s: %v", name, err))
		}
		*dst = v
	}
	must(&c.scaleSizes, *scaleSizes, "scale-sizes")
	if !scaleSizesValid(c.scaleSizes) {
		errs = append(errs, "--scale-sizes: want positive event counts in increasing order")
	}
	if c.scaleWorkers < 1 || c.scaleLoadWorkers < 1 || c.scaleLoadBatch < 1 || c.scaleLoadBatch > scaleStreamEvents {
		errs = append(errs, "--scale-workers and --scale-load-workers must be positive, --scale-load-batch 1..100")
	}
	c.chartsFrom = strList(*chartsFrom)
	if len(c.chartsFrom) > 0 && c.charts == "" {
		errs = append(errs, "--charts-from needs --charts, the folder to write the charts into")
	}
	c.engines = strList(*engines)
	c.memtableEngines = strList(*mengines)
	c.largeEngines = strList(*lengines)
	c.appendsEngines = strList(*aengines)
	c.jsbareSides = strList(*jsSides)
	for _, s := range c.jsbareSides {
		if !slices.Contains(jsbareSides, s) {
			errs = append(errs, fmt.Sprintf("--jsbare-sides: %q is not one of %s", s, strings.Join(jsbareSides, ",")))
		}
	}
	must(&c.jsbareWorkers, *jsWorkers, "jsbare-workers")
	must(&c.jsbarePartitions, *jsParts, "jsbare-partitions")
	for _, n := range slices.Concat(c.jsbareWorkers, c.jsbarePartitions, []int{c.jsbareScaleWorkers}) {
		if n < 1 {
			errs = append(errs, "--jsbare-workers, --jsbare-partitions and --jsbare-partition-workers must be positive")
			break
		}
	}
	for _, e := range c.appendsEngines {
		if !slices.Contains(allAppendsKinds, e) {
			errs = append(errs, fmt.Sprintf("--appends-engines: %q is not one of %s", e, strings.Join(allAppendsKinds, ",")))
		}
	}
	for _, e := range c.largeEngines {
		if !slices.Contains(allKinds, e) || e == kindBadger {
			errs = append(errs, fmt.Sprintf("--large-engines: %q is not one of %s, %s, %s, %s", e, kindParallel, kindSerial, kindNative, kindRaw))
		}
	}
	if c.largeKeys < 1 || c.largeCacheMiB < 1 || c.largeWorkers < 1 || c.largeKeysPerCommit < 1 {
		errs = append(errs, "--large-keys, --large-cache-mib, --large-workers and --large-keys-per-commit must be positive")
	}
	for _, e := range append(slices.Clone(c.engines), c.memtableEngines...) {
		if !slices.Contains(allKinds, e) {
			errs = append(errs, fmt.Sprintf("unknown engine %q (want %s)", e, strings.Join(allKinds, ",")))
		}
	}
	if len(c.engines) == 0 {
		errs = append(errs, "--engines: no engine given")
	}
	if slices.Contains(c.memtableEngines, kindBadger) {
		errs = append(errs, fmt.Sprintf("--memtable-engines: %s has no RocksDB memtables to sweep", kindBadger))
	}
	c.scenarios = map[string]bool{}
	for _, s := range strList(*scen) {
		if !slices.Contains([]string{"a", "b", "c", "d", "e", "f", "memory", "tracing", "events", "appends", "large", "cluster", "jsbare", "s", "scale", "index"}, s) {
			errs = append(errs, fmt.Sprintf("unknown scenario %q (want a,b,c,d,e,f,s,memory,tracing,events,appends,large,cluster,jsbare,scale,index)", s))
		}
		c.scenarios[s] = true
	}
	must(&c.inflight, *inflight, "inflight")
	must(&c.buckets, *buckets, "buckets")
	must(&c.memBuckets, *memBuckets, "mem-buckets")
	must(&c.memtableSizes, *msizes, "memtable-sizes")
	must(&c.memtableCounts, *mcounts, "memtable-counts")
	if *grid != "" {
		for _, p := range strList(*grid) {
			w, k, ok := strings.Cut(p, ":")
			wi, err1 := strconv.Atoi(w)
			ki, err2 := strconv.Atoi(k)
			if !ok || err1 != nil || err2 != nil {
				errs = append(errs, fmt.Sprintf("--grid: %q is not W:K", p))
				continue
			}
			c.grid = append(c.grid, [2]int{wi, ki})
		}
	} else {
		var ws, ks []int
		must(&ws, *workers, "workers")
		must(&ks, *keys, "keys")
		for _, w := range ws {
			for _, k := range ks {
				c.grid = append(c.grid, [2]int{w, k})
			}
		}
	}
	if c.rounds < 1 || c.rate < 1 || c.memtableWorkers < 1 || c.memDBs < 1 || c.dbs < 1 || c.hotKeys < 1 {
		errs = append(errs, "--rounds, --rate, --memtable-workers, --mem-dbs, --dbs and --hot-keys must be positive")
	}
	if len(errs) > 0 {
		fmt.Fprintln(os.Stderr, "bench: "+strings.Join(errs, "\nbench: "))
		os.Exit(2)
	}
	return c, *child
}

// buildScenarios turns the flags into the list of scenarios to run.
func buildScenarios(c *config) []scenario {
	var base []engineSpec
	for _, k := range c.engines {
		base = append(base, engineSpec{Name: k, Kind: k})
	}
	baseline := kindNative
	if !slices.Contains(c.engines, kindNative) {
		baseline = c.engines[0]
	}
	open := openOpts{Sync: c.sync, Lanes: c.lanes}
	var out []scenario
	add := func(s scenario) {
		if s.Engines == nil {
			s.Engines = base
		}
		if s.Baseline == "" {
			s.Baseline = baseline
		}
		if s.DBs == 0 {
			s.DBs = 1
		}
		if s.Open == (openOpts{}) {
			s.Open = open
		}
		out = append(out, s)
	}
	W, K, F := c.baseWorkers, c.baseKeys, c.baseF
	if c.scenarios["a"] {
		for _, g := range c.grid {
			for _, f := range c.inflight {
				add(scenario{ID: "a", Label: fmt.Sprintf("a W=%d K=%d F=%d", g[0], g[1], f), Workers: g[0], Keys: g[1], Inflight: f})
			}
		}
	}
	if c.scenarios["s"] { // scenario a's cells with an fsync per commit, every engine
		syncOpen := open
		syncOpen.Sync = true
		for _, g := range [][2]int{{1, 1}, {4, 1}, {8, 1}, {4, 64}} {
			add(scenario{ID: "s", Label: fmt.Sprintf("s W=%d K=%d F=1 sync", g[0], g[1]), Workers: g[0], Keys: g[1], Inflight: 1, Open: syncOpen})
		}
	}
	if c.scenarios["b"] {
		add(scenario{ID: "b", Label: fmt.Sprintf("b %d DBs×1 worker K=%d F=%d", c.dbs, K, F), DBs: c.dbs, Workers: c.dbs, Keys: K, Inflight: F})
	}
	mix := scenario{Workers: W, Keys: K, Inflight: F, SyncWorkers: min(c.mixSync, W)}
	if c.scenarios["c"] {
		s := mix
		s.ID, s.Label = "c", fmt.Sprintf("c mix W=%d (%d sync) K=%d F=%d", W, s.SyncWorkers, K, F)
		add(s)
	}
	if c.scenarios["d"] {
		add(scenario{ID: "d", Label: fmt.Sprintf("d conflicts W=%d F=%d hot=%d", c.conflictWorkers, c.conflictF, c.hotKeys),
			Workers: c.conflictWorkers, Keys: 1, Inflight: c.conflictF, HotKeys: c.hotKeys})
	}
	if c.scenarios["e"] {
		for _, off := range []bool{true, false} {
			o := open
			o.DisableWAL = off
			name := map[bool]string{true: "off", false: "on"}[off]
			var es []engineSpec
			if off { // Badger cannot run without its write-ahead log
				es = slices.DeleteFunc(slices.Clone(base), func(e engineSpec) bool { return e.Kind == kindBadger })
				if len(es) == 0 {
					continue
				}
			}
			bl := baseline
			if es != nil && !slices.ContainsFunc(es, func(e engineSpec) bool { return e.Name == baseline }) {
				bl = es[0].Name // the baseline was Badger
			}
			add(scenario{ID: "e", Label: fmt.Sprintf("e WAL %s W=%d K=%d F=%d", name, W, K, F), Workers: W, Keys: K, Inflight: F, Open: o, Engines: es, Baseline: bl})
		}
	}
	if c.scenarios["f"] {
		var es []engineSpec
		if slices.Contains(c.engines, kindParallel) {
			for _, b := range c.buckets {
				es = append(es, engineSpec{Name: fmt.Sprintf("%s/b%d", kindParallel, b), Kind: kindParallel, Buckets: b})
			}
		}
		for _, k := range []string{kindSerial, kindNative} {
			if slices.Contains(c.engines, k) {
				es = append(es, engineSpec{Name: k, Kind: k})
			}
		}
		s := mix
		s.ID, s.Label, s.Engines = "f", fmt.Sprintf("f buckets, mix W=%d (%d sync) K=%d F=%d", W, s.SyncWorkers, K, F), es
		if len(es) > 0 {
			add(s)
		}
	}
	if c.scenarios["tracing"] {
		var es []engineSpec
		for _, v := range []string{traceNoop, traceNever, traceAlways} {
			es = append(es, engineSpec{Name: kindParallel + "/trace=" + v, Kind: kindParallel, Tracing: v})
		}
		add(scenario{ID: "tracing", Label: fmt.Sprintf("tracing W=%d K=%d F=%d", W, K, F), Engines: es, Baseline: es[0].Name,
			Workers: W, Keys: K, Inflight: F})
	}
	return out
}

func main() {
	cfg, child := parseFlags()
	if child != "" {
		os.Exit(memoryChild(cfg, child))
	}
	if len(cfg.chartsFrom) > 0 {
		os.Exit(chartsFromFiles(cfg))
	}
	tr := newETATracker(os.Stderr, 0)
	start := tr.start
	progress := tr.line
	emit := func(v any) {
		if cfg.json {
			emitJSON(v)
		}
	}
	scenarios := buildScenarios(cfg)

	// The plan and its estimated duration (runs plus about 0.25 s of open/close each).
	runs := 0
	for _, s := range scenarios {
		runs += len(s.Engines) * cfg.rounds
	}
	// Each phase's unit is the planned cost of one of its progress lines (the ETA
	// tracker advances by it per line).
	runUnit := cfg.duration + 250*time.Millisecond
	est := time.Duration(runs) * runUnit
	memVariants := 0
	const memUnit = 3 * time.Second
	if cfg.scenarios["memory"] {
		memVariants = len(memoryVariants(cfg))
		est += time.Duration(memVariants) * memUnit
	}
	// seeding dominates: about 40 µs an event on 2 cores
	eventsUnit := time.Duration(cfg.eventCount) * 40 * time.Microsecond
	if cfg.scenarios["events"] {
		est += time.Duration(cfg.rounds*len(eventsVariants)) * eventsUnit
	}
	appendsRuns := 0
	appendsUnit := cfg.duration + time.Second
	var appendEngines []appendsEngine
	if cfg.scenarios["appends"] {
		appendEngines = appendsEngines(cfg.appendsEngines, progress)
		for _, cell := range appendsCells() {
			for _, e := range appendEngines {
				if anchorRuns(e.name, cell) {
					appendsRuns += cfg.rounds
				}
			}
		}
		est += time.Duration(appendsRuns) * appendsUnit
	}
	// two loads at about 1 µs a key, then the runs, each with an ingestion
	largeLoadUnit, largeRunUnit := time.Duration(cfg.largeKeys)*time.Microsecond, cfg.duration+2*time.Second
	if cfg.scenarios["cluster"] { // about 5 s to start the cluster, 1 s per run to open a stream
		est += 5*time.Second + time.Duration(len(clusterCells)*cfg.rounds*len(clusterEngines))*(cfg.duration+time.Second)
	}
	if cfg.scenarios["scale"] {
		for _, u := range scalePlan(cfg) {
			est += u
		}
	}
	// the load at about 10 µs an event, then 2 reads a round, a scan at about 1 µs an event
	indexUnit := time.Duration(cfg.indexEvents) * 10 * time.Microsecond
	if cfg.scenarios["index"] {
		est += indexUnit + time.Duration(cfg.rounds*cfg.indexEvents)*time.Microsecond
	}
	if cfg.scenarios["jsbare"] { // about 5 s to start the cluster, 2 s per run to open and delete its streams
		n := 0
		for _, g := range jsbareGroups(cfg.jsbareWorkers, cfg.jsbarePartitions, cfg.jsbareSides, cfg.jsbareScaleWorkers) {
			n += len(g)
		}
		est += 5*time.Second + time.Duration(n*cfg.rounds)*(cfg.duration+2*time.Second)
	}
	if cfg.scenarios["large"] {
		est += 2 * largeLoadUnit
		est += time.Duration(cfg.rounds*2*len(cfg.largeEngines)) * largeRunUnit
	}
	mtRuns := 0
	mtUnit := cfg.memtableDuration + time.Second
	if cfg.memtable {
		mtRuns = len(cfg.memtableEngines) * len(cfg.memtableSizes) * len(cfg.memtableCounts)
		est += time.Duration(mtRuns) * mtUnit
	}
	tr.plan(est)
	progress(fmt.Sprintf("plan: %d scenarios × %d rounds = %d runs of %s, %d memory variants, %d memtable runs of %s; estimated %s",
		len(scenarios), cfg.rounds, runs, cfg.duration, memVariants, mtRuns, cfg.memtableDuration, est.Round(time.Second)))
	if cfg.plan {
		for _, s := range scenarios {
			names := make([]string, len(s.Engines))
			for i, e := range s.Engines {
				names[i] = e.Name
			}
			fmt.Fprintf(os.Stderr, "  %s: %s (baseline %s)\n", s.Label, strings.Join(names, ", "), s.Baseline)
		}
		return
	}

	stopProfile := func() {}
	if cfg.cpuProfile != "" {
		stop, err := startCPUProfile(cfg.cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(2)
		}
		stopProfile = stop
	}
	failed := false
	var aggs []*aggregate
	for _, sc := range scenarios {
		byEngine := map[string]*aggregate{}
		for _, e := range sc.Engines {
			a := &aggregate{label: sc.Label, engine: e.Name, baseline: sc.Baseline}
			byEngine[e.Name] = a
			aggs = append(aggs, a)
		}
		for r := 1; r <= cfg.rounds; r++ {
			n := len(sc.Engines)
			order := make([]engineSpec, 0, n)
			for i := range n {
				order = append(order, sc.Engines[(i+r-1)%n])
			}
			var round []runResult
			for _, spec := range order {
				res := runScenarioOnce(cfg, sc, spec, r)
				tr.advance(runUnit)
				round = append(round, res)
				extra := ""
				if res.Conflicts > 0 {
					extra += fmt.Sprintf(", %s conflicts/s", fmtRate(res.ConflictsPerS))
				}
				if res.LostUpdates != nil {
					extra += fmt.Sprintf(", lost updates %d", *res.LostUpdates)
				}
				if res.Error != "" {
					extra += ", ERROR: " + res.Error
				}
				progress(fmt.Sprintf("%s | %s | round %d/%d | %s commits/s, commit p99 %s%s",
					sc.Label, spec.Name, r, cfg.rounds, fmtRate(res.CommitsPerS), fmtUS(res.CommitLat.P99), extra))
			}
			setRatios(round, sc.Baseline)
			for _, res := range round {
				emit(res)
				byEngine[res.Engine].runs = append(byEngine[res.Engine].runs, res)
				if res.Error != "" {
					failed = true
				}
				if res.LostUpdates != nil && *res.LostUpdates != 0 && !strings.HasPrefix(res.Engine, kindRaw) {
					failed = true
				}
			}
		}
	}

	var mem []memResult
	if cfg.scenarios["memory"] {
		mem = runMemory(cfg, tr.each(memUnit))
		for _, m := range mem {
			emit(m)
			if m.Error != "" {
				failed = true
			}
		}
	}
	var evs [][]eventsResult
	if cfg.scenarios["events"] {
		evs = runEvents(cfg, tr.each(eventsUnit), emit)
		for _, runs := range evs {
			for _, r := range runs {
				if r.Error != "" {
					failed = true
				}
			}
		}
	}
	var apps map[string][]appendsResult
	if cfg.scenarios["appends"] {
		apps = runAppends(cfg, appendEngines, tr.each(appendsUnit), emit)
		stopPG()
		for _, runs := range apps {
			for _, r := range runs {
				if r.Error != "" {
					failed = true
				}
			}
		}
	}
	var clusterRuns map[string][]clusterResult
	if cfg.scenarios["cluster"] {
		var err error
		if clusterRuns, err = runCluster(cfg, progress, emit); err != nil {
			progress("cluster: " + err.Error())
			failed = true
		}
		for _, runs := range clusterRuns {
			for _, r := range runs {
				if r.Error != "" {
					failed = true
				}
			}
		}
	}
	var jsbareRuns []jsbareResult
	if cfg.scenarios["jsbare"] {
		var err error
		if jsbareRuns, err = runJSBare(cfg, progress, emit); err != nil {
			progress("jsbare: " + err.Error())
			failed = true
		}
		for _, r := range jsbareRuns {
			if r.Error != "" {
				failed = true
			}
		}
	}
	var largeLoads []*largeLoad
	var largeRounds [][]largeResult
	if cfg.scenarios["large"] {
		largeLoads, largeRounds = runLarge(cfg, progress, emit, func(loaded bool) {
			if loaded {
				tr.advance(largeLoadUnit)
			} else {
				tr.advance(largeRunUnit)
			}
		})
		for _, l := range largeLoads {
			if l.Error != "" {
				failed = true
			}
		}
		for _, round := range largeRounds {
			for _, r := range round {
				if r.Error != "" {
					failed = true
				}
			}
		}
	}
	var scaleRows []scaleResult
	if cfg.scenarios["scale"] {
		scaleRows = runScale(cfg, progress, emit, tr.advance)
		for _, r := range scaleRows {
			if r.Error != "" {
				failed = true
			}
		}
	}
	var indexRows []indexResult
	if cfg.scenarios["index"] {
		indexRows = runIndex(cfg, progress, emit)
		tr.advance(indexUnit)
		for _, r := range indexRows {
			if r.Error != "" {
				failed = true
			}
		}
	}
	var mt []memtableResult
	if cfg.memtable {
		mt = runMemtableSweep(cfg, tr.each(mtUnit), emit)
		for _, m := range mt {
			if m.Error != "" {
				failed = true
			}
		}
	}

	w := os.Stdout
	stdoutMu.Lock()
	defer stdoutMu.Unlock()
	mode := "full"
	if cfg.quick {
		mode = "quick"
	}
	fmt.Fprintf(w, "\n## rockline bench (%s mode, %s per run, %d rounds, GOMAXPROCS=%d, all engines in one process)\n\n", mode, cfg.duration, cfg.rounds, runtime.GOMAXPROCS(0))
	if len(aggs) > 0 {
		writeRunTable(w, aggs, cfg.rounds)
	}
	if len(mem) > 0 {
		fmt.Fprintf(w, "\n### Memory of empty databases\n\n")
		writeMemoryTable(w, mem)
	}
	if len(evs) > 0 {
		fmt.Fprintf(w, "\n### Event store: projections and filtered subscriptions\n\n")
		writeEventsTable(w, evs, cfg.eventCount)
	}
	if len(apps) > 0 {
		fmt.Fprintf(w, "\n### Event appends: rockline, PostgreSQL (Message DB schema), NATS JetStream\n\n")
		writeAppendsTable(w, apps, appendEngines)
	}
	if len(clusterRuns) > 0 {
		fmt.Fprintf(w, "\n### Scale-out engine: the local engine against JetStream with 1 and 3 replicas\n\n")
		writeClusterTable(w, clusterRuns)
	}
	if len(jsbareRuns) > 0 {
		fmt.Fprintf(w, "\n### JetStream engine against the bare atomic batch publish, and partitions\n\n")
		writeJSBareTables(w, cfg, jsbareRuns)
	}
	if len(largeLoads) > 0 {
		fmt.Fprintf(w, "\n### Data larger than the block cache: bloom filters on and off\n\n")
		writeLargeTables(w, cfg, largeLoads, largeRounds)
	}
	if len(scaleRows) > 0 {
		fmt.Fprintf(w, "\n### Flat at scale: one event store grown through %d sizes\n\n", len(scaleRows))
		writeScaleTable(w, cfg, scaleRows)
	}
	if len(indexRows) > 0 {
		fmt.Fprintf(w, "\n### Indexes: 1%% of the events read through the type index and by a scan of the log\n\n")
		writeIndexTable(w, indexRows)
	}
	if len(mt) > 0 {
		fmt.Fprintf(w, "\n### Memtable sweep\n\n")
		writeMemtableTable(w, mt)
	}
	stopProfile()
	if cfg.charts != "" {
		names, err := writeCharts(cfg.charts, chartData{aggs: aggs, memtable: mt, appends: apps,
			appendsEngines: appendsEngineNames(appendEngines), large: largeRounds})
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench: charts:", err)
			failed = true
		}
		progress(fmt.Sprintf("charts: %d written to %s", len(names), cfg.charts))
	}
	total := time.Since(start)
	fmt.Fprintf(w, "\nTotal elapsed: %s\n", total.Round(100*time.Millisecond))
	progress(fmt.Sprintf("done in %s", total.Round(100*time.Millisecond)))
	if failed {
		fmt.Fprintln(os.Stderr, "bench: some runs failed or lost updates (see the check column)")
		os.Exit(1)
	}
}
