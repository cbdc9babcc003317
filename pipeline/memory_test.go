package pipeline_test

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	"github.com/rockline/rockline/pipeline"
	"github.com/rockline/rockline/validators"
)

const mib = 1 << 20

// anonymousBytes returns the process's anonymous resident memory (Linux's
// /proc/self/smaps_rollup "Anonymous:" line), skipping the test when it is unreadable.
func anonymousBytes(t *testing.T) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/smaps_rollup")
	if err != nil {
		t.Skipf("anonymous memory is not measurable here: %v", err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "Anonymous:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Skipf("cannot parse %q: %v", s.Text(), err)
			}
			return kb << 10
		}
	}
	t.Skip("no Anonymous: line in /proc/self/smaps_rollup")
	return 0
}

// memory is a settled measurement: after a GC that returns free pages to the OS.
type memory struct{ anon, heap int64 }

func measure(t *testing.T) memory {
	t.Helper()
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return memory{anon: anonymousBytes(t), heap: int64(ms.HeapAlloc)}
}

// TestMemory opens ten empty databases per configuration and measures what they cost:
// resident anonymous memory (Linux) and Go heap. The bucket pool is Buckets *
// validators.BucketBytes of Go heap per database under the parallel policy and nothing
// under serial. The pool is allocated zeroed and not touched at Open, so the kernel
// backs only the pages later commits lock: its cost shows in the Go heap at once but
// not in resident memory (see the logged figures).
//
// An empty database costs about 0.8 MiB resident (0.9 MiB under -race), almost all of
// it RocksDB's: its statistics (enabled by the storage layer) take about 0.45 MiB and
// each column family's memtable about 65 KiB. Ten of them measured 8.1-9.8 MiB, so the
// resident bound is 12 MiB (1.2 MiB per database) rather than 10.
//
// Not parallel: other tests are paused while it runs, so the process is quiet.
func TestMemory(t *testing.T) {
	const dbs = 10
	measure(t) // skip early when unmeasurable

	// Warm up: the first Opens in a process pay one-time costs (RocksDB's thread pools
	// and static tables, threads and malloc arenas for cgo calls), which are not
	// per-database costs. The warm-up databases stay open while the others are
	// measured, so the measured ones cannot reuse memory they freed.
	warmDir := t.TempDir()
	for i := range 3 {
		warm, err := pipeline.Open(filepath.Join(warmDir, fmt.Sprint(i)), pipeline.Config{})
		if err != nil {
			t.Fatal(err)
		}
		defer warm.Close()
	}

	cases := []struct {
		name    string
		cfg     pipeline.Config
		pool    int   // BucketPoolBytes per database
		maxAnon int64 // bound on resident growth for all ten
		minHeap int64 // bounds on Go heap growth for all ten
		maxHeap int64
	}{
		{
			name: "parallel/default", cfg: pipeline.Config{},
			pool:    validators.DefaultBuckets * validators.BucketBytes,
			maxAnon: 12 * mib,
			minHeap: dbs * validators.DefaultBuckets * validators.BucketBytes,
			maxHeap: dbs*validators.DefaultBuckets*validators.BucketBytes + 3*mib,
		},
		{
			name: "parallel/buckets=2^20", cfg: pipeline.Config{Buckets: 1 << 20},
			pool:    (1 << 20) * validators.BucketBytes,
			maxAnon: -1, // not asserted: the pool's pages are not resident until used
			minHeap: dbs * (1 << 20) * validators.BucketBytes * 8 / 10,
			maxHeap: dbs*(1<<20)*validators.BucketBytes + 3*mib,
		},
		{
			name: "serial/buckets=2^20", cfg: pipeline.Config{Validation: pipeline.Serial, Buckets: 1 << 20},
			pool:    0,
			maxAnon: 12 * mib,
			minHeap: 0,
			maxHeap: 3 * mib,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			before := measure(t)
			open := make([]*pipeline.DB, 0, dbs)
			for i := range dbs {
				db, err := pipeline.Open(filepath.Join(root, fmt.Sprint(i)), tc.cfg)
				if err != nil {
					t.Fatal(err)
				}
				open = append(open, db)
			}
			after := measure(t)
			for _, db := range open {
				if got := db.BucketPoolBytes(); got != tc.pool {
					t.Errorf("BucketPoolBytes = %d, want %d", got, tc.pool)
				}
			}
			anon, heap := after.anon-before.anon, after.heap-before.heap
			t.Logf("%d databases: anonymous +%.2f MiB, Go heap +%.2f MiB (pool %.2f MiB each)",
				dbs, float64(anon)/mib, float64(heap)/mib, float64(tc.pool)/mib)
			if tc.maxAnon >= 0 && anon > tc.maxAnon {
				t.Errorf("anonymous memory grew %.2f MiB, want at most %.2f MiB", float64(anon)/mib, float64(tc.maxAnon)/mib)
			}
			if heap < tc.minHeap || heap > tc.maxHeap {
				t.Errorf("Go heap grew %.2f MiB, want %.2f..%.2f MiB", float64(heap)/mib, float64(tc.minHeap)/mib, float64(tc.maxHeap)/mib)
			}
			for _, db := range open {
				if err := db.Close(); err != nil {
					t.Error(err)
				}
			}
		})
	}
}
