package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rockline/rockline/storage"
)

// memtableResult is one paced run with one memtable configuration of the data family.
type memtableResult struct {
	Scenario        string  `json:"scenario"`
	Engine          string  `json:"engine"`
	WriteBufferMiB  float64 `json:"write_buffer_mib"`
	WriteBuffers    int     `json:"max_write_buffer_number"`
	TargetRate      int     `json:"target_commits_per_s"`
	KeysPerCommit   int     `json:"keys_per_commit"`
	ValueBytes      int     `json:"value_bytes"`
	Seconds         float64 `json:"seconds"`
	Commits         uint64  `json:"commits"`
	CommitsPerS     float64 `json:"commits_per_s"`
	Behind          int64   `json:"behind_schedule"` // commits due but never started
	Conflicts       uint64  `json:"conflicts"`
	DeviceWriteMiB  float64 `json:"device_write_mib"` // /proc/self/io write_bytes delta
	FlushedMiB      float64 `json:"flushed_mib"`
	CompactedMiB    float64 `json:"compacted_mib"`
	StallMillis     float64 `json:"stall_ms"`
	PeakImmData     uint64  `json:"peak_immutable_data"`
	PeakImmAll      uint64  `json:"peak_immutable_all_families"`
	CommitLat       latency `json:"commit_latency"`
	Error           string  `json:"error,omitempty"`
	WALEnabled      bool    `json:"wal"`
	StatsPollMillis int     `json:"stats_poll_ms"`
}

// deviceWriteBytes is /proc/self/io write_bytes: bytes this process caused to be
// sent to the storage layer (every thread, RocksDB's flushes and compactions included).
func deviceWriteBytes() (uint64, error) {
	f, err := os.Open("/proc/self/io")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "write_bytes:"); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, errors.New("no write_bytes in /proc/self/io")
}

func runMemtableSweep(cfg *config, progress func(string), emit func(any)) []memtableResult {
	var out []memtableResult
	for _, kind := range cfg.memtableEngines {
		for _, size := range cfg.memtableSizes {
			for _, count := range cfg.memtableCounts {
				wb := int64(size) * mib / int64(cfg.memtableScale)
				r := runMemtable(cfg, engineSpec{Name: kind, Kind: kind}, wb, count)
				out = append(out, r)
				emit(r)
				progress(fmt.Sprintf("memtable | %s | %g MiB x %d | %.0f commits/s, stall %.0f ms, peak imm %d",
					kind, r.WriteBufferMiB, count, r.CommitsPerS, r.StallMillis, r.PeakImmData))
			}
		}
	}
	return out
}

const memtableKeys, memtableValue = 16, 1024

func runMemtable(cfg *config, spec engineSpec, writeBuffer int64, count int) (res memtableResult) {
	res = memtableResult{Scenario: "memtable", Engine: spec.Name, WriteBufferMiB: float64(writeBuffer) / mib, WriteBuffers: count,
		TargetRate: cfg.rate, KeysPerCommit: memtableKeys, ValueBytes: memtableValue, WALEnabled: true, StatsPollMillis: 50}
	dir, err := os.MkdirTemp(cfg.dir, "rockline-memtable-")
	if err != nil {
		res.Error = err.Error()
		return res
	}
	defer os.RemoveAll(dir)
	dog := watchdog(fmt.Sprintf("memtable %s %d MiB x %d", spec.Name, writeBuffer/mib, count), cfg.memtableDuration+cfg.runTimeout)
	defer dog.Stop()
	eng, err := openEngine(spec, filepath.Join(dir, "db"), openOpts{Data: storage.FamilyOptions{WriteBufferSize: writeBuffer, MaxWriteBufferNumber: count}})
	if err != nil {
		res.Error = "open: " + err.Error()
		return res
	}
	defer func() {
		if err := eng.close(); err != nil && res.Error == "" {
			res.Error = "close: " + err.Error()
		}
	}()

	s0, err := eng.stats()
	if err != nil {
		res.Error = err.Error()
		return res
	}
	io0, ioErr := deviceWriteBytes()

	var stop atomic.Bool
	var firstErr error
	var errOnce sync.Once
	fail := func(err error) { errOnce.Do(func() { firstErr = err }); stop.Store(true) }

	// Stats poller: peak immutable memtables.
	var peakData, peakAll atomic.Uint64
	pollDone := make(chan struct{})
	go func() {
		defer close(pollDone)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for !stop.Load() {
			<-t.C
			if s, err := eng.stats(); err == nil {
				peakData.Store(max(peakData.Load(), s.ImmutableData))
				peakAll.Store(max(peakAll.Load(), s.ImmutableAll))
			}
		}
	}()

	// Pacer: one token per commit at the target rate; when every worker is busy and the
	// buffer full, the schedule slips and the shortfall is reported as behind.
	tokens := make(chan struct{}, cfg.memtableWorkers)
	start := time.Now()
	var issued int64
	go func() {
		defer close(tokens)
		interval := time.Second / time.Duration(cfg.rate)
		end := start.Add(cfg.memtableDuration)
		for !stop.Load() {
			now := time.Now()
			if !now.Before(end) {
				due := int64(end.Sub(start) / interval)
				res.Behind = max(0, due-issued)
				return
			}
			due := int64(now.Sub(start)/interval) + 1
		send:
			for issued < due {
				select {
				case tokens <- struct{}{}:
					issued++
				default:
					break send // every worker busy: the schedule slips
				}
			}
			time.Sleep(time.Millisecond)
		}
	}()

	stats := make([]*workerStats, cfg.memtableWorkers)
	var wg sync.WaitGroup
	for w := range cfg.memtableWorkers {
		st := &workerStats{}
		stats[w] = st
		rng := rand.New(rand.NewPCG(7, uint64(w)))
		vs := &valueSource{off: rng.IntN(1 << 20)}
		wg.Go(func() {
			key := make([]byte, 16)
			key[0] = 'm'
			for range tokens {
				if stop.Load() {
					continue
				}
				tx := eng.begin()
				for range memtableKeys {
					binary.BigEndian.PutUint64(key[8:], uint64(rng.IntN(cfg.memtableKeyspace)))
					if err := tx.put(key, vs.next(memtableValue)); err != nil {
						tx.discard()
						fail(err)
						return
					}
				}
				submit := time.Now()
				err := tx.commit(true)
				switch {
				case err == nil:
					st.commits++
					st.commit.add(time.Since(submit))
				case errors.Is(err, errConflict):
					st.conflicts++
				default:
					fail(err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	stop.Store(true)
	<-pollDone

	var commit hist
	for _, st := range stats {
		res.Commits += st.commits
		res.Conflicts += st.conflicts
		commit.merge(&st.commit)
	}
	res.Seconds = elapsed.Seconds()
	res.CommitsPerS = float64(res.Commits) / res.Seconds
	res.CommitLat = commit.summary()
	if s1, err := eng.stats(); err == nil {
		res.FlushedMiB = float64(s1.BytesFlushed-s0.BytesFlushed) / mib
		res.CompactedMiB = float64(s1.BytesCompacted-s0.BytesCompacted) / mib
		res.StallMillis = float64(s1.StallMicros-s0.StallMicros) / 1000
		peakData.Store(max(peakData.Load(), s1.ImmutableData))
		peakAll.Store(max(peakAll.Load(), s1.ImmutableAll))
	}
	res.PeakImmData, res.PeakImmAll = peakData.Load(), peakAll.Load()
	if io1, err := deviceWriteBytes(); err == nil && ioErr == nil {
		res.DeviceWriteMiB = float64(io1-io0) / mib
	}
	if firstErr != nil {
		res.Error = firstErr.Error()
	}
	return res
}
