// Package tracing names rockline's spans, attributes and metric instruments. It
// depends on the OpenTelemetry API only, which is all the library links: the SDK and
// the exporters live in tracing/otelsetup, for applications and services to import.
//
// The library itself never sets a global provider: pipeline.Config takes a
// TracerProvider and a MeterProvider and defaults to the global ones. Span names are
// fixed and low-cardinality; keys and values never appear in names or attributes.
package tracing

import "go.opentelemetry.io/otel/attribute"

// ScopeName is the instrumentation scope of every rockline span and instrument.
const ScopeName = "github.com/rockline/rockline"

// Span names, one per commit stage.
const (
	SpanCommit   = "rockline.commit"    // the whole commit, child of the caller's span
	SpanLaneWait = "rockline.lane.wait" // queued in a commit lane
	SpanValidate = "rockline.validate"  // conflict check and user checks
	SpanWrite    = "rockline.write"     // the RocksDB batch write
	// SpanPublish is the wait for lower positions to be published. One writer
	// queue writes positions in order and marks a group published before it wakes
	// the group's commits, so a commit normally finds its position published at
	// once; the span stays so that a wait, should one appear, shows.
	SpanPublish = "rockline.publish"
	SpanDropCF  = "rockline.cf.drop" // a column-family drop, from retire to physical drop
	// SpanProjectionBatch is one batch of a projection: its handler and the commit
	// of the read model with the projection's position.
	SpanProjectionBatch = "rockline.projection.batch"
)

// Attribute keys.
const (
	AttrLane     = attribute.Key("rockline.lane")
	AttrPolicy   = attribute.Key("rockline.policy")
	AttrKeys     = attribute.Key("rockline.keys")
	AttrReads    = attribute.Key("rockline.reads")
	AttrBytes    = attribute.Key("rockline.bytes")
	AttrPosition = attribute.Key("rockline.position")
	AttrOutcome  = attribute.Key("rockline.outcome")
	AttrInline   = attribute.Key("rockline.inline")
	AttrFamily   = attribute.Key("rockline.family")
	// AttrDropWaitMillis is how long a drop waited for admitted commits, in ms.
	AttrDropWaitMillis = attribute.Key("rockline.drop.wait_ms")
	AttrErrorType      = attribute.Key("error.type")
	// AttrProjection names a projection; AttrEvents counts a batch's events.
	AttrProjection = attribute.Key("rockline.projection")
	AttrEvents     = attribute.Key("rockline.events")
)

// Outcomes and error types recorded on commit spans.
const (
	OutcomeCommitted = "committed"
	OutcomeFailed    = "failed"

	ErrorConflict  = "conflict"
	ErrorTxnTooOld = "txn_too_old"
	ErrorClosed    = "closed"
	ErrorCanceled  = "canceled"
	ErrorCFDropped = "cf_dropped"
	ErrorStopped   = "stopped"
	ErrorOther     = "other"
)

// AttrStage names a commit stage on rockline.commit.duration.
const AttrStage = attribute.Key("rockline.stage")

// Metric instrument names (OpenTelemetry conventions: units in UCUM, durations in
// seconds, a 0/1 state as a gauge with unit {state} so Prometheus adds no _ratio, and
// no instrument repeating another: conflicts are rockline.commits{rockline.outcome=
// "conflict"}).
const (
	MetricCommits            = "rockline.commits"
	MetricCommitDuration     = "rockline.commit.duration"
	MetricLaneQueueDepth     = "rockline.lane.queue_depth"
	MetricBucketPoolBytes    = "rockline.bucket_pool.size"
	MetricPendingDrops       = "rockline.cf.pending_drops"
	MetricOpenTxns           = "rockline.transactions.open"
	MetricLogPosition        = "rockline.log.position"
	MetricImmutableMemtables = "rockline.storage.immutable_memtables"
	MetricMemtableBytes      = "rockline.storage.memtable.size"
	MetricL0Files            = "rockline.storage.l0_files"
	MetricPendingCompaction  = "rockline.storage.pending_compaction.size"
	MetricWriteStopped       = "rockline.storage.write_stopped"
	MetricDelayedWriteRate   = "rockline.storage.delayed_write_rate"
	MetricBytesFlushed       = "rockline.storage.flushed"
	MetricBytesCompacted     = "rockline.storage.compacted"
	MetricStallTime          = "rockline.storage.stall.time"
	// MetricSSTBytes and MetricLiveDataBytes are a family's space on disk and
	// RocksDB's estimate of its live data.
	MetricSSTBytes      = "rockline.storage.sst.size"
	MetricLiveDataBytes = "rockline.storage.live_data.size"
	// MetricBlockCacheBytes is the block cache's use, shared by every family.
	MetricBlockCacheBytes = "rockline.storage.block_cache.usage"
	// MetricSubscriptions counts the running subscriptions; MetricSubscriptionLag is
	// the most published positions one of them has not handled yet.
	MetricSubscriptions   = "rockline.subscriptions"
	MetricSubscriptionLag = "rockline.subscription.lag"
	// MetricUpdateRetries counts the attempts DB.Update ran again after a conflict.
	MetricUpdateRetries = "rockline.update.retries"
	// MetricProjectionLag is how many log positions a projection is behind the
	// published log; MetricProjectionHandlerDuration the time its handler takes per
	// batch; MetricProjectionEvents the events it has applied.
	MetricProjectionLag             = "rockline.projection.lag"
	MetricProjectionHandlerDuration = "rockline.projection.handler.duration"
	MetricProjectionEvents          = "rockline.projection.events"
)
