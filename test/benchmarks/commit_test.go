package benchmarks

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/rockline/rockline/pipeline"
)

// parallelism is the number of committing goroutines per GOMAXPROCS.
const parallelism = 4

var keyCounts = []int{64, 1000}

// run commits transactions of keys distinct fresh keys with 100-byte values from
// parallelism*GOMAXPROCS goroutines and reports commits/s and keys/s.
func run(b *testing.B, open func(*testing.B) engine) {
	for _, n := range keyCounts {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			e := open(b)
			defer e.close()
			value := make([]byte, 100)
			for i := range value {
				value[i] = byte('a' + i%26)
			}
			var worker atomic.Uint64
			b.SetParallelism(parallelism)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				id := worker.Add(1)
				keys := make([][]byte, n)
				for i := range keys {
					keys[i] = make([]byte, 16)
					binary.BigEndian.PutUint64(keys[i], id)
				}
				var seq uint64
				for pb.Next() {
					for _, k := range keys {
						seq++
						binary.BigEndian.PutUint64(k[8:], seq)
					}
					if err := e.commit(keys, value); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
		})
	}
}

// BenchmarkRocklineParallel commits through rockline's lanes with the parallel bucket validator.
func BenchmarkRocklineParallel(b *testing.B) {
	run(b, func(b *testing.B) engine { return openRockline(b, pipeline.Parallel) })
}

// BenchmarkRocklineSerial commits through rockline's lanes with the serial write-group validator.
func BenchmarkRocklineSerial(b *testing.B) {
	run(b, func(b *testing.B) engine { return openRockline(b, pipeline.Serial) })
}

// BenchmarkNativeOCC commits through grocksdb's OptimisticTransactionDB (the anchor).
func BenchmarkNativeOCC(b *testing.B) { run(b, openNative) }

// BenchmarkRawBatch writes one WriteBatch per commit with no validation (the ceiling).
func BenchmarkRawBatch(b *testing.B) { run(b, openRaw) }
