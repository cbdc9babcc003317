package eventstore_test

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/pipeline"
)

// BenchmarkAppend appends one event per commit to one of 16 streams, expecting the
// revision it last wrote: the event store's write path, index records included.
func BenchmarkAppend(b *testing.B) { benchmarkAppend(b, pipeline.Config{}) }

// BenchmarkAppendSync is BenchmarkAppend with an fsync per append (Config.Sync): from
// one goroutine every append pays its own fsync, so it shows the lone writer's path.
func BenchmarkAppendSync(b *testing.B) { benchmarkAppend(b, pipeline.Config{Sync: true}) }

// BenchmarkAppendIndexed is BenchmarkAppend with the type, category and tag indexes
// kept: three index entries per append (the event has one tag), beside
// BenchmarkAppend's run of the same events without them.
func BenchmarkAppendIndexed(b *testing.B) {
	for _, indexed := range []bool{false, true} {
		b.Run(fmt.Sprintf("indexed=%v", indexed), func(b *testing.B) {
			var cfg eventstore.Config
			if indexed {
				cfg.Indexes = []eventstore.Index{eventstore.TypeIndex(), eventstore.CategoryIndex(), eventstore.TagIndex()}
			}
			_, es := openIndexed(b, filepath.Join(b.TempDir(), "db"), cfg)
			appendLoop(b, es, eventstore.Event{Type: "happened", Data: make([]byte, 100), Tags: []string{"customer:7"}})
		})
	}
}

func benchmarkAppend(b *testing.B, cfg pipeline.Config) {
	_, es, _ := openStore(b, cfg)
	appendLoop(b, es, eventstore.Event{ID: "", Type: "happened", Data: make([]byte, 100)})
}

// appendLoop appends ev b.N times, by turns to 16 streams.
func appendLoop(b *testing.B, es *eventstore.Store, ev eventstore.Event) {
	next := make([]eventstore.ExpectedRevision, 16)
	for i := range next {
		next[i] = eventstore.NoStream
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s := i % len(next)
		res, err := es.Append(ctx, fmt.Sprintf("stream-%d", s), next[s], ev)
		if err != nil {
			b.Fatal(err)
		}
		next[s] = eventstore.Revision(res.NextExpectedRevision)
	}
}

// BenchmarkReadStream reads a 100-event stream, written ten events per commit, from
// revision 0.
func BenchmarkReadStream(b *testing.B) {
	_, es, _ := openStore(b, pipeline.Config{})
	exp := eventstore.NoStream
	for range 10 {
		evs := make([]eventstore.Event, 10)
		for j := range evs {
			evs[j] = eventstore.Event{Type: "happened", Data: make([]byte, 100)}
		}
		res, err := es.Append(ctx, "s", exp, evs...)
		if err != nil {
			b.Fatal(err)
		}
		exp = eventstore.Revision(res.NextExpectedRevision)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		evs, err := es.ReadStream(ctx, "s", 0, 100)
		if err != nil || len(evs) != 100 {
			b.Fatalf("read %d events, %v", len(evs), err)
		}
	}
}

// seedEvents appends n events, perCommit to a commit, to 16 order streams; every
// matchEvery-th event has type "Wanted" (0: none).
func seedEvents(b *testing.B, es *eventstore.Store, n, perCommit, matchEvery int) uint64 {
	b.Helper()
	var last uint64
	for i := 0; i < n; i += perCommit {
		evs := make([]eventstore.Event, 0, perCommit)
		for j := i; j < min(n, i+perCommit); j++ {
			typ := "Noise"
			if matchEvery > 0 && j%matchEvery == 0 {
				typ = "Wanted"
			}
			evs = append(evs, eventstore.Event{Type: typ, Data: make([]byte, 100)})
		}
		res, err := es.Append(ctx, fmt.Sprintf("order-%d", (i/perCommit)%16), eventstore.Any, evs...)
		if err != nil {
			b.Fatal(err)
		}
		last = res.Position
	}
	return last
}

// BenchmarkProjection measures a projection catching up on b.N events (one per
// commit) into a read model of one counter per stream, with batches of one event and
// of 256: events applied per second.
func BenchmarkProjection(b *testing.B) {
	for _, batch := range []int{1, 256} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			db, es, _ := openStore(b, pipeline.Config{})
			if _, err := db.EnsureColumnFamily("counts"); err != nil {
				b.Fatal(err)
			}
			last := seedEvents(b, es, b.N, 1, 0)
			c := &counter{db: db}
			b.ResetTimer()
			p, err := es.StartProjection(ctx, eventstore.ProjectionConfig{Name: "counts", Filter: ordersOnly, Handle: c.handle, MaxBatchEvents: batch})
			if err != nil {
				b.Fatal(err)
			}
			if err := p.CaughtUp(ctx, last); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
			if err := p.Close(); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkSubscribeFiltered measures a subscription catching up on b.N events (100 per
// commit), of which 1% match its type filter: events scanned per second, against the
// same subscription with no filter (every event handed to the handler).
func BenchmarkSubscribeFiltered(b *testing.B) {
	for name, f := range map[string]eventstore.Filter{"1% match": {TypePrefix: "Wanted"}, "no filter": {}} {
		b.Run(name, func(b *testing.B) {
			_, es, _ := openStore(b, pipeline.Config{})
			last := seedEvents(b, es, b.N, 100, 100)
			done := make(chan struct{})
			b.ResetTimer()
			handled := 0
			sub, err := es.SubscribeToAll(ctx, 0, func(eventstore.RecordedEvent) error {
				handled++
				return nil
			}, eventstore.SubscribeOptions{Filter: f, CheckpointEvery: 1, Checkpoint: func(pos uint64) error {
				if pos == last {
					close(done)
					return errDone
				}
				return nil
			}})
			if err != nil {
				b.Fatal(err)
			}
			<-done
			b.StopTimer()
			sub.Wait()
			if f.TypePrefix == "" && handled != b.N {
				b.Fatalf("handled %d of %d events", handled, b.N)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

var errDone = errors.New("done")

// BenchmarkProjectionWorkers measures a parallel projection catching up on b.N events
// (one per commit, 16 streams) into the per-stream counter read model, batches of 64,
// with a handler that also spends about 20 µs of CPU per event (a read model that
// decodes and computes, where workers pay off): events applied per second with 1, 2
// and 4 workers.
func BenchmarkProjectionWorkers(b *testing.B) {
	for _, workers := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			db, es, _ := openStore(b, pipeline.Config{})
			if _, err := db.EnsureColumnFamily("counts"); err != nil {
				b.Fatal(err)
			}
			last := seedEvents(b, es, b.N, 1, 0)
			c := &counter{db: db}
			handle := func(tx *pipeline.Txn, events []eventstore.RecordedEvent) error {
				for _, e := range events {
					work(e.Data)
				}
				return c.handle(tx, events)
			}
			b.ResetTimer()
			pp, err := es.StartParallelProjection(ctx, eventstore.ProjectionConfig{Name: "counts", Filter: ordersOnly, Handle: handle, MaxBatchEvents: 64}, workers)
			if err != nil {
				b.Fatal(err)
			}
			if err := pp.CaughtUp(ctx, last); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
			if err := pp.Close(); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// work spends about 20 µs of CPU on data, as a handler that decodes and computes does.
func work(data []byte) {
	sum := sha256.Sum256(data)
	for range 200 {
		sum = sha256.Sum256(sum[:])
	}
	workSink = sum[0]
}

var workSink byte
