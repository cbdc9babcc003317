package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rockline/rockline/jetstream/jstest"
)

// The jsbare scenario: the JetStream engine against its own limit, on one embedded
// 3-node cluster on 127.0.0.1 with sync_interval: always (jstest's default). Each
// worker appends one 100-byte event at a time to its own event stream, expecting its
// revision: through the public API (eventstore.Store.Append on jetstream.OpenDB, one
// database per worker), and as the bare atomic batch publish of the same messages
// (jsbare_batch.go), without reads, with the engine's two reads, and with the
// Direct Get alone (jsbare_sides.go). Then partitions:
// the same appends from several workers through partitioned.Store over 1, 2 and 4
// partitions (streams), each worker's stream on partition w mod n, beside the bare
// publish to as many streams. Every run gets fresh streams, deleted after it; each
// worker commits once before the clock starts; the order of the runs rotates each
// round. Every node, the client and the harness share the machine's cores: CPU per
// commit is the whole process's, servers included.

// jsbareCell is a cell of the scenario: workers appending over partitions; scaling
// cells go through partitioned.Store.
type jsbareCell struct {
	workers, partitions int
	scaling             bool
}

func (c jsbareCell) label() string {
	if c.scaling {
		return fmt.Sprintf("partitions=%d, W=%d", c.partitions, c.workers)
	}
	return fmt.Sprintf("W=%d", c.workers)
}

// jsbareRun is one run of a round: a side in a cell.
type jsbareRun struct {
	cell jsbareCell
	side string
}

// jsbareGroups are the scenario's groups of runs, each measured in rounds with its
// order rotated: one group per worker count (every side), and the partitions group
// (api and bare at each partition count, scalingWorkers workers).
func jsbareGroups(workers, partitions []int, sides []string, scalingWorkers int) [][]jsbareRun {
	var out [][]jsbareRun
	for _, w := range workers {
		var g []jsbareRun
		for _, s := range sides {
			g = append(g, jsbareRun{jsbareCell{workers: w, partitions: 1}, s})
		}
		out = append(out, g)
	}
	var g []jsbareRun
	for _, p := range partitions {
		for _, s := range sides {
			if s == sideAPI || s == sideBare {
				g = append(g, jsbareRun{jsbareCell{workers: scalingWorkers, partitions: p, scaling: true}, s})
			}
		}
	}
	if len(g) > 0 {
		out = append(out, g)
	}
	return out
}

type jsbareResult struct {
	Scenario     string  `json:"scenario"`
	Cell         string  `json:"cell"`
	Side         string  `json:"side"`
	Workers      int     `json:"workers"`
	Partitions   int     `json:"partitions"`
	Round        int     `json:"round"`
	Commits      int64   `json:"commits"`
	CommitsPerS  float64 `json:"commits_per_s"`
	Latency      latency `json:"commit_latency"`
	CPUPerCommit float64 `json:"cpu_us_per_commit"`
	// InFlightPerCommit is the batches sent again after "subject in flight" (10164)
	// per commit.
	InFlightPerCommit float64 `json:"inflight_resends_per_commit"`
	// FenceWaitsPerCommit is the snapshot reads asked again, the replica answering
	// behind the position, per commit.
	FenceWaitsPerCommit float64 `json:"fence_waits_per_commit"`
	// CostToBare is the bare side's commits/s over this side's in the same cell and
	// round: what one commit costs against the bare publish (1.25 is the target).
	CostToBare float64 `json:"cost_to_bare,omitempty"`
	// CPUToBare is this side's CPU per commit over the bare side's.
	CPUToBare float64 `json:"cpu_to_bare,omitempty"`
	// ToOnePartition is this side's commits/s over its own with one partition in the
	// same round (scaling cells).
	ToOnePartition float64 `json:"to_one_partition,omitempty"`
	Error          string  `json:"error,omitempty"`
	scaling        bool    // a cell of the partitions group
}

// runJSBare starts the cluster and runs every group cfg.rounds times.
func runJSBare(cfg *config, progress func(string), emit func(any)) ([]jsbareResult, error) {
	dir, err := os.MkdirTemp(cfg.dir, "rockline-bench-jsbare-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	c, err := jstest.Start(jstest.Options{Dir: filepath.Join(dir, "cluster")})
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	defer func() { _ = c.Shutdown() }()
	return runJSBareOn(cfg, c, progress, emit), nil
}

// runJSBareOn runs every group of the scenario cfg.rounds times on cluster c.
func runJSBareOn(cfg *config, c *jstest.Cluster, progress func(string), emit func(any)) []jsbareResult {
	var out []jsbareResult
	run := 0
	for _, g := range jsbareGroups(cfg.jsbareWorkers, cfg.jsbarePartitions, cfg.jsbareSides, cfg.jsbareScaleWorkers) {
		for r := 1; r <= cfg.rounds; r++ {
			var round []jsbareResult
			for i := range g {
				x := g[(i+r-1)%len(g)]
				run++
				res := runJSBareOnce(cfg, c, run, x.cell, x.side, r)
				msg := fmt.Sprintf("jsbare | %s | %s | round %d/%d | %s commits/s, p50 %s, p99 %s, %.0f µs CPU each", x.cell.label(), x.side, r, cfg.rounds,
					fmtRate(res.CommitsPerS), fmtUS(res.Latency.P50), fmtUS(res.Latency.P99), res.CPUPerCommit)
				if res.Error != "" {
					msg += ", ERROR: " + res.Error
				}
				progress(msg)
				round = append(round, res)
			}
			setJSBareRatios(round)
			for _, res := range round {
				emit(res)
			}
			out = append(out, round...)
		}
	}
	return out
}

// setJSBareRatios fills a round's ratios: to the bare side in the same cell, and to
// the same side on one partition.
func setJSBareRatios(round []jsbareResult) {
	find := func(cell, side string) *jsbareResult {
		for i := range round {
			if round[i].Cell == cell && round[i].Side == side && round[i].Error == "" && round[i].Commits > 0 {
				return &round[i]
			}
		}
		return nil
	}
	for i := range round {
		r := &round[i]
		if r.Error != "" || r.Commits == 0 {
			continue
		}
		if b := find(r.Cell, sideBare); b != nil && r.Side != sideBare {
			r.CostToBare = b.CommitsPerS / r.CommitsPerS
			if b.CPUPerCommit > 0 {
				r.CPUToBare = r.CPUPerCommit / b.CPUPerCommit
			}
		}
		if r.scaling {
			if one := find(jsbareCell{workers: r.Workers, partitions: 1, scaling: true}.label(), r.Side); one != nil {
				r.ToOnePartition = r.CommitsPerS / one.CommitsPerS
			}
		}
	}
}

// runJSBareOnce opens side's appenders in cell on fresh streams, commits once from
// every worker, then measures cfg.duration of appends.
func runJSBareOnce(cfg *config, c *jstest.Cluster, run int, cell jsbareCell, side string, round int) (res jsbareResult) {
	res = jsbareResult{Scenario: "jsbare", Cell: cell.label(), Side: side, Workers: cell.workers, Partitions: cell.partitions, Round: round, scaling: cell.scaling}
	s, err := openJSSide(c, side, run, cell.workers, cell.partitions, cell.scaling)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	defer func() {
		if err := s.close(); err != nil && res.Error == "" {
			res.Error = err.Error()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), cfg.duration+cfg.runTimeout)
	defer cancel()
	errs := make([]error, cell.workers)
	var wg sync.WaitGroup
	for w, app := range s.appenders { // the first commit of each worker, untimed
		wg.Go(func() { errs[w] = app(ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		res.Error = "first commit: " + err.Error()
		return res
	}
	hists := make([]hist, cell.workers)
	var commits atomic.Int64
	cpu0, start, inFlight0, fence0 := cpuTime(), time.Now(), s.inFlight(), s.fenceWaits()
	deadline := start.Add(cfg.duration)
	for w, app := range s.appenders {
		wg.Go(func() { // ends at the deadline or on the first error
			for time.Now().Before(deadline) {
				t0 := time.Now()
				if err := app(ctx); err != nil {
					errs[w] = err
					return
				}
				hists[w].add(time.Since(t0))
				commits.Add(1)
			}
		})
	}
	wg.Wait()
	elapsed, cpu, inFlight := time.Since(start), cpuTime()-cpu0, s.inFlight()-inFlight0
	if err := errors.Join(errs...); err != nil {
		res.Error = err.Error()
		return res
	}
	var h hist
	for i := range hists {
		h.merge(&hists[i])
	}
	res.Commits = commits.Load()
	res.CommitsPerS = float64(res.Commits) / elapsed.Seconds()
	res.Latency = h.summary()
	if res.Commits > 0 {
		res.CPUPerCommit = float64(cpu.Microseconds()) / float64(res.Commits)
		res.InFlightPerCommit = float64(inFlight) / float64(res.Commits)
		res.FenceWaitsPerCommit = float64(s.fenceWaits()-fence0) / float64(res.Commits)
	}
	return res
}

// jsbareRunsOf returns the results of one cell and side, in round order.
func jsbareRunsOf(rs []jsbareResult, cell, side string) []jsbareResult {
	var out []jsbareResult
	for _, r := range rs {
		if r.Cell == cell && r.Side == side {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b jsbareResult) int { return a.Round - b.Round })
	return out
}
