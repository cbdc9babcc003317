package main

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"math/bits"
	"os"
	"path/filepath"
	"time"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/pipeline"
)

// The scale scenario: one event store database (eventstore over pipeline.Open with
// the default config) grows through cfg.scaleSizes events, and at each size the
// harness measures appends of one event (to existing and to new streams) and reads
// of whole streams, and reports the load time, the disk and the memory it took.
//
// The growth appends through the public API (eventstore.Store.Append, a few events
// per commit, several workers): the event store's records are positioned values whose
// log position is known only at commit, and each commit's log entry holds its events
// and the records' writes, in an encoding internal to the module, so SST files written
// here would reimplement private encodings rather than load what rockline writes.
// Every stream loaded gets scaleStreamEvents events, in commits of cfg.scaleLoadBatch
// events, the streams' commits interleaved over the log (round after round, every
// stream's next batch), so reading a stream reads several log entries spread over the
// whole log, as in a store grown over time.

// scaleStreamEvents is the number of events the load gives every stream.
const scaleStreamEvents = 100

// scaleEventBytes is the size of every event's data.
const scaleEventBytes = 100

// scaleResult is the figures of one size of the scale scenario: one JSON line.
type scaleResult struct {
	Scenario         string            `json:"scenario"`
	Label            string            `json:"label"`
	Size             int               `json:"size"`             // the size asked for
	Events           uint64            `json:"events"`           // events in the database when measuring began
	Streams          int               `json:"streams"`          // streams loaded, scaleStreamEvents events each
	LoadedEvents     uint64            `json:"loaded_events"`    // events this size's growth appended
	LoadSeconds      float64           `json:"load_seconds"`     // this size's growth, wall time
	LoadCPUSeconds   float64           `json:"load_cpu_seconds"` // process CPU time during the growth
	LoadEventsPerS   float64           `json:"load_events_per_s"`
	LoadBatch        int               `json:"load_events_per_commit"`
	LoadWorkers      int               `json:"load_workers"`
	SettleSeconds    float64           `json:"settle_seconds"` // waiting for flushes and compactions after the load
	PendingCompactMB float64           `json:"pending_compaction_mib_at_start"`
	Workers          int               `json:"workers"`
	Seconds          float64           `json:"seconds"` // each measured phase's length
	Appends          uint64            `json:"appends"`
	AppendsPerS      float64           `json:"appends_per_s"`
	AppendLat        latency           `json:"append_latency"`
	AppendExisting   latency           `json:"append_existing_latency"`
	AppendNew        latency           `json:"append_new_latency"`
	AppendCPU        float64           `json:"cpu_us_per_append"`          // the process's CPU time over the phase, per append
	AppendReadKiB    float64           `json:"read_kib_per_append"`        // /proc/self/io rchar over the phase, per append
	AppendDeviceKiB  float64           `json:"device_read_kib_per_append"` // read_bytes: the part the device served
	Reads            uint64            `json:"reads"`
	ReadsPerS        float64           `json:"reads_per_s"`
	ReadEvents       float64           `json:"events_per_read"`
	ReadLat          latency           `json:"read_latency"`
	ReadCPU          float64           `json:"cpu_us_per_read"`
	ReadReadKiB      float64           `json:"read_kib_per_read"`
	ReadDeviceKiB    float64           `json:"device_read_kib_per_read"`
	AppendP99Ratio   float64           `json:"append_p99_vs_smallest"`
	ReadP99Ratio     float64           `json:"read_p99_vs_smallest"`
	DiskBytes        int64             `json:"disk_bytes"` // blocks allocated under the database folder
	FileBytes        int64             `json:"file_bytes"` // the files' sizes (RocksDB preallocates WAL space beyond them)
	WALBytes         int64             `json:"wal_bytes"`  // the write-ahead log files' sizes, among them
	SSTBytes         map[string]uint64 `json:"sst_bytes_by_family"`
	RSSMiB           float64           `json:"rss_mib"` // after the measured phases and a GC
	PeakRSSMiB       float64           `json:"peak_rss_mib"`
	AnonMiB          float64           `json:"anon_mib"`
	GoHeapMiB        float64           `json:"go_heap_mib"`
	BlockCacheMiB    float64           `json:"block_cache_mib"`
	MemtableMiB      float64           `json:"memtable_mib"`
	LoadAvg          float64           `json:"load_avg_1m"` // the machine's, after the phases
	Error            string            `json:"error,omitempty"`
}

// scaleDB is the growing database and what the harness knows of its contents.
type scaleDB struct {
	dir     string
	db      *pipeline.DB
	es      *eventstore.Store
	events  uint64 // events appended so far, load and measured appends
	streams int    // streams loaded: stream i has scaleStreamEvents events plus its extras
	// extras[w][i] counts the events append worker w added to loaded stream i (worker
	// w appends to the loaded streams i with i % workers == w only).
	extras []map[int]uint64
	// created[w] counts the new streams append worker w has made.
	created []uint64
}

// mix64 is a bijection of the 64-bit integers that scatters consecutive ones, so
// that stream names made from counters spread over the key space as random names do.
func mix64(x uint64) uint64 {
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// scaleStream is the name of the stream with key key: a loaded stream's key is its
// index, a new stream's is scaleNewKey's. Names are "order-" and 16 hex digits.
func scaleStream(key uint64) string {
	return "order-" + hex16(mix64(key))
}

// scaleNewKey is the key of the n-th stream append worker w creates; it is never a
// loaded stream's (those are below 1<<40), so neither is its name, mix64 being a
// bijection.
func scaleNewKey(w int, n uint64) uint64 {
	return 1<<63 | uint64(w)<<40 | n
}

// hex16 is v in 16 hex digits.
func hex16(v uint64) string {
	var b [8]byte
	for i := range b {
		b[i] = byte(v >> (56 - 8*i))
	}
	return hex.EncodeToString(b[:])
}

// scaleEventID is the ID of revision rev of the stream with key key: 32 hex digits,
// as a UUID without dashes.
func scaleEventID(key, rev uint64) string {
	return hex16(mix64(key)) + hex16(mix64(bits.RotateLeft64(key, 32)^rev))
}

// scaleEvent is one event of the stream named by key at rev.
func scaleEvent(typ string, key, rev uint64) eventstore.Event {
	off := int(mix64(key^rev<<40) % uint64(len(valuePool)-scaleEventBytes))
	return eventstore.Event{ID: scaleEventID(key, rev), Type: typ, Data: valuePool[off : off+scaleEventBytes : off+scaleEventBytes]}
}

// scaleLoadCost is the planned cost of appending one event during a growth.
const scaleLoadCost = 30 * time.Microsecond

// scalePlan is the planned cost of each size: its growth, then its two phases.
func scalePlan(cfg *config) []time.Duration {
	var out []time.Duration
	prev := 0
	for _, n := range cfg.scaleSizes {
		out = append(out, time.Duration(n-prev)*scaleLoadCost+2*cfg.scaleDuration)
		prev = n
	}
	return out
}

// runScale runs the scale scenario: it opens one database under cfg.dir, grows it to
// each size in turn and measures it there, emitting one scaleResult per size, and
// removes the database at the end. It stops at the first size that fails. It reports
// its progress against scalePlan to advance, before each progress line: as a growth
// appends, and the rest of a size's planned cost as the size completes.
func runScale(cfg *config, progress func(string), emit func(any), advance func(planned time.Duration)) []scaleResult {
	var out []scaleResult
	sdb, err := openScale(cfg)
	if err != nil {
		r := scaleResult{Scenario: "scale", Error: err.Error()}
		emit(r)
		return append(out, r)
	}
	defer func() {
		if err := sdb.close(); err != nil {
			progress("scale | close: " + err.Error())
		}
	}()
	plan := scalePlan(cfg)
	for i, size := range cfg.scaleSizes {
		var advanced time.Duration
		step := func(d time.Duration) { // never beyond the size's plan
			d = min(d, plan[i]-advanced)
			advanced += d
			advance(d)
		}
		r := runScaleSize(cfg, sdb, size, progress, step)
		step(plan[i] - advanced)
		if len(out) > 0 {
			first := out[0]
			r.AppendP99Ratio = ratioOf(r.AppendLat.P99, first.AppendLat.P99)
			r.ReadP99Ratio = ratioOf(r.ReadLat.P99, first.ReadLat.P99)
		} else if r.Error == "" {
			r.AppendP99Ratio, r.ReadP99Ratio = 1, 1
		}
		emit(r)
		out = append(out, r)
		msg := fmt.Sprintf("scale | %d events | load %.1fs (%s events/s), %.2f GiB on disk, RSS %.0f MiB | append p50 %s p99 %s (%.2fx) CPU %s, read p50 %s p99 %s (%.2fx) CPU %s",
			r.Events, r.LoadSeconds, fmtRate(r.LoadEventsPerS), float64(r.DiskBytes)/(1<<30), r.RSSMiB,
			fmtUS(r.AppendLat.P50), fmtUS(r.AppendLat.P99), r.AppendP99Ratio, fmtUS(r.AppendCPU),
			fmtUS(r.ReadLat.P50), fmtUS(r.ReadLat.P99), r.ReadP99Ratio, fmtUS(r.ReadCPU))
		if r.Error != "" {
			progress(msg + ", ERROR: " + r.Error)
			break
		}
		progress(msg)
	}
	return out
}

// ratioOf is a/b, or 0 when b is not positive (a figure missing from a failed size).
func ratioOf(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return a / b
}

// openScale opens the scale scenario's database in a new folder under cfg.dir.
func openScale(cfg *config) (*scaleDB, error) {
	dir, err := os.MkdirTemp(cfg.dir, "rockline-scale-")
	if err != nil {
		return nil, fmt.Errorf("scale: %w", err)
	}
	db, err := pipeline.Open(filepath.Join(dir, "db"), pipeline.Config{})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("scale: open: %w", err), os.RemoveAll(dir))
	}
	es, err := eventstore.New(db)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("scale: event store: %w", err), db.Close(), os.RemoveAll(dir))
	}
	s := &scaleDB{dir: dir, db: db, es: es, extras: make([]map[int]uint64, cfg.scaleWorkers), created: make([]uint64, cfg.scaleWorkers)}
	for w := range s.extras {
		s.extras[w] = map[int]uint64{}
	}
	return s, nil
}

// close closes the database and removes its folder.
func (s *scaleDB) close() error {
	return errors.Join(s.db.Close(), os.RemoveAll(s.dir))
}

// runScaleSize grows the database to size events, waits for its compactions, then
// measures appends and reads, each for cfg.scaleDuration, and what it takes in disk
// and memory.
func runScaleSize(cfg *config, s *scaleDB, size int, progress func(string), advance func(time.Duration)) scaleResult {
	r := scaleResult{Scenario: "scale", Size: size, LoadBatch: cfg.scaleLoadBatch, LoadWorkers: cfg.scaleLoadWorkers, Workers: cfg.scaleWorkers}
	r.Label = fmt.Sprintf("scale N=%d W=%d", size, cfg.scaleWorkers)
	ctx := context.Background()
	dog := watchdog(fmt.Sprintf("scale at %d events", size), cfg.runTimeout+2*cfg.scaleDuration+cfg.scaleSettle+time.Duration(size)*200*time.Microsecond)
	defer dog.Stop()
	before := s.events
	cpu0, t0 := cpuTime(), time.Now()
	if err := s.grow(ctx, cfg, size, progress, advance); err != nil {
		r.Error = "load: " + err.Error()
		return r
	}
	r.LoadSeconds, r.LoadCPUSeconds = time.Since(t0).Seconds(), (cpuTime() - cpu0).Seconds()
	r.LoadedEvents = s.events - before
	r.LoadEventsPerS = ratioOf(float64(r.LoadedEvents), r.LoadSeconds)
	r.Events, r.Streams = s.events, s.streams
	settle, pending, err := s.settle(cfg.scaleSettle)
	r.SettleSeconds, r.PendingCompactMB = settle.Seconds(), float64(pending)/mib
	if err != nil {
		r.Error = "settle: " + err.Error()
		return r
	}
	if err := s.measureAppends(cfg, &r); err != nil {
		r.Error = "appends: " + err.Error()
		return r
	}
	if err := s.measureReads(ctx, cfg, &r); err != nil {
		r.Error = "reads: " + err.Error()
		return r
	}
	if err := s.usage(&r); err != nil {
		r.Error = "usage: " + err.Error()
	}
	return r
}

// scaleSizesValid reports whether sizes are positive and increasing.
func scaleSizesValid(sizes []int) bool {
	for i, n := range sizes {
		if n < 1 || (i > 0 && n <= sizes[i-1]) {
			return false
		}
	}
	return len(sizes) > 0
}
