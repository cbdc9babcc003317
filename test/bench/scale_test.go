package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"
)

// TestScaleScenario grows one database through two tiny sizes and checks each size's
// JSON line: the size reached, appends and reads measured (every read checks its
// stream event by event), disk growing with the size, memory read, the ratios to the
// first size; then the table, and no file left behind.
func TestScaleScenario(t *testing.T) {
	cfg := smokeConfig(t)
	cfg.scaleSizes = []int{2_000, 20_000}
	cfg.scaleDuration, cfg.scaleSettle = 150*time.Millisecond, time.Minute
	cfg.scaleWorkers, cfg.scaleLoadWorkers, cfg.scaleLoadBatch = 2, 4, 10
	var lines []map[string]any
	var progress []string
	var advanced time.Duration
	rows := runScale(cfg, func(s string) { progress = append(progress, s) }, func(v any) {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, m)
	}, func(d time.Duration) { advanced += d })
	if len(rows) != 2 || len(lines) != 2 {
		t.Fatalf("%d rows, %d JSON lines; want 2 of each\n%s", len(rows), len(lines), strings.Join(progress, "\n"))
	}
	if plan := scalePlan(cfg); advanced != plan[0]+plan[1] {
		t.Errorf("progress advanced by %s, want the plan's %s", advanced, plan[0]+plan[1])
	}
	for i, r := range rows {
		size := cfg.scaleSizes[i]
		if r.Error != "" {
			t.Fatalf("size %d: %s", size, r.Error)
		}
		if r.Events < uint64(size) || r.Streams == 0 || r.LoadedEvents == 0 || r.LoadSeconds <= 0 {
			t.Errorf("size %d: %d events in %d streams, %d loaded in %.3fs", size, r.Events, r.Streams, r.LoadedEvents, r.LoadSeconds)
		}
		for name, l := range map[string]latency{"append": r.AppendLat, "append existing": r.AppendExisting, "append new": r.AppendNew, "read": r.ReadLat} {
			if l.P50 <= 0 || l.P99 < l.P50 {
				t.Errorf("size %d: %s latency %+v", size, name, l)
			}
		}
		if r.Appends == 0 || r.AppendsPerS <= 0 || r.Reads == 0 || r.ReadsPerS <= 0 || r.ReadEvents < scaleStreamEvents || r.AppendCPU <= 0 || r.ReadCPU <= 0 {
			t.Errorf("size %d: %d appends (%.0f/s, %.1f µs CPU each), %d reads (%.0f/s, %.1f µs CPU each) of %.1f events",
				size, r.Appends, r.AppendsPerS, r.AppendCPU, r.Reads, r.ReadsPerS, r.ReadCPU, r.ReadEvents)
		}
		if r.DiskBytes <= 0 || r.FileBytes <= 0 || r.WALBytes <= 0 || r.RSSMiB <= 0 || r.PeakRSSMiB < r.RSSMiB || r.AnonMiB <= 0 || r.GoHeapMiB <= 0 {
			t.Errorf("size %d: disk %d B (files %d B, WAL %d B), RSS %.1f MiB (peak %.1f), anon %.1f MiB, Go heap %.1f MiB", size, r.DiskBytes, r.FileBytes, r.WALBytes, r.RSSMiB, r.PeakRSSMiB, r.AnonMiB, r.GoHeapMiB)
		}
		if r.AppendP99Ratio <= 0 || r.ReadP99Ratio <= 0 {
			t.Errorf("size %d: p99 ratios %.2f, %.2f", size, r.AppendP99Ratio, r.ReadP99Ratio)
		}
		m := lines[i]
		if m["scenario"] != "scale" || m["size"] != float64(size) || m["append_latency"].(map[string]any)["p99_us"] != r.AppendLat.P99 {
			t.Errorf("JSON line %d: %v", i, m)
		}
	}
	if rows[0].AppendP99Ratio != 1 || rows[0].ReadP99Ratio != 1 {
		t.Errorf("the first size's ratios are %.2f and %.2f, want 1", rows[0].AppendP99Ratio, rows[0].ReadP99Ratio)
	}
	// The allocated space is mostly the WAL's preallocation at these sizes: the files'
	// sizes are what grows.
	if rows[1].FileBytes <= rows[0].FileBytes || rows[1].Streams <= rows[0].Streams {
		t.Errorf("files %d B then %d B, streams %d then %d: want both to grow", rows[0].FileBytes, rows[1].FileBytes, rows[0].Streams, rows[1].Streams)
	}
	var b strings.Builder
	writeScaleTable(&b, cfg, rows)
	if n := strings.Count(b.String(), "\n| "); n != 2 {
		t.Errorf("table has %d rows, want 2:\n%s", n, b.String())
	}
	left, err := os.ReadDir(cfg.dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("files left in %s: %v", cfg.dir, left)
	}
}

// TestScaleNames checks that loaded and new streams' names never collide and that
// event IDs differ between revisions.
func TestScaleNames(t *testing.T) {
	seen := map[string]bool{}
	for i := range uint64(1000) {
		for _, k := range []uint64{i, scaleNewKey(0, i), scaleNewKey(3, i)} {
			name := scaleStream(k)
			if seen[name] {
				t.Fatalf("stream name %s made twice", name)
			}
			seen[name] = true
		}
	}
	if a, b := scaleEventID(7, 0), scaleEventID(7, 1); a == b || len(a) != 32 {
		t.Errorf("event IDs %q and %q", a, b)
	}
}
