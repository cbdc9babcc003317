package main

import (
	"math"
	"runtime/metrics"
)

// schedWaits reads the Go runtime's histogram of the time goroutines spent runnable
// before running (/sched/latencies:seconds).
func schedWaits() *metrics.Float64Histogram {
	s := []metrics.Sample{{Name: "/sched/latencies:seconds"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64Histogram {
		return nil
	}
	return s[0].Value.Float64Histogram()
}

// schedWaitsSince returns how many waits the histogram counted since before, and
// the upper bound of the bucket holding their q quantile, in seconds (0 without
// waits).
func schedWaitsSince(before *metrics.Float64Histogram, q float64) (uint64, float64) {
	after := schedWaits()
	if before == nil || after == nil || len(before.Counts) != len(after.Counts) {
		return 0, 0
	}
	counts := make([]uint64, len(after.Counts))
	var total uint64
	for i := range counts {
		counts[i] = after.Counts[i] - before.Counts[i]
		total += counts[i]
	}
	if total == 0 {
		return 0, 0
	}
	want := uint64(math.Ceil(q * float64(total)))
	var seen uint64
	for i, c := range counts {
		seen += c
		if seen >= want {
			if ub := after.Buckets[i+1]; !math.IsInf(ub, 1) {
				return total, ub
			}
			return total, after.Buckets[i] // the open last bucket: its lower bound
		}
	}
	return total, 0
}
