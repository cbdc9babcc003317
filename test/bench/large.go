package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/linxGnu/grocksdb"

	"github.com/rockline/rockline/storage"
)

// The large scenario: data larger than the block cache. It bulk-loads cfg.largeKeys
// keys with 200-byte values (10 million: about 2 GiB) into SST files once per bloom
// setting (the load is a measured figure), then, round after round, gives every
// engine a fresh database holding exactly those files (hard-linked and ingested, so
// the load is not repeated and every engine starts from the same tree) and runs
// read-then-write commits on random existing keys. Reads miss the memtable, so they
// go through the block cache to the SST files: the bloom filter decides how many
// files (L0 files and levels above the bottom) a point read has to look into.

// bloomOnBits is the bloom setting "on": rockline's default.
const bloomOnBits = storage.DefaultBloomBitsPerKey

// largeKeyLen and largeValueLen: 16-byte keys like the other scenarios, 200-byte values.
const largeKeyLen, largeValueLen = 16, 200

// largeKeysPerFile keys go in one SST file (about 210 MiB at 200-byte values).
const largeKeysPerFile = 1 << 20

func largeKey(dst []byte, i uint64) []byte {
	dst = append(dst[:0], "largekey"...)
	return binary.BigEndian.AppendUint64(dst, i)
}

// largeLoad is one bloom setting's bulk load.
type largeLoad struct {
	Scenario     string    `json:"scenario"`
	Bloom        string    `json:"bloom"`
	BloomBits    float64   `json:"bloom_bits_per_key"`
	Keys         int       `json:"keys"`
	ValueBytes   int       `json:"value_bytes"`
	Files        int       `json:"sst_files"`
	FileBytes    int64     `json:"sst_bytes"`
	WriteSeconds float64   `json:"sst_write_seconds"` // SST files written, wall time
	CPUSeconds   float64   `json:"sst_write_cpu_seconds"`
	KeysPerS     float64   `json:"keys_per_s"`
	IngestSecs   []float64 `json:"ingest_seconds"` // per engine and round: link + ingest
	Error        string    `json:"error,omitempty"`
	dir          string
	groups       [][]string // files per group, bottom group first
}

// largeResult is one engine's figures for one round at one bloom setting.
type largeResult struct {
	Scenario       string  `json:"scenario"`
	Label          string  `json:"label"`
	Engine         string  `json:"engine"`
	Bloom          string  `json:"bloom"`
	Round          int     `json:"round"`
	Keys           int     `json:"keys"`
	KeysPerCommit  int     `json:"keys_per_commit"`
	Workers        int     `json:"workers"`
	BlockCacheMiB  int     `json:"block_cache_mib"`
	IngestSeconds  float64 `json:"ingest_seconds"`
	Seconds        float64 `json:"seconds"`
	Commits        uint64  `json:"commits"`
	Conflicts      uint64  `json:"conflicts"`
	CommitsPerS    float64 `json:"commits_per_s"`
	CommitLat      latency `json:"commit_latency"`
	TxnLat         latency `json:"txn_latency"`
	CPUPerCommit   float64 `json:"cpu_us_per_commit"`
	DataMissPerC   float64 `json:"data_block_misses_per_commit"`
	DataHitPerC    float64 `json:"data_block_hits_per_commit"`
	BloomUsefulPC  float64 `json:"bloom_useful_per_commit"`  // SST reads the filter saved
	BloomCheckedPC float64 `json:"bloom_checked_per_commit"` // useful + positive
	ReadKiBPerC    float64 `json:"read_kib_per_commit"`      // /proc/self/io rchar: SST bytes read (page cache or device)
	DeviceKiBPerC  float64 `json:"device_read_kib_per_commit"`
	L0Files        uint64  `json:"l0_files_at_end"`
	LevelsAtStart  string  `json:"data_files_per_level_at_start,omitempty"` // native engines: L0..L6`
	Error          string  `json:"error,omitempty"`
}

// procIO returns /proc/self/io's rchar (bytes read through read syscalls, page cache
// hits included) and read_bytes (bytes fetched from the device).
func procIO() (rchar, device uint64, err error) {
	f, err := os.Open("/proc/self/io")
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		name, v, ok := strings.Cut(s.Text(), ":")
		if !ok {
			continue
		}
		n, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		switch name {
		case "rchar":
			rchar = n
		case "read_bytes":
			device = n
		}
	}
	return rchar, device, s.Err()
}

// largeGroups is how the load is spread over levels, bottom first: every 100th key
// goes in the top group, every other 10th key in the middle one, the rest (90%) in
// the bottom one. Ingested in that order, each group overlaps the ones before and
// lands above them (the bottom group on L6, the others on the level above or in L0,
// where RocksDB's dynamic level sizes leave room), so the tree has the shape levelled
// compaction gives data written over time, and a point read of a bottom key first
// checks the files above: what a bloom filter lets it skip.
const largeGroups = 3

func largeGroup(i uint64) int {
	switch {
	case i%100 == 0:
		return 2
	case i%10 == 0:
		return 1
	}
	return 0
}

// loadLarge writes the SST files of one bloom setting into a new folder under
// cfg.dir, one file per group and range of largeKeysPerFile keys, two writers in
// parallel.
func loadLarge(cfg *config, bloom string, bits float64) *largeLoad {
	l := &largeLoad{Scenario: "large", Bloom: bloom, BloomBits: bits, Keys: cfg.largeKeys, ValueBytes: largeValueLen}
	dir, err := os.MkdirTemp(cfg.dir, "rockline-large-sst-")
	if err != nil {
		l.Error = err.Error()
		return l
	}
	l.dir = dir
	type task struct {
		group    int
		from, to uint64
		path     string
	}
	var tasks []task
	l.groups = make([][]string, largeGroups)
	for g := range largeGroups {
		for c := 0; c*largeKeysPerFile < cfg.largeKeys; c++ {
			t := task{g, uint64(c * largeKeysPerFile), uint64(min((c+1)*largeKeysPerFile, cfg.largeKeys)), filepath.Join(dir, fmt.Sprintf("g%d-%04d.sst", g, c))}
			tasks = append(tasks, t)
		}
	}
	opts := storage.Options{BloomBitsPerKey: bits}
	cpu0, t0 := cpuTime(), time.Now()
	var next atomic.Int64
	errs := make([]error, len(tasks))
	written := make([]bool, len(tasks))
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(tasks)) {
		wg.Go(func() {
			key := make([]byte, 0, largeKeyLen)
			for {
				i := int(next.Add(1) - 1)
				if i >= len(tasks) {
					return
				}
				t := tasks[i]
				written[i], errs[i] = writeLargeFile(t.path, opts, t.group, t.from, t.to, key)
			}
		})
	}
	wg.Wait()
	l.WriteSeconds, l.CPUSeconds = time.Since(t0).Seconds(), (cpuTime() - cpu0).Seconds()
	if err := errors.Join(errs...); err != nil {
		l.Error = err.Error()
		return l
	}
	for i, t := range tasks {
		if !written[i] {
			continue
		}
		st, err := os.Stat(t.path)
		if err != nil {
			l.Error = err.Error()
			return l
		}
		l.FileBytes += st.Size()
		l.Files++
		l.groups[t.group] = append(l.groups[t.group], t.path)
	}
	l.KeysPerS = float64(cfg.largeKeys) / l.WriteSeconds
	return l
}

// largeValue is key i's loaded value: 200 incompressible bytes cut from the pool.
func largeValue(i uint64) []byte {
	off := int(i*largeValueLen) % (len(valuePool) - largeValueLen) // adjacent values do not overlap
	return valuePool[off : off+largeValueLen]
}

// writeLargeFile writes the keys of group in [from, to) into a file at path; it
// reports false (and leaves no file) when the range holds none of the group's keys.
func writeLargeFile(path string, opts storage.Options, group int, from, to uint64, key []byte) (bool, error) {
	w, err := storage.NewSSTWriter(path, opts, storage.FamilyOptions{})
	if err != nil {
		return false, err
	}
	defer w.Close()
	for i := from; i < to; i++ {
		if largeGroup(i) != group {
			continue
		}
		key = largeKey(key, i)
		if err := w.Put(key, largeValue(i)); err != nil {
			return false, fmt.Errorf("key %d: %w", i, err)
		}
	}
	if w.Entries() == 0 {
		w.Close()
		return false, os.Remove(path)
	}
	return true, w.Finish()
}

// stage puts the load's files into a new folder for one engine (ingestion with Move
// consumes the names it is given), group by group: the bottom group hard-linked,
// the others copied. RocksDB writes the global sequence number it gives an
// overlapping file into the file itself (write_global_seqno, which RocksDB 7.8's C
// API cannot turn off), so a linked upper file would be changed under the next
// engine; bottom files overlap nothing and stay as written.
func (l *largeLoad) stage(dir string) ([][]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	out := make([][]string, len(l.groups))
	for g, paths := range l.groups {
		for _, p := range paths {
			q := filepath.Join(dir, filepath.Base(p))
			var err error
			if g == 0 {
				err = os.Link(p, q)
			} else {
				err = copyFile(p, q)
			}
			if err != nil {
				return nil, fmt.Errorf("stage %s: %w", p, err)
			}
			out[g] = append(out[g], q)
		}
	}
	return out, nil
}

func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}

// openLoaded opens a fresh database of spec's kind in dir holding the load's keys in
// its data family.
func openLoaded(spec engineSpec, dir string, o openOpts, l *largeLoad) (engine, time.Duration, error) {
	t0 := time.Now()
	groups, err := l.stage(dir + ".stage")
	if err != nil {
		return nil, 0, err
	}
	defer os.RemoveAll(dir + ".stage")
	switch spec.Kind {
	case kindParallel, kindSerial:
		// Create rockline's families, then ingest below its commit path (a bulk load
		// bypasses the log, as a restore would), then open it for the run.
		e, err := openRockline(spec, dir, o)
		if err != nil {
			return nil, 0, err
		}
		if err := e.close(); err != nil {
			return nil, 0, err
		}
		st, err := storage.Open(dir, storage.Options{BloomBitsPerKey: o.BloomBitsPerKey, BlockCacheSize: o.BlockCacheSize})
		if err != nil {
			return nil, 0, err
		}
		f, err := st.Family("data")
		for _, files := range groups {
			if err == nil && len(files) > 0 {
				err = st.IngestExternalFiles(f, files, storage.IngestOptions{Move: true})
			}
		}
		if err = errors.Join(err, st.Close()); err != nil {
			return nil, 0, err
		}
		d := time.Since(t0)
		e, err = openRockline(spec, dir, o)
		return e, d, err
	case kindNative, kindRaw:
		e, err := openEngine(spec, dir, o)
		if err != nil {
			return nil, 0, err
		}
		var base *nativeBase
		switch n := e.(type) {
		case *nativeEngine:
			base = n.nativeBase
		case *rawEngine:
			base = n.nativeBase
		}
		io := grocksdb.NewDefaultIngestExternalFileOptions()
		io.SetMoveFiles(true)
		for _, files := range groups {
			if err == nil && len(files) > 0 {
				err = base.props.IngestExternalFileCF(base.cfs[1], files, io)
			}
		}
		io.Destroy()
		if err != nil {
			e.close()
			return nil, 0, fmt.Errorf("ingest: %w", err)
		}
		return e, time.Since(t0), nil
	}
	return nil, 0, fmt.Errorf("engine %s: no bulk load for this kind", spec.Name)
}

// tickers returns every RocksDB ticker of the engine's database.
func engineTickers(e engine) map[string]uint64 {
	switch n := e.(type) {
	case *rocklineEngine:
		if s, err := n.db.StorageStats(); err == nil {
			return s.Tickers
		}
	case *nativeEngine:
		return parseTickers(n.opts[0].GetStatisticsString())
	case *rawEngine:
		return parseTickers(n.opts[0].GetStatisticsString())
	}
	return nil
}

// engineLevels returns the data family's file count per level, L0 to L6 (native
// engines only: rockline's storage stats give L0 only).
func engineLevels(e engine) string {
	var base *nativeBase
	switch n := e.(type) {
	case *nativeEngine:
		base = n.nativeBase
	case *rawEngine:
		base = n.nativeBase
	default:
		return ""
	}
	var parts []string
	for lv := range 7 {
		parts = append(parts, base.props.GetPropertyCF(fmt.Sprintf("rocksdb.num-files-at-level%d", lv), base.cfs[1]))
	}
	return strings.Join(parts, "/")
}

func engineL0Files(e engine) uint64 {
	switch n := e.(type) {
	case *rocklineEngine:
		if s, err := n.db.StorageStats(); err == nil {
			for _, f := range s.Families {
				if f.Name == "data" {
					return f.L0Files
				}
			}
		}
	case *nativeEngine:
		v, _ := n.props.GetIntPropertyCF("rocksdb.num-files-at-level0", n.cfs[1])
		return v
	case *rawEngine:
		v, _ := n.props.GetIntPropertyCF("rocksdb.num-files-at-level0", n.cfs[1])
		return v
	}
	return 0
}

// largeOpen is the storage setting of the scenario at one bloom setting: the block
// cache of --large-cache-mib, the bloom filter on or off, and for the native engines
// rockline's table and level defaults, so the engines differ in their commit path only.
func largeOpen(cfg *config, bits float64) openOpts {
	return openOpts{BloomBitsPerKey: bits, BlockCacheSize: int64(cfg.largeCacheMiB) * mib, RocklineTables: true}
}

// runLarge runs the large scenario: loads, then rounds of every (engine, bloom) pair
// in a rotated order, then removes every file it made. done is called as each load
// (loaded true) and each run (false) completes, before its progress line.
func runLarge(cfg *config, progress func(string), emit func(any), done func(loaded bool)) ([]*largeLoad, [][]largeResult) {
	settings := []struct {
		name string
		bits float64
	}{{"on", bloomOnBits}, {"off", -1}}
	var loads []*largeLoad
	defer func() {
		for _, l := range loads {
			if l.dir != "" {
				os.RemoveAll(l.dir)
			}
		}
	}()
	for _, s := range settings {
		progress(fmt.Sprintf("large | loading %d keys of %d B, bloom %s", cfg.largeKeys, largeValueLen, s.name))
		l := loadLarge(cfg, s.name, s.bits)
		done(true)
		loads = append(loads, l)
		if l.Error != "" {
			emit(l)
			progress("large | load failed: " + l.Error)
			return loads, nil
		}
		progress(fmt.Sprintf("large | bloom %s: %d SST files, %.2f GiB in %.1fs (%s keys/s, %.0f MiB/s)",
			s.name, l.Files, float64(l.FileBytes)/(1<<30), l.WriteSeconds, fmtRate(l.KeysPerS), float64(l.FileBytes)/mib/l.WriteSeconds))
	}
	type cell struct {
		spec engineSpec
		load *largeLoad
	}
	var cells []cell
	for _, k := range cfg.largeEngines {
		for _, l := range loads {
			cells = append(cells, cell{engineSpec{Name: k, Kind: k}, l})
		}
	}
	var rounds [][]largeResult
	for r := 1; r <= cfg.rounds; r++ {
		var round []largeResult
		for i := range cells {
			c := cells[(i+r-1)%len(cells)]
			res := runLargeOnce(cfg, c.spec, c.load, r)
			done(false)
			c.load.IngestSecs = append(c.load.IngestSecs, res.IngestSeconds)
			emit(res)
			round = append(round, res)
			extra := ""
			if res.Error != "" {
				extra = ", ERROR: " + res.Error
			}
			progress(fmt.Sprintf("large | %s bloom %s | round %d/%d | %s commits/s, p99 %s, %.1f data-block misses and %.1f KiB read per commit%s",
				c.spec.Name, c.load.Bloom, r, cfg.rounds, fmtRate(res.CommitsPerS), fmtUS(res.CommitLat.P99), res.DataMissPerC, res.ReadKiBPerC, extra))
		}
		rounds = append(rounds, round)
	}
	for _, l := range loads {
		emit(l)
	}
	return loads, rounds
}

func runLargeOnce(cfg *config, spec engineSpec, l *largeLoad, round int) largeResult {
	res := largeResult{Scenario: "large", Engine: spec.Name, Bloom: l.Bloom, Round: round, Keys: cfg.largeKeys,
		KeysPerCommit: cfg.largeKeysPerCommit, Workers: cfg.largeWorkers, BlockCacheMiB: cfg.largeCacheMiB}
	res.Label = fmt.Sprintf("large N=%d W=%d K=%d cache=%dMiB", cfg.largeKeys, cfg.largeWorkers, cfg.largeKeysPerCommit, cfg.largeCacheMiB)
	tmp, err := os.MkdirTemp(cfg.dir, "rockline-large-")
	if err != nil {
		res.Error = err.Error()
		return res
	}
	defer os.RemoveAll(tmp)
	dog := watchdog(fmt.Sprintf("large %s bloom %s round %d", spec.Name, l.Bloom, round), cfg.duration+cfg.runTimeout+5*time.Minute)
	defer dog.Stop()
	eng, ingest, err := openLoaded(spec, filepath.Join(tmp, "db"), largeOpen(cfg, l.BloomBits), l)
	res.IngestSeconds = ingest.Seconds()
	if err != nil {
		res.Error = "open and load: " + err.Error()
		return res
	}
	defer func() {
		if eng != nil {
			if err := eng.close(); err != nil && res.Error == "" {
				res.Error = "close: " + err.Error()
			}
		}
	}()

	res.LevelsAtStart = engineLevels(eng)
	// A warm-up the figures leave out: the block cache fills and the page cache holds
	// what the load and the staging just wrote, as in a database that has been running.
	var stop atomic.Bool
	var firstErr error
	var errOnce sync.Once
	fail := func(err error) { errOnce.Do(func() { firstErr = err }); stop.Store(true) }
	runLargeWorkers(cfg, eng, round+1000, largeWarmup(cfg), &stop, fail)
	if firstErr != nil {
		res.Error = "warm-up: " + firstErr.Error()
		return res
	}
	stop.Store(false)
	runtime.GC()
	t0Tick := engineTickers(eng)
	r0, d0, _ := procIO()
	cpu0, t0 := cpuTime(), time.Now()
	stats := runLargeWorkers(cfg, eng, round, cfg.duration, &stop, fail)
	elapsed, cpu := time.Since(t0), cpuTime()-cpu0
	r1, d1, _ := procIO()
	t1Tick := engineTickers(eng)
	res.L0Files = engineL0Files(eng)

	var commit, whole hist
	for _, st := range stats {
		res.Commits += st.commits
		res.Conflicts += st.conflicts
		commit.merge(&st.commit)
		whole.merge(&st.txn)
	}
	res.Seconds = elapsed.Seconds()
	res.CommitsPerS = float64(res.Commits) / res.Seconds
	res.CommitLat, res.TxnLat = commit.summary(), whole.summary()
	if n := float64(res.Commits); n > 0 {
		res.CPUPerCommit = float64(cpu.Microseconds()) / n
		delta := func(name string) float64 { return float64(t1Tick[name]-t0Tick[name]) / n }
		res.DataMissPerC = delta("rocksdb.block.cache.data.miss")
		res.DataHitPerC = delta("rocksdb.block.cache.data.hit")
		res.BloomUsefulPC = delta("rocksdb.bloom.filter.useful")
		res.BloomCheckedPC = res.BloomUsefulPC + delta("rocksdb.bloom.filter.full.positive")
		res.ReadKiBPerC = float64(r1-r0) / 1024 / n
		res.DeviceKiBPerC = float64(d1-d0) / 1024 / n
	}
	if firstErr != nil {
		res.Error = firstErr.Error()
	}
	return res
}

// largeWarmup is the unmeasured start of each run: a fifth of the run, at most 2 s.
func largeWarmup(cfg *config) time.Duration { return min(cfg.duration/5, 2*time.Second) }

// runLargeWorkers runs cfg.largeWorkers workers on e for d (or until one fails) and
// returns their counters.
func runLargeWorkers(cfg *config, e engine, seed int, d time.Duration, stop *atomic.Bool, fail func(error)) []*workerStats {
	stats := make([]*workerStats, cfg.largeWorkers)
	var wg sync.WaitGroup
	for g := range cfg.largeWorkers {
		st := &workerStats{}
		stats[g] = st
		rng := rand.New(rand.NewPCG(uint64(seed), uint64(g)))
		vs := &valueSource{off: rng.IntN(1 << 20)}
		wg.Go(func() { largeWorker(e, uint64(cfg.largeKeys), cfg.largeKeysPerCommit, stop, st, rng, vs, fail) })
	}
	for end := time.Now().Add(d); !stop.Load() && time.Now().Before(end); {
		time.Sleep(min(50*time.Millisecond, time.Until(end)))
	}
	stop.Store(true)
	wg.Wait()
	return stats
}

// largeWorker commits transactions that read keys random existing keys (every one must be
// there: a missing one fails the run, which checks the load) and write each back with a
// new value. Conflicts between workers are possible, rare, and counted.
func largeWorker(e engine, n uint64, keys int, stop *atomic.Bool, st *workerStats, rng *rand.Rand, vs *valueSource, fail func(error)) {
	key := make([]byte, 0, largeKeyLen)
	for !stop.Load() {
		start := time.Now()
		tx := e.begin()
		for range keys {
			key = largeKey(key, rng.Uint64N(n))
			v, err := tx.get(key)
			if err == nil && v == nil {
				err = fmt.Errorf("loaded key %x is missing", key)
			}
			if err != nil {
				tx.discard()
				fail(fmt.Errorf("get: %w", err))
				return
			}
			if err := tx.put(key, vs.next(largeValueLen)); err != nil {
				tx.discard()
				fail(fmt.Errorf("put: %w", err))
				return
			}
		}
		submit := time.Now()
		err := tx.commit(true)
		ack := time.Now()
		switch {
		case err == nil:
			st.commits++
			st.commit.add(ack.Sub(submit))
			st.txn.add(ack.Sub(start))
		case errors.Is(err, errConflict):
			st.conflicts++
		default:
			fail(fmt.Errorf("commit: %w", err))
			return
		}
	}
}

// writeLargeTables prints the load table and the run table with bloom on/off ratios.
func writeLargeTables(w io.Writer, cfg *config, loads []*largeLoad, rounds [][]largeResult) {
	fmt.Fprintf(w, "| bloom | keys | SST files | GiB | SST write s | keys/s | MiB/s | CPU s | ingest s per engine (median) |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, l := range loads {
		fmt.Fprintf(w, "| %s | %d | %d | %.2f | %.1f | %s | %.0f | %.1f | %.2f |\n", l.Bloom, l.Keys, l.Files, float64(l.FileBytes)/(1<<30),
			l.WriteSeconds, fmtRate(l.KeysPerS), float64(l.FileBytes)/mib/max(l.WriteSeconds, 1e-9), l.CPUSeconds, median(l.IngestSecs))
	}
	type key struct{ engine, bloom string }
	by := map[key][]largeResult{}
	var order []key
	for _, round := range rounds {
		for _, r := range round {
			k := key{r.Engine, r.Bloom}
			if _, ok := by[k]; !ok {
				order = append(order, k)
			}
			if r.Error == "" {
				by[k] = append(by[k], r)
			}
		}
	}
	slices.SortStableFunc(order, func(a, b key) int {
		ia, ib := slices.Index(cfg.largeEngines, a.engine), slices.Index(cfg.largeEngines, b.engine)
		if ia != ib {
			return ia - ib
		}
		return strings.Compare(b.bloom, a.bloom) // on before off
	})
	med := func(rs []largeResult, f func(largeResult) float64) float64 {
		xs := make([]float64, len(rs))
		for i, r := range rs {
			xs[i] = f(r)
		}
		return median(xs)
	}
	cps := func(r largeResult) float64 { return r.CommitsPerS }
	fmt.Fprintf(w, "\n| engine | bloom | commits/s median [min–max] | × native-occ | commit p50 / p99 | CPU/commit | data-block misses / hits per commit | bloom: checked / useful per commit | KiB read per commit (device) | L0 files at end | errors |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	errs := map[key]int{}
	for _, round := range rounds {
		for _, r := range round {
			if r.Error != "" {
				errs[key{r.Engine, r.Bloom}]++
			}
		}
	}
	for _, k := range order {
		rs := by[k]
		xs := make([]float64, len(rs))
		for i, r := range rs {
			xs[i] = r.CommitsPerS
		}
		lo, hi := minMax(xs)
		ratio := "—"
		if base := by[key{kindNative, k.bloom}]; len(base) > 0 && k.engine != kindNative {
			ratio = fmt.Sprintf("%.2f", med(rs, cps)/med(base, cps))
		} else if k.engine == kindNative {
			ratio = "base"
		}
		fmt.Fprintf(w, "| %s | %s | %s [%s–%s] | %s | %s / %s | %s | %.2f / %.2f | %.2f / %.2f | %.1f (%.1f) | %.0f | %d |\n",
			k.engine, k.bloom, fmtRate(med(rs, cps)), fmtRate(lo), fmtRate(hi), ratio,
			fmtUS(med(rs, func(r largeResult) float64 { return r.CommitLat.P50 })), fmtUS(med(rs, func(r largeResult) float64 { return r.CommitLat.P99 })),
			fmtUS(med(rs, func(r largeResult) float64 { return r.CPUPerCommit })),
			med(rs, func(r largeResult) float64 { return r.DataMissPerC }), med(rs, func(r largeResult) float64 { return r.DataHitPerC }),
			med(rs, func(r largeResult) float64 { return r.BloomCheckedPC }), med(rs, func(r largeResult) float64 { return r.BloomUsefulPC }),
			med(rs, func(r largeResult) float64 { return r.ReadKiBPerC }), med(rs, func(r largeResult) float64 { return r.DeviceKiBPerC }),
			med(rs, func(r largeResult) float64 { return float64(r.L0Files) }), errs[k])
	}
	fmt.Fprintf(w, "\n| engine | commits/s on ÷ off | p99 on ÷ off | CPU/commit on ÷ off | data-block misses on ÷ off | KiB read on ÷ off |\n|---|---|---|---|---|---|\n")
	ratio := func(a, b float64) string {
		if b == 0 {
			return "—"
		}
		return fmt.Sprintf("%.2f", a/b)
	}
	for _, e := range cfg.largeEngines {
		on, off := by[key{e, "on"}], by[key{e, "off"}]
		if len(on) == 0 || len(off) == 0 {
			continue
		}
		m := func(rs []largeResult, f func(largeResult) float64) float64 { return med(rs, f) }
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", e,
			ratio(m(on, cps), m(off, cps)),
			ratio(m(on, func(r largeResult) float64 { return r.CommitLat.P99 }), m(off, func(r largeResult) float64 { return r.CommitLat.P99 })),
			ratio(m(on, func(r largeResult) float64 { return r.CPUPerCommit }), m(off, func(r largeResult) float64 { return r.CPUPerCommit })),
			ratio(m(on, func(r largeResult) float64 { return r.DataMissPerC }), m(off, func(r largeResult) float64 { return r.DataMissPerC })),
			ratio(m(on, func(r largeResult) float64 { return r.ReadKiBPerC }), m(off, func(r largeResult) float64 { return r.ReadKiBPerC })))
	}
	fmt.Fprintf(w, "\n%d keys of %d B values (16-byte keys) bulk-loaded once per bloom setting into SST files (two writers in parallel, rockline's table settings: lz4, zstd at the bottom, which random values do not shrink), as a three-level tree (every 100th key in the top group, every other 10th key in the middle one, the rest at the bottom; ingested bottom first, so the bottom group lands on L6 and the others above it, in L5 or L0), then per engine and round a fresh database holding those files (bottom files hard-linked, the upper 10%% copied, then ingested). Each run (after an unmeasured warm-up of %s): %d workers, each committing one transaction at a time that reads %d random existing keys and writes each back with a new %d B value, for %s; WAL on, no sync. Block cache %d MiB (LRU, shared by the families; index and filter blocks live outside it, in the table readers) against about %.1f GiB of data. Bloom on = %d bits per key (rockline's default), off = none; the native engines get the same block cache, bloom setting and rockline's compression and dynamic level bytes. Data-block misses/hits and bloom checks are RocksDB ticker deltas (rocksdb.block.cache.data.miss/hit, rocksdb.bloom.filter.useful + .full.positive); KiB read = /proc/self/io rchar delta (SST blocks read with pread, page-cache hits included), device = read_bytes (the part the page cache did not hold and the disk served; the machine has 23 GiB of RAM, so most SST reads are page-cache copies, not disk seeks). Medians of %d rounds, engine and bloom order rotated each round.\n",
		cfg.largeKeys, largeValueLen, largeWarmup(cfg), cfg.largeWorkers, cfg.largeKeysPerCommit, largeValueLen, cfg.duration, cfg.largeCacheMiB,
		float64(cfg.largeKeys)*float64(largeKeyLen+largeValueLen)/(1<<30), bloomOnBits, cfg.rounds)
}
