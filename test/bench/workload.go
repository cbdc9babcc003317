package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// scenario is one workload run against several engines, round after round.
type scenario struct {
	ID       string // a..f, tracing
	Label    string // unique, as reported
	Engines  []engineSpec
	Baseline string // engine Name the ratio column divides by
	DBs      int    // databases per engine (workers are spread over them)
	Workers  int
	Keys     int // keys per transaction
	Inflight int // commits in flight per worker (goroutines)
	// SyncWorkers is how many workers commit with CommitInline (rockline only; natives
	// always commit on the caller's goroutine). The rest use Commit (the lanes).
	SyncWorkers int
	HotKeys     int // > 0: the conflicts workload on this many counters
	Open        openOpts
}

func (s scenario) params() map[string]any {
	p := map[string]any{"dbs": s.DBs, "workers": s.Workers, "keys": s.Keys, "inflight": s.Inflight,
		"sync_workers": s.SyncWorkers, "wal": !s.Open.DisableWAL, "sync": s.Open.Sync}
	if s.HotKeys > 0 {
		p["hot_keys"] = s.HotKeys
	}
	return p
}

// runResult is one engine's figures for one round.
type runResult struct {
	Scenario      string         `json:"scenario"`
	Label         string         `json:"label"`
	Engine        string         `json:"engine"`
	Round         int            `json:"round"`
	Params        map[string]any `json:"params"`
	Seconds       float64        `json:"seconds"`
	Commits       uint64         `json:"commits"`
	Conflicts     uint64         `json:"conflicts"`
	CommitsPerS   float64        `json:"commits_per_s"`
	ConflictsPerS float64        `json:"conflicts_per_s"`
	CommitLat     latency        `json:"commit_latency"`
	TxnLat        latency        `json:"txn_latency"`
	CPUPerCommit  float64        `json:"cpu_us_per_commit"`
	// Goroutine scheduling over the run (runtime/metrics /sched/latencies:seconds): how
	// many times per commit a goroutine became runnable and waited for a core, and the
	// p99 of that wait. An engine whose commit parks and wakes goroutines pays the
	// wait in its commit latency; one whose commit is a single cgo call does not.
	SchedWaitsPerCommit float64  `json:"sched_waits_per_commit"`
	SchedWaitP99        float64  `json:"sched_wait_p99_us"`
	Ratio               float64  `json:"ratio_to_baseline"`
	Baseline            string   `json:"baseline"`
	CounterSum          *int64   `json:"counter_sum,omitempty"`  // conflicts workload
	LostUpdates         *int64   `json:"lost_updates,omitempty"` // commits - counter sum
	SpansPerTxn         *float64 `json:"spans_per_commit,omitempty"`
	// CommitsPerFsync is commits over the WAL fsyncs RocksDB made, with Sync (0: not
	// measured, as for Badger, or without Sync).
	CommitsPerFsync float64 `json:"commits_per_fsync,omitempty"`
	Error           string  `json:"error,omitempty"`
}

// valuePool is random bytes that values are cut from at moving offsets, so values are
// not compressible and cost nothing to make.
var valuePool = func() []byte {
	b := make([]byte, 4<<20)
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i+8 <= len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], r.Uint64())
	}
	return b
}()

type valueSource struct{ off int }

func (v *valueSource) next(n int) []byte {
	v.off += 97
	if v.off+n > len(valuePool) {
		v.off %= 4093
	}
	return valuePool[v.off : v.off+n : v.off+n]
}

// workerStats are one goroutine's counters.
type workerStats struct {
	commits, conflicts uint64
	commit, txn        hist
}

// runScenarioOnce opens the engine's databases, runs the workload for d, checks, and
// closes everything.
func runScenarioOnce(cfg *config, sc scenario, spec engineSpec, round int) runResult {
	res := runResult{Scenario: sc.ID, Label: sc.Label, Engine: spec.Name, Round: round, Params: sc.params(), Baseline: sc.Baseline}
	dir, err := os.MkdirTemp(cfg.dir, "rockline-bench-")
	if err != nil {
		res.Error = err.Error()
		return res
	}
	defer os.RemoveAll(dir)
	dog := watchdog(fmt.Sprintf("%s %s round %d", sc.Label, spec.Name, round), cfg.duration+cfg.runTimeout)
	defer dog.Stop()

	engines := make([]engine, 0, sc.DBs)
	closeAll := func() {
		for _, e := range engines {
			if err := e.close(); err != nil && res.Error == "" {
				res.Error = "close: " + err.Error()
			}
		}
		engines = nil
	}
	defer closeAll()
	for i := range sc.DBs {
		e, err := openEngine(spec, filepath.Join(dir, fmt.Sprint(i)), sc.Open)
		if err != nil {
			res.Error = "open: " + err.Error()
			return res
		}
		engines = append(engines, e)
	}

	var stop atomic.Bool
	var firstErr error
	var errOnce sync.Once
	fail := func(err error) {
		errOnce.Do(func() { firstErr = err })
		stop.Store(true)
	}
	walSyncs := func() uint64 {
		var n uint64
		for _, e := range engines {
			if s, err := e.stats(); err == nil {
				n += s.WALSyncs
			}
		}
		return n
	}
	syncs0 := walSyncs()
	goroutines := sc.Workers * sc.Inflight
	stats := make([]*workerStats, goroutines)
	runtime.GC()
	var wg sync.WaitGroup
	sched0 := schedWaits()
	cpu0, t0 := cpuTime(), time.Now()
	for g := range goroutines {
		w := g / sc.Inflight
		st := &workerStats{}
		stats[g] = st
		eng := engines[w%len(engines)]
		async := w >= sc.SyncWorkers
		rng := rand.New(rand.NewPCG(uint64(round), uint64(g)))
		vs := &valueSource{off: rng.IntN(1 << 20)}
		wg.Go(func() {
			if sc.HotKeys > 0 {
				counterWorker(eng, sc.HotKeys, async, &stop, st, rng, vs, fail)
			} else {
				keysWorker(eng, uint64(g), sc.Keys, max(cfg.keyspace, sc.Keys), async, &stop, st, vs, fail)
			}
		})
	}
	for end := t0.Add(cfg.duration); !stop.Load() && time.Now().Before(end); {
		time.Sleep(min(50*time.Millisecond, time.Until(end)))
	}
	stop.Store(true)
	wg.Wait()
	elapsed, cpu := time.Since(t0), cpuTime()-cpu0
	syncs := walSyncs() - syncs0
	waits, waitP99 := schedWaitsSince(sched0, 0.99)

	var commit, whole hist
	for _, st := range stats {
		res.Commits += st.commits
		res.Conflicts += st.conflicts
		commit.merge(&st.commit)
		whole.merge(&st.txn)
	}
	res.Seconds = elapsed.Seconds()
	res.CommitsPerS = float64(res.Commits) / res.Seconds
	res.ConflictsPerS = float64(res.Conflicts) / res.Seconds
	res.CommitLat, res.TxnLat = commit.summary(), whole.summary()
	if res.Commits > 0 {
		res.SchedWaitsPerCommit = float64(waits) / float64(res.Commits)
		res.SchedWaitP99 = waitP99 * 1e6
	}
	if sc.Open.Sync && syncs > 0 {
		res.CommitsPerFsync = float64(res.Commits) / float64(syncs)
	}
	if res.Commits > 0 {
		res.CPUPerCommit = float64(cpu.Microseconds()) / float64(res.Commits)
	}
	if firstErr != nil {
		res.Error = firstErr.Error()
	}
	if sc.HotKeys > 0 {
		sum, err := counterSum(engines[0], sc.HotKeys)
		if err != nil {
			res.Error = errors.Join(firstErr, err).Error()
		} else {
			lost := int64(res.Commits) - sum
			res.CounterSum, res.LostUpdates = &sum, &lost
		}
	}
	first := engines[0]
	closeAll() // flushes the batch span processor, so spans are counted after it
	if n := first.spansExported(); n >= 0 && res.Commits > 0 {
		v := float64(n) / float64(res.Commits)
		res.SpansPerTxn = &v
	}
	return res
}

// keysWorker commits transactions that read then write keys of the goroutine's own
// key space (disjoint from every other goroutine's), cycling through it.
func keysWorker(e engine, id uint64, keys, space int, async bool, stop *atomic.Bool, st *workerStats, vs *valueSource, fail func(error)) {
	key := make([]byte, 16)
	binary.BigEndian.PutUint64(key, id)
	next := 0
	for !stop.Load() {
		start := time.Now()
		tx := e.begin()
		for range keys {
			binary.BigEndian.PutUint64(key[8:], uint64(next))
			next = (next + 1) % space
			if _, err := tx.get(key); err != nil {
				tx.discard()
				fail(fmt.Errorf("get: %w", err))
				return
			}
			if err := tx.put(key, vs.next(100)); err != nil {
				tx.discard()
				fail(fmt.Errorf("put: %w", err))
				return
			}
		}
		submit := time.Now()
		err := tx.commit(async)
		ack := time.Now()
		switch {
		case err == nil:
			st.commits++
			st.commit.add(ack.Sub(submit))
			st.txn.add(ack.Sub(start))
		case errors.Is(err, errConflict):
			st.conflicts++ // disjoint keys: should not happen; reported if it does
		default:
			fail(fmt.Errorf("commit: %w", err))
			return
		}
	}
}

func counterKey(i int) []byte { return fmt.Appendf(nil, "counter/%02d", i) }

// counterWorker increments a random hot counter per transaction (read, add one,
// write), retrying on conflict until it commits or the run stops. Its transaction
// latency runs from the first attempt's begin to the successful acknowledgement.
func counterWorker(e engine, hot int, async bool, stop *atomic.Bool, st *workerStats, rng *rand.Rand, vs *valueSource, fail func(error)) {
	val := make([]byte, 100)
	for !stop.Load() {
		start := time.Now()
		for {
			key := counterKey(rng.IntN(hot))
			tx := e.begin()
			v, err := tx.get(key)
			if err != nil {
				tx.discard()
				fail(fmt.Errorf("get: %w", err))
				return
			}
			var n uint64
			if len(v) >= 8 {
				n = binary.BigEndian.Uint64(v)
			}
			copy(val[8:], vs.next(92))
			binary.BigEndian.PutUint64(val, n+1)
			if err := tx.put(key, val); err != nil {
				tx.discard()
				fail(fmt.Errorf("put: %w", err))
				return
			}
			submit := time.Now()
			err = tx.commit(async)
			ack := time.Now()
			if err == nil {
				st.commits++
				st.commit.add(ack.Sub(submit))
				st.txn.add(ack.Sub(start))
				break
			}
			if !errors.Is(err, errConflict) {
				fail(fmt.Errorf("commit: %w", err))
				return
			}
			st.conflicts++
			if stop.Load() {
				return
			}
		}
	}
}

// counterSum reads every hot counter in a fresh transaction.
func counterSum(e engine, hot int) (int64, error) {
	tx := e.begin()
	defer tx.discard()
	var sum int64
	for i := range hot {
		v, err := tx.get(counterKey(i))
		if err != nil {
			return 0, err
		}
		if len(v) >= 8 {
			sum += int64(binary.BigEndian.Uint64(v))
		}
	}
	return sum, nil
}

// watchdog ends the process if one run overruns its bound (a hung commit).
func watchdog(what string, bound time.Duration) *time.Timer {
	return time.AfterFunc(bound, func() {
		fmt.Fprintf(os.Stderr, "bench: %s did not finish within %s; giving up\n", what, bound)
		os.Exit(3)
	})
}
