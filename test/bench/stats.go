package main

import (
	"math"
	"math/bits"
	"slices"
	"syscall"
	"time"
)

// hist is a log-linear latency histogram in nanoseconds: 64 sub-buckets per power of
// two (relative error under 1.6%), fixed size, no allocation per sample. One per
// goroutine; merged at the end of a run.
type hist struct {
	counts [histBuckets]uint64
	n      uint64
	max    uint64
}

const (
	subBits     = 6
	subCount    = 1 << subBits
	histBuckets = (64-subBits)*subCount + subCount
)

func bucketOf(v uint64) int {
	if v < subCount {
		return int(v)
	}
	msb := bits.Len64(v) - 1
	shift := msb - subBits
	return (shift+1)<<subBits + int((v>>shift)&(subCount-1))
}

// bucketMid is the middle of bucket i's range.
func bucketMid(i int) float64 {
	if i < subCount {
		return float64(i)
	}
	shift := i>>subBits - 1
	low := uint64(subCount+i&(subCount-1)) << shift
	return float64(low) + float64(uint64(1)<<shift)/2
}

func (h *hist) add(d time.Duration) {
	v := uint64(max(d, 0))
	h.counts[bucketOf(v)]++
	h.n++
	h.max = max(h.max, v)
}

func (h *hist) merge(o *hist) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.max = max(h.max, o.max)
}

// quantile returns the q-quantile (0..1) in nanoseconds; the exact max for q=1.
func (h *hist) quantile(q float64) float64 {
	if h.n == 0 {
		return 0
	}
	if q >= 1 {
		return float64(h.max)
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = max(rank, 1)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return min(bucketMid(i), float64(h.max))
		}
	}
	return float64(h.max)
}

// latency is a histogram's summary in microseconds.
type latency struct {
	P50 float64 `json:"p50_us"`
	P95 float64 `json:"p95_us"`
	P99 float64 `json:"p99_us"`
	Max float64 `json:"max_us"`
}

func (h *hist) summary() latency {
	us := func(ns float64) float64 { return math.Round(ns/100) / 10 }
	return latency{P50: us(h.quantile(.50)), P95: us(h.quantile(.95)), P99: us(h.quantile(.99)), Max: us(h.quantile(1))}
}

// median of xs (the mean of the middle two for an even count); 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func minMax(xs []float64) (lo, hi float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	return slices.Min(xs), slices.Max(xs)
}

// cpuTime is the process's user+system CPU time so far (every thread, RocksDB's
// background threads included).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
