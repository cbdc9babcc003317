package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/rockline/rockline/pipeline"
	"github.com/rockline/rockline/tracing"
)

// collect reads every metric the reader has, by name.
func collectMetrics(t *testing.T, r *sdkmetric.ManualReader) map[string]metricdata.Aggregation {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Aggregation{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m.Data
		}
	}
	return out
}

func sumWhere(t *testing.T, data metricdata.Aggregation, key attribute.Key, value string) int64 {
	t.Helper()
	sum, ok := data.(metricdata.Sum[int64])
	if !ok {
		t.Fatalf("%T is not an int64 sum", data)
	}
	var n int64
	for _, dp := range sum.DataPoints {
		if v, ok := dp.Attributes.Value(key); ok && v.AsString() == value {
			n += dp.Value
		}
	}
	return n
}

func TestMetrics(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	db, _ := openDB(t, pipeline.Config{MeterProvider: mp})
	cf, err := db.CreateColumnFamily("accounts")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		put(t, db, cf, "k", "v")
	}
	a, b := db.Begin(), db.Begin()
	for _, tx := range []*pipeline.Txn{a, b} {
		if _, err := tx.Get(cf, []byte("k")); err != nil {
			t.Fatal(err)
		}
		if err := tx.Put(cf, []byte("k"), []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(context.Background()); !errors.Is(err, pipeline.ErrConflict) {
		t.Fatalf("second commit = %v; want ErrConflict", err)
	}

	got := collectMetrics(t, reader)
	if n := sumWhere(t, got[tracing.MetricCommits], tracing.AttrOutcome, tracing.OutcomeCommitted); n != 4 {
		t.Errorf("committed = %d; want 4", n)
	}
	if n := sumWhere(t, got[tracing.MetricCommits], tracing.AttrOutcome, tracing.ErrorConflict); n != 1 {
		t.Errorf("commits with outcome conflict = %d; want 1", n)
	}
	if got[tracing.MetricUpdateRetries] != nil {
		t.Errorf("%s reported before any Update retried", tracing.MetricUpdateRetries)
	}
	hist, ok := got[tracing.MetricCommitDuration].(metricdata.Histogram[float64])
	if !ok {
		t.Fatalf("%s missing or not a histogram: %T", tracing.MetricCommitDuration, got[tracing.MetricCommitDuration])
	}
	stages := map[string]uint64{}
	for _, dp := range hist.DataPoints {
		v, _ := dp.Attributes.Value(tracing.AttrStage)
		stages[v.AsString()] += dp.Count
	}
	for _, s := range []string{"lane_wait", "validate", "write", "publish", "total"} {
		if stages[s] == 0 {
			t.Errorf("no %s samples in %s: %v", s, tracing.MetricCommitDuration, stages)
		}
	}
	for _, name := range []string{tracing.MetricLaneQueueDepth, tracing.MetricBucketPoolBytes, tracing.MetricPendingDrops,
		tracing.MetricImmutableMemtables, tracing.MetricMemtableBytes, tracing.MetricL0Files, tracing.MetricPendingCompaction,
		tracing.MetricWriteStopped, tracing.MetricDelayedWriteRate, tracing.MetricBytesFlushed, tracing.MetricBytesCompacted,
		tracing.MetricSSTBytes, tracing.MetricLiveDataBytes, tracing.MetricBlockCacheBytes} {
		if got[name] == nil {
			t.Errorf("metric %s not reported", name)
		}
	}
	if _, ok := got[tracing.MetricStallTime].(metricdata.Sum[float64]); !ok {
		t.Errorf("%s is %T, want a float counter of seconds", tracing.MetricStallTime, got[tracing.MetricStallTime])
	}

	// One conflict inside Update: the function commits a write to the key it read
	// on its first run, so that attempt conflicts and Update runs it again.
	runs := 0
	if err := db.Update(context.Background(), func(tx *pipeline.Txn) error {
		if _, err := tx.Get(cf, []byte("k")); err != nil {
			return err
		}
		if runs++; runs == 1 {
			put(t, db, cf, "k", "meanwhile")
		}
		return tx.Put(cf, []byte("k"), []byte("updated"))
	}); err != nil || runs != 2 {
		t.Fatalf("Update = %v after %d runs, want success on the second", err, runs)
	}
	if n := sumWhere(t, collectMetrics(t, reader)[tracing.MetricUpdateRetries], tracing.AttrPolicy, pipeline.Parallel); n != 1 {
		t.Errorf("%s = %d, want 1", tracing.MetricUpdateRetries, n)
	}
	pool := got[tracing.MetricBucketPoolBytes].(metricdata.Gauge[int64])
	if len(pool.DataPoints) != 1 || pool.DataPoints[0].Value != int64(db.BucketPoolBytes()) {
		t.Errorf("bucket pool gauge %+v; want %d", pool.DataPoints, db.BucketPoolBytes())
	}
	mem := got[tracing.MetricMemtableBytes].(metricdata.Gauge[int64])
	var sawAccounts bool
	for _, dp := range mem.DataPoints {
		if v, _ := dp.Attributes.Value(tracing.AttrFamily); v.AsString() == "accounts" && dp.Value > 0 {
			sawAccounts = true
		}
	}
	if !sawAccounts {
		t.Errorf("no memtable bytes for family accounts: %+v", mem.DataPoints)
	}

	// After Close the callback is unregistered: collecting reports no storage gauges
	// and does not touch freed handles.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if after := collectMetrics(t, reader); after[tracing.MetricMemtableBytes] != nil {
		if g := after[tracing.MetricMemtableBytes].(metricdata.Gauge[int64]); len(g.DataPoints) > 0 {
			t.Errorf("storage gauges still reported after Close: %+v", g.DataPoints)
		}
	}
}

// TestSubscriptionLagMetric: a subscription stuck in its handler shows in the lag gauge
// (every position published beyond the last it handled) and the subscription count;
// once it has ended, neither counts it.
func TestSubscriptionLagMetric(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	db, _ := openDB(t, pipeline.Config{MeterProvider: mp})
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	sub, err := db.Subscribe(context.Background(), 0, func(pipeline.LogEntry) error {
		once.Do(func() { close(entered) })
		<-release
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		put(t, db, db.Default(), fmt.Sprint(i), "v")
	}
	recv(t, entered, "the subscription's handler")
	gauge := func(name string) int64 {
		t.Helper()
		g, ok := collectMetrics(t, reader)[name].(metricdata.Gauge[int64])
		if !ok || len(g.DataPoints) != 1 {
			t.Fatalf("%s: %+v", name, g)
		}
		return g.DataPoints[0].Value
	}
	if n, lag := gauge(tracing.MetricSubscriptions), gauge(tracing.MetricSubscriptionLag); n != 1 || lag != 5 {
		t.Errorf("with the handler stuck on entry 1 of 5: %d subscriptions, lag %d; want 1 and 5", n, lag)
	}
	close(release)
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	if n, lag := gauge(tracing.MetricSubscriptions), gauge(tracing.MetricSubscriptionLag); n != 0 || lag != 0 {
		t.Errorf("after Close: %d subscriptions, lag %d; want 0 and 0", n, lag)
	}
}
