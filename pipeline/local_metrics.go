package pipeline

import (
	"go.opentelemetry.io/otel/metric"

	"github.com/rockline/rockline/tracing"
)

// observeGauges reports the local engine's gauges (see DB.observe).
func (db *localDB) observeGauges(o metric.Observer, g *gauges) {
	for i := 0; i < db.lanes.Len(); i++ {
		o.ObserveInt64(g.queueDepth, int64(db.lanes.QueueDepth(i)), metric.WithAttributes(tracing.AttrLane.Int(i)))
	}
	o.ObserveInt64(g.poolBytes, int64(db.val.PoolBytes()))
	o.ObserveInt64(g.openTxns, int64(db.seq.OpenTransactions()))
	o.ObserveInt64(g.lastPosition, int64(db.seq.Published()))
	st, err := db.store.Stats()
	if err != nil {
		return // closed meanwhile
	}
	o.ObserveInt64(g.pendingDrops, st.PendingDrops)
	stopped := int64(0)
	if st.WriteStopped {
		stopped = 1
	}
	o.ObserveInt64(g.writeStopped, stopped)
	o.ObserveInt64(g.delayedRate, int64(st.DelayedWriteRate))
	o.ObserveInt64(g.blockCache, int64(st.BlockCacheBytes))
	o.ObserveInt64(g.flushed, int64(st.BytesFlushed))
	o.ObserveInt64(g.compacted, int64(st.BytesCompacted))
	o.ObserveFloat64(g.stall, float64(st.StallMicros)/1e6)
	for _, f := range st.Families {
		fam := metric.WithAttributes(tracing.AttrFamily.String(f.Name))
		o.ObserveInt64(g.immutable, int64(f.ImmutableMemtables), fam)
		o.ObserveInt64(g.memtable, int64(f.MemtableBytes), fam)
		o.ObserveInt64(g.l0, int64(f.L0Files), fam)
		o.ObserveInt64(g.pendingCompaction, int64(f.PendingCompactionBytes), fam)
		o.ObserveInt64(g.sst, int64(f.SSTBytes), fam)
		o.ObserveInt64(g.live, int64(f.LiveDataBytes), fam)
	}
}
