package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"sync"
)

var stdoutMu sync.Mutex

// emitJSON prints one JSON line to stdout.
func emitJSON(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		b = fmt.Appendf(nil, `{"error":%q}`, err.Error())
	}
	stdoutMu.Lock()
	defer stdoutMu.Unlock()
	os.Stdout.Write(append(b, '\n'))
}

// setRatios fills each result's ratio to the round's baseline engine.
func setRatios(round []runResult, baseline string) {
	var base float64
	for _, r := range round {
		if r.Engine == baseline && r.Error == "" {
			base = r.CommitsPerS
		}
	}
	for i := range round {
		if base > 0 {
			round[i].Ratio = round[i].CommitsPerS / base
		}
	}
}

// aggregate is one engine's rounds of one scenario.
type aggregate struct {
	label, engine, baseline string
	runs                    []runResult
}

func (a *aggregate) col(f func(runResult) float64) []float64 {
	out := make([]float64, 0, len(a.runs))
	for _, r := range a.runs {
		if r.Error == "" || r.Commits > 0 {
			out = append(out, f(r))
		}
	}
	return out
}

func fmtRate(v float64) string {
	switch {
	case v >= 100_000:
		return fmt.Sprintf("%.0fk", v/1000)
	case v >= 10_000:
		return fmt.Sprintf("%.1fk", v/1000)
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v > 0:
		return fmt.Sprintf("%.1f", v)
	}
	return "0"
}

// fmtUS formats microseconds.
func fmtUS(us float64) string {
	switch {
	case us >= 1e6:
		return fmt.Sprintf("%.2fs", us/1e6)
	case us >= 10_000:
		return fmt.Sprintf("%.0fms", us/1000)
	case us >= 1000:
		return fmt.Sprintf("%.1fms", us/1000)
	case us >= 100:
		return fmt.Sprintf("%.0fµs", us)
	}
	return fmt.Sprintf("%.1fµs", us)
}

func writeRunTable(w io.Writer, aggs []*aggregate, rounds int) {
	fmt.Fprintf(w, "| scenario | engine | commits/s median [min–max] | × base | conflicts/s | commit p50 / p95 / p99 / max | txn p50 / p99 | CPU/commit | sched waits/commit (p99) | check |\n")
	fmt.Fprintf(w, "|---|---|---|---|---|---|---|---|---|---|\n")
	for _, a := range aggs {
		cps := a.col(func(r runResult) float64 { return r.CommitsPerS })
		lo, hi := minMax(cps)
		ratio := median(a.col(func(r runResult) float64 { return r.Ratio }))
		ratioS := "—"
		if a.engine == a.baseline {
			ratioS = "base"
		} else if ratio > 0 {
			ratioS = fmt.Sprintf("%.2f", ratio)
		}
		conf := median(a.col(func(r runResult) float64 { return r.ConflictsPerS }))
		maxLat := 0.0
		for _, v := range a.col(func(r runResult) float64 { return r.CommitLat.Max }) {
			maxLat = math.Max(maxLat, v)
		}
		lat := fmt.Sprintf("%s / %s / %s / %s",
			fmtUS(median(a.col(func(r runResult) float64 { return r.CommitLat.P50 }))),
			fmtUS(median(a.col(func(r runResult) float64 { return r.CommitLat.P95 }))),
			fmtUS(median(a.col(func(r runResult) float64 { return r.CommitLat.P99 }))),
			fmtUS(maxLat))
		txn := fmt.Sprintf("%s / %s",
			fmtUS(median(a.col(func(r runResult) float64 { return r.TxnLat.P50 }))),
			fmtUS(median(a.col(func(r runResult) float64 { return r.TxnLat.P99 }))))
		cpu := fmtUS(median(a.col(func(r runResult) float64 { return r.CPUPerCommit })))
		sched := fmt.Sprintf("%.2f (%s)", median(a.col(func(r runResult) float64 { return r.SchedWaitsPerCommit })),
			fmtUS(median(a.col(func(r runResult) float64 { return r.SchedWaitP99 }))))
		fmt.Fprintf(w, "| %s | %s | %s [%s–%s] | %s | %s | %s | %s | %s | %s | %s |\n",
			a.label, a.engine, fmtRate(median(cps)), fmtRate(lo), fmtRate(hi), ratioS, fmtRate(conf), lat, txn, cpu, sched, check(a))
	}
	fmt.Fprintf(w, "\nMedians of %d rounds (engine order rotated each round); × base is the median of per-round ratios of commits/s to the scenario's baseline engine (native-occ; rockline-parallel/trace=noop in the tracing scenario). Commit latency: submit to acknowledgement; txn latency: begin to acknowledgement (conflicts scenario: first attempt's begin to the successful acknowledgement); max is the maximum over rounds. CPU/commit: process user+sys time (RocksDB background threads and Badger's goroutines included) over the run / commits. Sched waits/commit: how often per commit a goroutine became runnable and waited for a core (Go's /sched/latencies:seconds over the run), with the p99 of that wait. badger-v4 runs Badger's defaults with an 8 MiB block cache, keys under a prefix per family, and no WAL-off variant (it cannot run without one).\n", rounds)
}

// check summarises errors, the no-lost-update check and span counts.
func check(a *aggregate) string {
	var parts []string
	if per := a.col(func(r runResult) float64 { return r.CommitsPerFsync }); len(per) > 0 && median(per) > 0 {
		parts = append(parts, fmt.Sprintf("%.1f commits/fsync", median(per)))
	}
	for _, r := range a.runs {
		if r.Error != "" {
			e := r.Error
			if len(e) > 80 {
				e = e[:80] + "…"
			}
			parts = append(parts, fmt.Sprintf("ERROR r%d: %s", r.Round, strings.ReplaceAll(e, "|", "/")))
		}
	}
	lost, checked := int64(0), false
	for _, r := range a.runs {
		if r.LostUpdates != nil {
			checked = true
			lost += *r.LostUpdates
		}
	}
	if checked {
		validates := !strings.HasPrefix(a.engine, kindRaw)
		switch {
		case lost == 0:
			parts = append(parts, "no lost update ✓")
		case validates:
			parts = append(parts, fmt.Sprintf("LOST %d UPDATES ✗", lost))
		default:
			parts = append(parts, fmt.Sprintf("lost %d (no validation, expected)", lost))
		}
	}
	if s := a.col(func(r runResult) float64 {
		if r.SpansPerTxn == nil {
			return -1
		}
		return *r.SpansPerTxn
	}); len(s) > 0 && median(s) >= 0 {
		parts = append(parts, fmt.Sprintf("%.1f spans/commit exported", median(s)))
	}
	return strings.Join(parts, "; ")
}

func writeMemoryTable(w io.Writer, rs []memResult) {
	if len(rs) == 0 {
		return
	}
	fmt.Fprintf(w, "| engine | anonymous MiB per DB | Go heap MiB per DB | bucket pool MiB per DB | note |\n|---|---|---|---|---|\n")
	for _, r := range rs {
		note := r.Error
		fmt.Fprintf(w, "| %s | %.2f | %.2f | %.2f | %s |\n", r.Engine, r.AnonPerDB, r.HeapPerDB, r.PoolPerDB, note)
	}
	fmt.Fprintf(w, "\nGrowth for opening %d empty databases of each variant in a fresh child process (after 2 warm-up opens), divided by %d; anonymous = /proc/self/smaps_rollup Anonymous (resident), Go heap = HeapAlloc after GC. The parallel validator's bucket pool is allocated zeroed in the Go heap and not touched at Open: it shows in Go heap growth at once but is not resident (and so not in anonymous memory) until commits lock its buckets. native-occ's figure is RocksDB's OptimisticTransactionDB lock table (occ_lock_buckets, default 1<<20, which RocksDB 7.8's C API cannot change); the native engines use the same options as rockline's storage layer (statistics on, 8 MiB block cache). badger-v4's Go heap is mostly its first memtable's arena (about 83 MiB: the 64 MiB memtable plus batch allowances, allocated at Open, resident only as it fills).\n", rs[0].DBs, rs[0].DBs)
}

func writeMemtableTable(w io.Writer, rs []memtableResult) {
	if len(rs) == 0 {
		return
	}
	fmt.Fprintf(w, "| engine | write buffer × count | commits/s (target) | behind | device write MiB | flushed MiB | compacted MiB | stall ms | peak imm data / all | commit p99 / max | note |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rs {
		fmt.Fprintf(w, "| %s | %g MiB × %d | %s (%d) | %d | %.1f | %.1f | %.1f | %.0f | %d / %d | %s / %s | %s |\n",
			r.Engine, r.WriteBufferMiB, r.WriteBuffers, fmtRate(r.CommitsPerS), r.TargetRate, r.Behind,
			r.DeviceWriteMiB, r.FlushedMiB, r.CompactedMiB, r.StallMillis, r.PeakImmData, r.PeakImmAll,
			fmtUS(r.CommitLat.P99), fmtUS(r.CommitLat.Max), r.Error)
	}
	r := rs[0]
	fmt.Fprintf(w, "\nPaced load: %d commits/s target, %d keys × %d B random values per commit (blind writes, uniform keys), %.0f s per configuration, WAL on; the data family gets the memtable settings (rockline's own log family keeps RocksDB's defaults, and the native engines' log family likewise). Device write = /proc/self/io write_bytes delta (WAL + flushes + compactions); flushed/compacted/stall = RocksDB statistics deltas; peak immutable memtables polled every %d ms; behind = commits due by the schedule but never started.\n",
		r.TargetRate, r.KeysPerCommit, r.ValueBytes, r.Seconds, r.StatsPollMillis)
}
