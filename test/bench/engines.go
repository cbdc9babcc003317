package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/linxGnu/grocksdb"

	"github.com/rockline/rockline/pipeline"
	"github.com/rockline/rockline/storage"
)

// Engine kinds.
const (
	kindParallel = "rockline-parallel"
	kindSerial   = "rockline-serial"
	kindNative   = "native-occ"
	kindRaw      = "raw-batch"
)

var allKinds = []string{kindParallel, kindSerial, kindNative, kindRaw, kindBadger}

// quickKinds are the engines of --quick (Badger's column would push make bench past
// five minutes).
var quickKinds = []string{kindParallel, kindSerial, kindNative, kindRaw}

// engineSpec names one engine variant of a scenario.
type engineSpec struct {
	Name    string // as reported
	Kind    string
	Buckets int    // rockline-parallel lock pool (0: default)
	Tracing string // rockline tracer variant (tracing.go)
}

// openOpts are the per-scenario storage settings, the same for every engine.
type openOpts struct {
	DisableWAL bool
	Sync       bool
	Lanes      int                   // rockline lanes (0: default)
	Data       storage.FamilyOptions // the data family's memtables (zero: RocksDB defaults)
	// BloomBitsPerKey is the bloom filter of every engine's SST files: 0 keeps each
	// engine's default (rockline 10 bits, the native engines none), > 0 bits per key,
	// < 0 none.
	BloomBitsPerKey float64
	// BlockCacheSize is every engine's block cache in bytes (0: 8 MiB).
	BlockCacheSize int64
	// RocklineTables gives the native engines rockline's storage defaults (lz4, zstd
	// at the bottom, dynamic level bytes) instead of RocksDB's (snappy, static levels).
	RocklineTables bool
}

// errConflict marks a commit refused by validation (retryable).
var errConflict = errors.New("conflict")

// engine is one open database.
type engine interface {
	begin() txn
	validates() bool
	stats() (engineStats, error)
	spansExported() int64 // -1 when not traced with an exporter
	close() error
}

// txn is one transaction. get returns nil, nil for a missing key.
type txn interface {
	get(key []byte) ([]byte, error)
	put(key, value []byte) error
	commit(async bool) error // errConflict-wrapped on a validation failure
	discard()
}

// engineStats are RocksDB's cumulative counters and current memtable state.
type engineStats struct {
	BytesFlushed, BytesCompacted, StallMicros uint64
	WALSyncs                                  uint64 // ticker rocksdb.wal.synced (0: not RocksDB)
	ImmutableData, ImmutableAll               uint64
}

func openEngine(spec engineSpec, dir string, o openOpts) (engine, error) {
	switch spec.Kind {
	case kindParallel, kindSerial:
		return openRockline(spec, dir, o)
	case kindNative:
		return openNative(dir, o)
	case kindRaw:
		return openRaw(dir, o)
	case kindBadger:
		return openBadger(dir, o)
	}
	return nil, fmt.Errorf("unknown engine kind %q", spec.Kind)
}

// ---- rockline ----

type rocklineEngine struct {
	db     *pipeline.DB
	cf     *pipeline.ColumnFamily
	tracer tracerSetup
}

func openRockline(spec engineSpec, dir string, o openOpts) (*rocklineEngine, error) {
	policy := pipeline.Parallel
	if spec.Kind == kindSerial {
		policy = pipeline.Serial
	}
	tr := newTracer(spec.Tracing)
	cfg := pipeline.Config{
		Lanes:          o.Lanes,
		Validation:     policy,
		DisableWAL:     o.DisableWAL,
		Sync:           o.Sync,
		Families:       map[string]storage.FamilyOptions{"data": o.Data},
		TracerProvider: tr.provider,
		BlockCacheSize: o.BlockCacheSize,
		// rockline's 0 is its default too; negative is none, as in openOpts.
		BloomBitsPerKey: o.BloomBitsPerKey,
	}
	if spec.Kind == kindParallel {
		cfg.Buckets = spec.Buckets
	}
	db, err := pipeline.Open(dir, cfg)
	if err != nil {
		tr.shutdown()
		return nil, err
	}
	cf, err := db.ColumnFamily("data")
	if err != nil {
		db.Close()
		tr.shutdown()
		return nil, err
	}
	return &rocklineEngine{db: db, cf: cf, tracer: tr}, nil
}

func (e *rocklineEngine) begin() txn       { return &rocklineTxn{e: e, t: e.db.Begin()} }
func (e *rocklineEngine) validates() bool  { return true }
func (e *rocklineEngine) bucketBytes() int { return e.db.BucketPoolBytes() }

func (e *rocklineEngine) spansExported() int64 {
	if e.tracer.exporter == nil {
		return -1
	}
	return e.tracer.exporter.spans.Load()
}

func (e *rocklineEngine) stats() (engineStats, error) {
	s, err := e.db.StorageStats()
	if err != nil {
		return engineStats{}, err
	}
	out := engineStats{BytesFlushed: s.BytesFlushed, BytesCompacted: s.BytesCompacted, StallMicros: s.StallMicros, WALSyncs: s.WALSyncs, ImmutableAll: s.ImmutableMemtable}
	for _, f := range s.Families {
		if f.Name == "data" {
			out.ImmutableData = f.ImmutableMemtables
		}
	}
	return out, nil
}

func (e *rocklineEngine) close() error {
	err := e.db.Close()
	return errors.Join(err, e.tracer.shutdown()) // after Close: the last spans are flushed
}

type rocklineTxn struct {
	e *rocklineEngine
	t *pipeline.Txn
}

func (t *rocklineTxn) get(key []byte) ([]byte, error) {
	v, err := t.t.Get(t.e.cf, key)
	if errors.Is(err, pipeline.ErrNotFound) {
		return nil, nil
	}
	return v, err
}

func (t *rocklineTxn) put(key, value []byte) error { return t.t.Put(t.e.cf, key, value) }

func (t *rocklineTxn) commit(async bool) error {
	var err error
	if async {
		err = t.t.Commit(context.Background())
	} else {
		err = t.t.CommitInline()
	}
	if errors.Is(err, pipeline.ErrConflict) || errors.Is(err, pipeline.ErrTxnTooOld) {
		return fmt.Errorf("%w: %w", errConflict, err)
	}
	return err
}

func (t *rocklineTxn) discard() { t.t.Discard() }

// ---- shared native setup ----

// nativeBase holds what both native engines share: the options (mirroring rockline's
// storage layer: statistics on, one 8 MiB LRU block cache, RocksDB's default memtables
// except for the data family) and the column families default, data, log.
type nativeBase struct {
	opts  []*grocksdb.Options // db/default, data, log
	bbto  *grocksdb.BlockBasedTableOptions
	cache *grocksdb.Cache
	cfs   []*grocksdb.ColumnFamilyHandle
	wo    *grocksdb.WriteOptions
	props *grocksdb.DB // for properties (the base DB of an OptimisticTransactionDB)
	logRecords
}

var nativeFamilies = []string{"default", "data", "log"}

func newNativeBase(o openOpts) *nativeBase {
	b := &nativeBase{}
	b.cache = grocksdb.NewLRUCache(uint64(max(o.BlockCacheSize, 8<<20)))
	b.bbto = grocksdb.NewDefaultBlockBasedTableOptions()
	b.bbto.SetBlockCache(b.cache)
	if o.BloomBitsPerKey > 0 {
		b.bbto.SetFilterPolicy(grocksdb.NewBloomFilterFull(o.BloomBitsPerKey))
	}
	mk := func(f storage.FamilyOptions) *grocksdb.Options {
		op := grocksdb.NewDefaultOptions()
		if f.WriteBufferSize == 0 {
			f.WriteBufferSize = storage.DefaultWriteBufferSize
		}
		if f.MaxWriteBufferNumber == 0 {
			f.MaxWriteBufferNumber = storage.DefaultMaxWriteBufferNumber
		}
		op.SetWriteBufferSize(uint64(f.WriteBufferSize))
		op.SetMaxWriteBufferNumber(f.MaxWriteBufferNumber)
		op.SetBlockBasedTableFactory(b.bbto)
		if o.RocklineTables {
			op.SetCompression(grocksdb.LZ4Compression)
			op.SetBottommostCompression(grocksdb.ZSTDCompression)
			op.SetLevelCompactionDynamicLevelBytes(true)
		}
		return op
	}
	dbo := mk(storage.FamilyOptions{})
	dbo.SetCreateIfMissing(true)
	dbo.SetCreateIfMissingColumnFamilies(true)
	dbo.EnableStatistics()
	b.opts = []*grocksdb.Options{dbo, mk(o.Data), mk(storage.FamilyOptions{})}
	b.wo = grocksdb.NewDefaultWriteOptions()
	b.wo.DisableWAL(o.DisableWAL)
	b.wo.SetSync(o.Sync)
	return b
}

// free releases the options; the database must be closed (or never opened).
func (b *nativeBase) free() {
	b.wo.Destroy()
	for _, o := range b.opts {
		o.Destroy()
	}
	b.bbto.Destroy()
	b.cache.Destroy()
}

func (b *nativeBase) destroyHandles() {
	for _, h := range b.cfs {
		h.Destroy()
	}
	b.cfs = nil
}

func (b *nativeBase) stats() (engineStats, error) {
	t := parseTickers(b.opts[0].GetStatisticsString())
	s := engineStats{
		BytesFlushed:   t["rocksdb.flush.write.bytes"],
		BytesCompacted: t["rocksdb.compact.write.bytes"],
		StallMicros:    t["rocksdb.stall.micros"],
		WALSyncs:       t["rocksdb.wal.synced"],
	}
	for i, h := range b.cfs {
		n, _ := b.props.GetIntPropertyCF("rocksdb.num-immutable-mem-table", h)
		s.ImmutableAll += n
		if i == 1 {
			s.ImmutableData = n
		}
	}
	return s, nil
}

// logRecords gives the engines without a log of their own (native-occ, raw-batch,
// badger) one log record per commit: a sequence number and pooled write-set buffers.
type logRecords struct {
	sequence atomic.Uint64
	bufs     sync.Pool
}

// logBuffer accumulates a transaction's write set as its log record: the same bytes
// rockline's log entry carries (family, key, value per write).
type logBuffer struct {
	n    uint64
	body []byte
}

func (b *logRecords) newLog() *logBuffer {
	if l, ok := b.bufs.Get().(*logBuffer); ok {
		l.n, l.body = 0, l.body[:0]
		return l
	}
	return &logBuffer{}
}

func (l *logBuffer) add(key, value []byte) {
	l.n++
	l.body = append(l.body, 4, 'd', 'a', 't', 'a')
	l.body = binary.AppendUvarint(l.body, uint64(len(key)))
	l.body = append(l.body, key...)
	l.body = binary.AppendUvarint(l.body, uint64(len(value)))
	l.body = append(l.body, value...)
}

// record returns the key and value of the log record under the next sequence number.
func (b *logRecords) record(l *logBuffer) (key, value []byte) {
	key = binary.BigEndian.AppendUint64(nil, b.sequence.Add(1))
	value = binary.AppendUvarint(make([]byte, 0, len(l.body)+10), l.n)
	return key, append(value, l.body...)
}

// parseTickers reads the "name COUNT : n" lines of RocksDB's statistics dump.
func parseTickers(dump string) map[string]uint64 {
	out := make(map[string]uint64)
	for line := range strings.Lines(dump) {
		name, rest, ok := strings.Cut(line, " COUNT : ")
		if !ok {
			continue
		}
		var n uint64
		if _, err := fmt.Sscan(strings.TrimSpace(rest), &n); err == nil {
			out[name] = n
		}
	}
	return out
}

// ---- native-occ: OptimisticTransactionDB ----

type nativeEngine struct {
	*nativeBase
	db *grocksdb.OptimisticTransactionDB
	to *grocksdb.OptimisticTransactionOptions
}

func openNative(dir string, o openOpts) (*nativeEngine, error) {
	b := newNativeBase(o)
	db, cfs, err := grocksdb.OpenOptimisticTransactionDbColumnFamilies(b.opts[0], dir, nativeFamilies, b.opts)
	if err != nil {
		b.free()
		return nil, err
	}
	b.cfs = cfs
	b.props = db.GetBaseDB()
	to := grocksdb.NewDefaultOptimisticTransactionOptions()
	to.SetSetSnapshot(true)
	return &nativeEngine{nativeBase: b, db: db, to: to}, nil
}

func (e *nativeEngine) validates() bool      { return true }
func (e *nativeEngine) spansExported() int64 { return -1 }

func (e *nativeEngine) begin() txn {
	tx := e.db.TransactionBegin(e.wo, e.to, nil)
	snap := tx.GetSnapshot()
	ro := grocksdb.NewDefaultReadOptions()
	ro.SetSnapshot(snap)
	return &nativeTxn{e: e, tx: tx, snap: snap, ro: ro, log: e.newLog()}
}

func (e *nativeEngine) close() error {
	e.db.CloseBaseDB(e.props)
	e.destroyHandles()
	e.db.Close()
	e.to.Destroy()
	e.free()
	return nil
}

type nativeTxn struct {
	e    *nativeEngine
	tx   *grocksdb.Transaction
	snap *grocksdb.Snapshot
	ro   *grocksdb.ReadOptions
	log  *logBuffer
}

func (t *nativeTxn) get(key []byte) ([]byte, error) {
	s, err := t.tx.GetForUpdateWithCF(t.ro, t.e.cfs[1], key)
	if err != nil {
		return nil, err
	}
	defer s.Free()
	if !s.Exists() {
		return nil, nil
	}
	return append([]byte(nil), s.Data()...), nil
}

func (t *nativeTxn) put(key, value []byte) error {
	t.log.add(key, value)
	return t.tx.PutCF(t.e.cfs[1], key, value)
}

func (t *nativeTxn) commit(bool) error {
	defer t.discard()
	if t.log.n > 0 {
		k, v := t.e.record(t.log)
		if err := t.tx.PutCF(t.e.cfs[2], k, v); err != nil {
			return err
		}
	}
	err := t.tx.Commit()
	if err != nil && isNativeConflict(err) {
		return fmt.Errorf("%w: %w", errConflict, err)
	}
	return err
}

func (t *nativeTxn) discard() {
	if t.tx == nil {
		return
	}
	t.tx.Destroy() // rolls back an uncommitted transaction
	t.ro.Destroy()
	t.snap.Destroy() // frees the C wrapper only; the snapshot is the transaction's
	t.e.bufs.Put(t.log)
	t.tx, t.ro, t.snap, t.log = nil, nil, nil, nil
}

// isNativeConflict: Status::Busy (a tracked key changed) or Status::TryAgain (the
// memtable history is too short to check).
func isNativeConflict(err error) bool {
	s := err.Error()
	return strings.Contains(s, "Resource busy") || strings.Contains(s, "Try again")
}

// ---- raw-batch: plain DB, Get then one WriteBatch, no validation ----

type rawEngine struct {
	*nativeBase
	db *grocksdb.DB
	ro *grocksdb.ReadOptions
}

func openRaw(dir string, o openOpts) (*rawEngine, error) {
	b := newNativeBase(o)
	db, cfs, err := grocksdb.OpenDbColumnFamilies(b.opts[0], dir, nativeFamilies, b.opts)
	if err != nil {
		b.free()
		return nil, err
	}
	b.cfs = cfs
	b.props = db
	return &rawEngine{nativeBase: b, db: db, ro: grocksdb.NewDefaultReadOptions()}, nil
}

func (e *rawEngine) validates() bool      { return false }
func (e *rawEngine) spansExported() int64 { return -1 }

func (e *rawEngine) begin() txn {
	return &rawTxn{e: e, wb: grocksdb.NewWriteBatch(), log: e.newLog()}
}

func (e *rawEngine) close() error {
	e.destroyHandles()
	e.db.Close()
	e.ro.Destroy()
	e.free()
	return nil
}

type rawTxn struct {
	e   *rawEngine
	wb  *grocksdb.WriteBatch
	log *logBuffer
}

func (t *rawTxn) get(key []byte) ([]byte, error) {
	s, err := t.e.db.GetCF(t.e.ro, t.e.cfs[1], key)
	if err != nil {
		return nil, err
	}
	defer s.Free()
	if !s.Exists() {
		return nil, nil
	}
	return append([]byte(nil), s.Data()...), nil
}

func (t *rawTxn) put(key, value []byte) error {
	t.log.add(key, value)
	t.wb.PutCF(t.e.cfs[1], key, value)
	return nil
}

func (t *rawTxn) commit(bool) error {
	defer t.discard()
	if t.log.n == 0 {
		return nil
	}
	k, v := t.e.record(t.log)
	t.wb.PutCF(t.e.cfs[2], k, v)
	return t.e.db.Write(t.e.wo, t.wb)
}

func (t *rawTxn) discard() {
	if t.wb == nil {
		return
	}
	t.wb.Destroy()
	t.e.bufs.Put(t.log)
	t.wb, t.log = nil, nil
}
