package pipeline

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/rockline/rockline/tracing"
)

// Commit stages recorded in rockline.commit.duration's rockline.stage attribute.
const (
	stageLaneWait = "lane_wait"
	stageValidate = "validate"
	stageWrite    = "write"
	stagePublish  = "publish"
	stageTotal    = "total"
)

// metrics holds the instruments; attribute sets are built once so recording does
// not allocate.
type metrics struct {
	commits  metric.Int64Counter
	retries  metric.Int64Counter
	duration metric.Float64Histogram
	meter    metric.Meter
	reg      metric.Registration

	stages    map[string][]metric.RecordOption // one option each, passed as opts... so no call allocates
	outcomes  map[string][]metric.AddOption
	retryOpts []metric.AddOption
	policy    attribute.KeyValue
}

// newMetrics makes the commit instruments of an engine whose policy (or name) is
// policy; the gauges are registered by registerGauges once the front exists.
func newMetrics(mp metric.MeterProvider, policy string) (*metrics, error) {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := tracing.Meter(mp)
	out := &metrics{meter: m, policy: tracing.AttrPolicy.String(policy), stages: map[string][]metric.RecordOption{}, outcomes: map[string][]metric.AddOption{}}
	var err, e error
	out.commits, e = m.Int64Counter(tracing.MetricCommits, metric.WithUnit("{commit}"), metric.WithDescription("Commits by policy and outcome (committed, or the error.type of the failure)."))
	err = errors.Join(err, e)
	out.retries, e = m.Int64Counter(tracing.MetricUpdateRetries, metric.WithUnit("{attempt}"), metric.WithDescription("Attempts DB.Update ran again after ErrConflict or ErrTxnTooOld."))
	err = errors.Join(err, e)
	out.duration, e = m.Float64Histogram(tracing.MetricCommitDuration, metric.WithUnit("s"), metric.WithDescription("Commit latency per stage (lane_wait, validate, write, publish) and in total."),
		metric.WithExplicitBucketBoundaries(0.00001, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5))
	err = errors.Join(err, e)
	for _, s := range []string{stageLaneWait, stageValidate, stageWrite, stagePublish, stageTotal} {
		out.stages[s] = []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(out.policy, tracing.AttrStage.String(s)))}
	}
	for _, o := range []string{tracing.OutcomeCommitted, tracing.ErrorConflict, tracing.ErrorTxnTooOld, tracing.ErrorClosed, tracing.ErrorCanceled, tracing.ErrorCFDropped, tracing.ErrorStopped, tracing.ErrorOther} {
		out.outcomes[o] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(out.policy, tracing.AttrOutcome.String(o)))}
	}
	out.retryOpts = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(out.policy))}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// registerGauges registers the observable instruments, read from db once per
// collection; unregister undoes it.
func (m *metrics) registerGauges(db *DB) error {
	g, err := newGauges(m.meter)
	if err != nil {
		return err
	}
	m.reg, err = m.meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error { return db.observe(o, g) }, g.instruments()...)
	return err
}

func (m *metrics) unregister() {
	if m.reg != nil {
		m.reg.Unregister()
	}
}

func (m *metrics) stage(ctx context.Context, stage string, d time.Duration) {
	m.duration.Record(ctx, d.Seconds(), m.stages[stage]...)
}

// outcome counts a finished commit (one that got past argument checks).
func (m *metrics) outcome(ctx context.Context, err error) {
	o := tracing.OutcomeCommitted
	if err != nil {
		o = errorType(err)
	}
	m.commits.Add(ctx, 1, m.outcomes[o]...)
}

// retried counts an Update attempt run again.
func (m *metrics) retried(ctx context.Context) { m.retries.Add(ctx, 1, m.retryOpts...) }

// gauges are the observable instruments, read by one callback per collection.
type gauges struct {
	queueDepth, poolBytes, pendingDrops, openTxns, lastPosition metric.Int64ObservableGauge
	immutable, memtable, l0, pendingCompaction, writeStopped    metric.Int64ObservableGauge
	delayedRate, sst, live, blockCache, subs, subLag            metric.Int64ObservableGauge
	flushed, compacted                                          metric.Int64ObservableCounter
	stall                                                       metric.Float64ObservableCounter
}

func newGauges(m metric.Meter) (*gauges, error) {
	g := &gauges{}
	var errs []error
	gauge := func(dst *metric.Int64ObservableGauge, name, unit, desc string) {
		var err error
		*dst, err = m.Int64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
	}
	counter := func(dst *metric.Int64ObservableCounter, name, unit, desc string) {
		var err error
		*dst, err = m.Int64ObservableCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
	}
	gauge(&g.queueDepth, tracing.MetricLaneQueueDepth, "{commit}", "Commits queued per lane.")
	gauge(&g.poolBytes, tracing.MetricBucketPoolBytes, "By", "Memory of the parallel validator's lock pool.")
	gauge(&g.pendingDrops, tracing.MetricPendingDrops, "{family}", "Dropped column families waiting for admitted commits.")
	gauge(&g.openTxns, tracing.MetricOpenTxns, "{transaction}", "Open transactions.")
	gauge(&g.lastPosition, tracing.MetricLogPosition, "{position}", "Last published log position.")
	gauge(&g.immutable, tracing.MetricImmutableMemtables, "{memtable}", "Immutable memtables per family; at the family's max write buffers minus one, writes stop.")
	gauge(&g.memtable, tracing.MetricMemtableBytes, "By", "Memtable bytes per family.")
	gauge(&g.l0, tracing.MetricL0Files, "{file}", "Level-0 files per family.")
	gauge(&g.pendingCompaction, tracing.MetricPendingCompaction, "By", "Estimated pending compaction bytes per family.")
	gauge(&g.writeStopped, tracing.MetricWriteStopped, "{state}", "1 while RocksDB has stopped writes, else 0.")
	gauge(&g.delayedRate, tracing.MetricDelayedWriteRate, "By/s", "RocksDB's delayed write rate (0 when writes are not delayed).")
	counter(&g.flushed, tracing.MetricBytesFlushed, "By", "Bytes written by memtable flushes.")
	counter(&g.compacted, tracing.MetricBytesCompacted, "By", "Bytes written by compactions.")
	gauge(&g.sst, tracing.MetricSSTBytes, "By", "SST files' size per family: its space on disk.")
	gauge(&g.live, tracing.MetricLiveDataBytes, "By", "RocksDB's estimate of live data per family.")
	gauge(&g.blockCache, tracing.MetricBlockCacheBytes, "By", "The block cache's use, shared by every family.")
	gauge(&g.subs, tracing.MetricSubscriptions, "{subscription}", "Running subscriptions.")
	gauge(&g.subLag, tracing.MetricSubscriptionLag, "{position}", "The most published positions a running subscription has not handled yet.")
	var err error
	g.stall, err = m.Float64ObservableCounter(tracing.MetricStallTime, metric.WithUnit("s"), metric.WithDescription("Time writers spent stalled."))
	errs = append(errs, err)
	return g, errors.Join(errs...)
}

func (g *gauges) instruments() []metric.Observable {
	return []metric.Observable{g.queueDepth, g.poolBytes, g.pendingDrops, g.openTxns, g.lastPosition, g.immutable, g.memtable, g.l0, g.pendingCompaction, g.writeStopped, g.delayedRate, g.sst, g.live, g.blockCache, g.subs, g.subLag, g.flushed, g.compacted, g.stall}
}

// observe reports every gauge; on a closed database it reports nothing. The front
// reports the log position and the subscriptions; an engine with gauges of its own
// (the local engine's lanes, lock pool, transactions and RocksDB figures) reports
// those.
func (db *DB) observe(o metric.Observer, g *gauges) error {
	if db.closing.Load() {
		return nil
	}
	if r, ok := db.eng.(interface {
		observeGauges(metric.Observer, *gauges)
	}); ok {
		r.observeGauges(o, g)
	} else {
		o.ObserveInt64(g.lastPosition, int64(db.last.Load()))
	}
	n, lag := db.subscriptionLag()
	o.ObserveInt64(g.subs, int64(n))
	o.ObserveInt64(g.subLag, int64(lag))
	return nil
}
