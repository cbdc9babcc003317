package main

import (
	"fmt"
	"io"
	"strings"
)

// jsbareRow is one cell and side's rounds, summarised: medians, and the range of
// commits/s.
type jsbareRow struct {
	rate, lo, hi, p50, p99, cpu, cost, cpuCost, toOne, resends float64
	err                                                        string
}

func summariseJSBare(runs []jsbareResult) (row jsbareRow, ok bool) {
	var rate, p50, p99, cpu, cost, cpuCost, toOne, resends []float64
	for _, r := range runs {
		if r.Error != "" {
			row.err, _, _ = strings.Cut(r.Error, "\n") // the first of the workers' errors
			continue
		}
		rate, p50, p99, cpu = append(rate, r.CommitsPerS), append(p50, r.Latency.P50), append(p99, r.Latency.P99), append(cpu, r.CPUPerCommit)
		resends = append(resends, r.InFlightPerCommit)
		if r.CostToBare > 0 {
			cost, cpuCost = append(cost, r.CostToBare), append(cpuCost, r.CPUToBare)
		}
		if r.ToOnePartition > 0 {
			toOne = append(toOne, r.ToOnePartition)
		}
	}
	if len(rate) == 0 {
		return row, false
	}
	row.lo, row.hi = minMax(rate)
	row.rate, row.p50, row.p99, row.cpu = median(rate), median(p50), median(p99), median(cpu)
	row.cost, row.cpuCost, row.toOne, row.resends = median(cost), median(cpuCost), median(toOne), median(resends)
	return row, true
}

// ratioCell prints a median ratio, or a dash where there is none (the bare side
// itself, one partition).
func ratioCell(v float64) string {
	if v == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f", v)
}

// writeJSBareTables prints the commit cells (each side against the bare publish) and
// the partitions cells (each partition count against one).
func writeJSBareTables(w io.Writer, cfg *config, rs []jsbareResult) {
	groups := jsbareGroups(cfg.jsbareWorkers, cfg.jsbarePartitions, cfg.jsbareSides, cfg.jsbareScaleWorkers)
	fmt.Fprintf(w, "| cell | side | commits/s median [min–max] | cost ÷ bare | p50 | p99 | CPU µs/commit | CPU ÷ bare | re-sends/commit |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, g := range groups {
		for _, x := range g {
			if x.cell.scaling {
				continue
			}
			row, ok := summariseJSBare(jsbareRunsOf(rs, x.cell.label(), x.side))
			if !ok {
				fmt.Fprintf(w, "| %s | %s | ERROR: %s | | | | | | |\n", x.cell.label(), x.side, row.err)
				continue
			}
			fmt.Fprintf(w, "| %s | %s | %s [%s–%s] | %s | %s | %s | %.0f | %s | %.2f |\n", x.cell.label(), x.side, fmtRate(row.rate), fmtRate(row.lo), fmtRate(row.hi),
				ratioCell(row.cost), fmtUS(row.p50), fmtUS(row.p99), row.cpu, ratioCell(row.cpuCost), row.resends)
		}
	}
	fmt.Fprintf(w, "\ncost ÷ bare: the bare publish's commits/s over the side's in the same round (what one commit costs against the bare atomic batch publish of the same messages; target at most 1.25), median of the rounds; CPU ÷ bare likewise for CPU per commit (the whole process: client and the three nodes); re-sends/commit: batches sent again after \"subject in flight\" (10164: a concurrent batch expects a version of the same subject), per commit.\n")
	if len(cfg.jsbarePartitions) == 0 {
		return
	}
	fmt.Fprintf(w, "\n| cell | side | commits/s median [min–max] | ÷ 1 partition | cost ÷ bare | p50 | p99 | CPU µs/commit | re-sends/commit |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, g := range groups {
		for _, x := range g {
			if !x.cell.scaling {
				continue
			}
			row, ok := summariseJSBare(jsbareRunsOf(rs, x.cell.label(), x.side))
			if !ok {
				fmt.Fprintf(w, "| %s | %s | ERROR: %s | | | | | | |\n", x.cell.label(), x.side, row.err)
				continue
			}
			fmt.Fprintf(w, "| %s | %s | %s [%s–%s] | %s | %s | %s | %s | %.0f | %.2f |\n", x.cell.label(), x.side, fmtRate(row.rate), fmtRate(row.lo), fmtRate(row.hi),
				ratioCell(row.toOne), ratioCell(row.cost), fmtUS(row.p50), fmtUS(row.p99), row.cpu, row.resends)
		}
	}
	fmt.Fprintf(w, "\n÷ 1 partition: the side's commits/s over its own with one partition in the same round, median of the rounds. api appends through partitioned.Store (each worker its own, over one database per partition on the worker's connection); bare publishes the same batches to as many streams; worker w's stream is on partition w mod n.\n")
}
