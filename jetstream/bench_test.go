package jetstream_test

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rockline/rockline/jetstream"
)

// BenchmarkCommit measures commits of one checked write and one event, each writer on
// its own key (so no conflicts), on the embedded cluster: every node and the
// benchmark share the machine's cores, so the figures are lower bounds.
//
//	go test -run '^$' -bench Commit -benchtime 2000x .
func BenchmarkCommit(b *testing.B) {
	for _, replicas := range []int{1, 3} {
		for _, writers := range []int{1, 8} {
			b.Run(fmt.Sprintf("R%d/writers=%d", replicas, writers), func(b *testing.B) {
				_, cfg := open(b, replicas)
				parts := make([]*jetstream.Partition, writers)
				for w := range parts {
					parts[w] = openOn(b, connect(b, w%3), cfg)
				}
				var next atomic.Int64
				lat := make([][]time.Duration, writers)
				ctx := ctxT(b)
				b.ResetTimer()
				var wg sync.WaitGroup
				for w := range writers {
					wg.Go(func() {
						key := fmt.Appendf(nil, "w%d", w)
						var version uint64
						for next.Add(1) <= int64(b.N) {
							start := time.Now()
							pos, err := parts[w].Commit(ctx, &jetstream.Commit{
								Writes: []jetstream.Write{{Family: "bench", Key: key, Value: make([]byte, 100), Version: version}},
								Events: []jetstream.Event{ev("bench", "", "E", "0123456789")},
							})
							if err != nil {
								b.Error(err)
								return
							}
							lat[w] = append(lat[w], time.Since(start))
							version = pos - 1 // events, write, marker: the write is just before the marker
						}
					})
				}
				wg.Wait()
				b.StopTimer()
				var st jetstream.Stats
				for _, p := range parts {
					s := p.Stats()
					st.InFlight += s.InFlight
					st.Retried += s.Retried
				}
				b.ReportMetric(float64(st.InFlight), "inflight-retries")
				all := slices.Concat(lat...)
				slices.Sort(all)
				if len(all) > 0 {
					b.ReportMetric(float64(len(all))/b.Elapsed().Seconds(), "commits/s")
					b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
					b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
				}
			})
		}
	}
}
