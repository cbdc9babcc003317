package storage

import (
	"bufio"
	"slices"
	"strconv"
	"strings"

	"github.com/linxGnu/grocksdb"
)

// FamilyStats are one family's write-stall indicators and space, read from RocksDB
// properties.
type FamilyStats struct {
	Name                   string
	Generation             int    // the name's generation (see Family.Generation)
	EstimatedKeys          uint64 // rocksdb.estimate-num-keys: live keys, an estimate
	ImmutableMemtables     uint64 // rocksdb.num-immutable-mem-table; at MaxWriteBufferNumber-1 writes stop
	MemtableBytes          uint64 // rocksdb.cur-size-all-mem-tables
	L0Files                uint64 // rocksdb.num-files-at-level0
	PendingCompactionBytes uint64 // rocksdb.estimate-pending-compaction-bytes
	SSTBytes               uint64 // rocksdb.total-sst-files-size: the family's space on disk
	LiveDataBytes          uint64 // rocksdb.estimate-live-data-size
	WriteBufferSize        int64  // configured memtable size
	MaxWriteBufferNumber   int    // configured memtable count
}

// Stats are database-wide figures plus every live family's FamilyStats.
type Stats struct {
	WriteStopped      bool   // rocksdb.is-write-stopped
	DelayedWriteRate  uint64 // rocksdb.actual-delayed-write-rate, bytes/s (0: not delayed)
	BytesFlushed      uint64 // ticker rocksdb.flush.write.bytes, cumulative
	BytesCompacted    uint64 // ticker rocksdb.compact.write.bytes, cumulative
	BytesWritten      uint64 // ticker rocksdb.bytes.written (user bytes), cumulative
	StallMicros       uint64 // ticker rocksdb.stall.micros, cumulative time writers stalled
	WALSyncs          uint64 // ticker rocksdb.wal.synced: fsyncs of the WAL, cumulative
	ImmutableMemtable uint64 // sum over families
	PendingDrops      int64  // families dropped (retired) whose physical drop has not run yet
	FailedDrops       int64  // physical drop attempts that failed, cumulative
	CompletedDrops    int64  // physical drops done, cumulative
	LastDropError     string // the last drop failure, if any
	HeldDropped       int64  // families dropped physically whose native memory a snapshot taken before the drop still holds
	FreedDropped      int64  // dropped families whose native handle and memory were freed, cumulative
	BlockCacheBytes   uint64 // the block cache's use, shared by every family
	BlockCachePinned  uint64 // the part of it pinned by open iterators and tables
	// Tickers holds every RocksDB statistics ticker by its name, cumulative since
	// Open: rocksdb.block.cache.data.miss, rocksdb.bloom.filter.useful (reads a bloom
	// filter saved), rocksdb.bloom.filter.full.positive, and so on. The map is the
	// caller's.
	Tickers  map[string]uint64
	Families []FamilyStats
}

// Stats reads the current statistics. It costs a few native calls per family and one
// statistics dump; call it for diagnosis and gauges, not per commit.
func (db *DB) Stats() (Stats, error) {
	if err := db.enter(); err != nil {
		return Stats{}, err
	}
	defer db.leave()
	var s Stats
	s.BlockCacheBytes, s.BlockCachePinned = db.cache.GetUsage(), db.cache.GetPinnedUsage()
	stopped, _ := db.native.GetIntProperty("rocksdb.is-write-stopped")
	s.WriteStopped = stopped != 0
	s.DelayedWriteRate, _ = db.native.GetIntProperty("rocksdb.actual-delayed-write-rate")
	tickers := parseTickers(db.dbOpts.GetStatisticsString())
	s.BytesFlushed = tickers["rocksdb.flush.write.bytes"]
	s.BytesCompacted = tickers["rocksdb.compact.write.bytes"]
	s.BytesWritten = tickers["rocksdb.bytes.written"]
	s.StallMicros = tickers["rocksdb.stall.micros"]
	s.WALSyncs = tickers["rocksdb.wal.synced"]
	s.Tickers = tickers
	s.PendingDrops = db.drops.pending.Load()
	s.FailedDrops = db.drops.failed.Load()
	s.CompletedDrops = db.drops.done.Load()
	s.HeldDropped = db.handles.held.Load()
	s.FreedDropped = db.handles.freed.Load()
	if e, ok := db.drops.lastErr.Load().(string); ok {
		s.LastDropError = e
	}
	db.families.mu.RLock()
	fams := make([]*Family, 0, len(db.families.byName))
	for _, f := range db.families.byName {
		fams = append(fams, f)
	}
	db.families.mu.RUnlock()
	for _, f := range fams {
		if isInternal(f.name) {
			continue
		}
		fs, ok := db.familyStats(f)
		if !ok {
			continue // dropped meanwhile
		}
		s.ImmutableMemtable += fs.ImmutableMemtables
		s.Families = append(s.Families, fs)
	}
	slices.SortFunc(s.Families, func(a, b FamilyStats) int { return strings.Compare(a.Name, b.Name) })
	return s, nil
}

// familyStats reads f's properties; ok is false when f's handle was freed meanwhile.
func (db *DB) familyStats(f *Family) (fs FamilyStats, ok bool) {
	h, err := f.pin("stats")
	if err != nil {
		return fs, false
	}
	defer f.unpin()
	fs = FamilyStats{Name: f.name, Generation: f.Generation(), WriteBufferSize: f.opts.WriteBufferSize, MaxWriteBufferNumber: f.opts.MaxWriteBufferNumber}
	fs.EstimatedKeys, _ = db.native.GetIntPropertyCF("rocksdb.estimate-num-keys", h)
	fs.ImmutableMemtables, _ = db.native.GetIntPropertyCF("rocksdb.num-immutable-mem-table", h)
	fs.MemtableBytes, _ = db.native.GetIntPropertyCF("rocksdb.cur-size-all-mem-tables", h)
	fs.L0Files, _ = db.native.GetIntPropertyCF("rocksdb.num-files-at-level0", h)
	fs.PendingCompactionBytes, _ = db.native.GetIntPropertyCF("rocksdb.estimate-pending-compaction-bytes", h)
	fs.SSTBytes, _ = db.native.GetIntPropertyCF("rocksdb.total-sst-files-size", h)
	fs.LiveDataBytes, _ = db.native.GetIntPropertyCF("rocksdb.estimate-live-data-size", h)
	return fs, true
}

// parseTickers reads the "name COUNT : n" lines of RocksDB's statistics dump.
func parseTickers(dump string) map[string]uint64 {
	out := make(map[string]uint64)
	sc := bufio.NewScanner(strings.NewReader(dump))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), " COUNT : ")
		if !ok {
			continue
		}
		if n, err := strconv.ParseUint(strings.TrimSpace(rest), 10, 64); err == nil {
			out[name] = n
		}
	}
	return out
}

// Flush flushes every live family's memtable to disk and waits for it.
func (db *DB) Flush() error {
	if err := db.enter(); err != nil {
		return err
	}
	defer db.leave()
	fo := newFlushOptions()
	defer fo.Destroy()
	for _, f := range db.families.all() {
		if err := db.flushFamily(f, fo); err != nil {
			return err
		}
	}
	return nil
}

// flushFamily flushes f unless it was dropped physically.
func (db *DB) flushFamily(f *Family, fo *grocksdb.FlushOptions) error {
	h, err := f.pin("flush")
	if err != nil {
		return nil // dropped, handle freed: nothing to flush
	}
	defer f.unpin()
	if f.physicallyDropped() {
		return nil
	}
	err = db.native.FlushCF(h, fo)
	if err != nil && f.Dropped() {
		return nil // dropped during the flush (RocksDB: "Column family dropped")
	}
	return mapError("flush "+f.name, err)
}
