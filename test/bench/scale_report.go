package main

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

// writeScaleTable prints one row per size of the scale scenario, then how it was run.
func writeScaleTable(w io.Writer, cfg *config, rows []scaleResult) {
	fmt.Fprintf(w, "| events | load s (events/s) | settle s | disk GiB (B/event) | WAL GiB | SST GiB by family | RSS / anon / peak RSS MiB | appends/s | append p50 / p99 | append p99 × smallest | CPU/append | reads/s | read p50 / p99 | read p99 × smallest | CPU/read | KiB read per read (device) | load avg | error |\n")
	fmt.Fprintf(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(w, "| %d | %.1f (%s) | %.1f | %.2f (%.0f) | %.2f | %s | %.0f / %.0f / %.0f | %s | %s / %s | %.2f | %s | %s | %s / %s | %.2f | %s | %.0f (%.1f) | %.1f | %s |\n",
			r.Events, r.LoadSeconds, fmtRate(r.LoadEventsPerS), r.SettleSeconds,
			float64(r.DiskBytes)/(1<<30), ratioOf(float64(r.DiskBytes), float64(r.Events)), float64(r.WALBytes)/(1<<30), sstByFamily(r.SSTBytes),
			r.RSSMiB, r.AnonMiB, r.PeakRSSMiB,
			fmtRate(r.AppendsPerS), fmtUS(r.AppendLat.P50), fmtUS(r.AppendLat.P99), r.AppendP99Ratio, fmtUS(r.AppendCPU),
			fmtRate(r.ReadsPerS), fmtUS(r.ReadLat.P50), fmtUS(r.ReadLat.P99), r.ReadP99Ratio, fmtUS(r.ReadCPU), r.ReadReadKiB, r.ReadDeviceKiB, r.LoadAvg,
			strings.ReplaceAll(r.Error, "|", "/"))
	}
	fmt.Fprintf(w, "\nOne database (eventstore over pipeline.Open, default config: 8 MiB block cache, WAL on, no sync) grown through the sizes in turn by appends through eventstore.Store.Append: streams of %d events of %d B (with 32-character IDs), %d events per commit, %d workers, every stream's commits interleaved over the log; after each growth, a wait (at most %s) for flushes and compactions to finish. Then at each size, for %s each: %d workers appending one event at a time, by turns to a random existing stream (at its exact revision) and to a new one; then %d workers reading random loaded streams whole (every read checked event by event). Latencies are each call's wall time; CPU/append and CPU/read are the process's CPU time over the phase (RocksDB's background threads included) per call; KiB read = /proc/self/io rchar over the read phase per read (SST blocks read with pread, page-cache hits included), device = read_bytes (the part the disk served). Disk = blocks allocated under the folder (du), WAL = the write-ahead log files' size among them; memory after the phases and a GC, from /proc/self (peak RSS: the highest so far, the loads included). × smallest = p99 over the first size's p99; load avg = the machine's 1-minute load average after the phases.\n",
		scaleStreamEvents, scaleEventBytes, cfg.scaleLoadBatch, cfg.scaleLoadWorkers, cfg.scaleSettle, cfg.scaleDuration, cfg.scaleWorkers, cfg.scaleWorkers)
}

// sstByFamily is "log 1.23, streams 0.45": each family's SST GiB, without the
// "rockline." prefix, largest first.
func sstByFamily(m map[string]uint64) string {
	names := slices.SortedFunc(maps.Keys(m), func(a, b string) int { return cmp.Compare(m[b], m[a]) })
	var parts []string
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s %.2f", strings.TrimPrefix(n, "rockline."), float64(m[n])/(1<<30)))
	}
	return strings.Join(parts, ", ")
}
