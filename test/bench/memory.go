package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
)

// memResult is what opening cfg.memDBs empty databases of one engine variant costs.
type memResult struct {
	Scenario    string  `json:"scenario"`
	Engine      string  `json:"engine"`
	Buckets     int     `json:"buckets,omitempty"`
	DBs         int     `json:"dbs"`
	AnonPerDB   float64 `json:"anon_mib_per_db"`    // resident anonymous memory growth
	HeapPerDB   float64 `json:"go_heap_mib_per_db"` // Go heap growth (HeapAlloc after GC)
	PoolPerDB   float64 `json:"bucket_pool_mib_per_db"`
	AnonTotal   float64 `json:"anon_mib_total"`
	HeapTotal   float64 `json:"go_heap_mib_total"`
	Error       string  `json:"error,omitempty"`
	Measurement string  `json:"measurement"`
}

const mib = 1 << 20

// anonymousBytes reads "Anonymous:" from /proc/self/smaps_rollup (Linux).
func anonymousBytes() (int64, error) {
	f, err := os.Open("/proc/self/smaps_rollup")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "Anonymous:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no Anonymous: line in /proc/self/smaps_rollup")
}

// settled measures after a GC that hands free pages back to the OS.
func settled() (anon, heap int64, err error) {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	anon, err = anonymousBytes()
	return anon, int64(ms.HeapAlloc), err
}

// memoryVariants are the engine variants whose open cost is measured.
func memoryVariants(cfg *config) []engineSpec {
	var out []engineSpec
	for _, k := range cfg.engines {
		if k == kindParallel {
			for _, b := range cfg.memBuckets {
				out = append(out, engineSpec{Name: fmt.Sprintf("%s/b%d", k, b), Kind: k, Buckets: b})
			}
			continue
		}
		out = append(out, engineSpec{Name: k, Kind: k})
	}
	return out
}

// runMemory measures every variant in a fresh child process of this binary, so no
// variant reuses memory another one freed.
func runMemory(cfg *config, progress func(string)) []memResult {
	self, err := os.Executable()
	var out []memResult
	for _, v := range memoryVariants(cfg) {
		r := memResult{Scenario: "memory", Engine: v.Name, Buckets: v.Buckets, DBs: cfg.memDBs}
		if err != nil {
			r.Error = err.Error()
			out = append(out, r)
			continue
		}
		cmd := exec.Command(self, "--memory-child", fmt.Sprintf("%s:%d", v.Kind, v.Buckets),
			"--mem-dbs", fmt.Sprint(cfg.memDBs), "--dir", cfg.dir)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		dog := watchdog("memory "+v.Name, 2*time.Minute)
		runErr := cmd.Run()
		dog.Stop()
		if runErr != nil {
			r.Error = fmt.Sprintf("%v: %s", runErr, strings.TrimSpace(stderr.String()))
		} else if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &r); err != nil {
			r.Error = fmt.Sprintf("child output %q: %v", stdout.String(), err)
		}
		r.Engine = v.Name
		out = append(out, r)
		progress(fmt.Sprintf("memory | %s | anon %.2f MiB/db, go heap %.2f MiB/db", v.Name, r.AnonPerDB, r.HeapPerDB))
	}
	return out
}

// memoryChild runs in the child process: warm up, open n empty databases, measure.
func memoryChild(cfg *config, arg string) int {
	kind, b, _ := strings.Cut(arg, ":")
	buckets, _ := strconv.Atoi(b)
	spec := engineSpec{Name: kind, Kind: kind, Buckets: buckets}
	r := memResult{Scenario: "memory", Engine: kind, Buckets: buckets, DBs: cfg.memDBs,
		Measurement: "growth of /proc/self/smaps_rollup Anonymous and Go HeapAlloc (after GC) for opening the databases, in a fresh process after 2 warm-up opens"}
	err := func() error {
		dir, err := os.MkdirTemp(cfg.dir, "rockline-mem-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		var open []engine
		defer func() {
			for _, e := range open {
				e.close()
			}
		}()
		// Warm-up: the first opens pay one-time costs (thread pools, static tables, malloc
		// arenas); they stay open so the measured opens cannot reuse what they free.
		for i := range 2 {
			e, err := openEngine(spec, filepath.Join(dir, fmt.Sprint("warm", i)), openOpts{})
			if err != nil {
				return err
			}
			open = append(open, e)
		}
		time.Sleep(200 * time.Millisecond)
		a0, h0, err := settled()
		if err != nil {
			return err
		}
		pool := 0
		for i := range cfg.memDBs {
			e, err := openEngine(spec, filepath.Join(dir, fmt.Sprint(i)), openOpts{})
			if err != nil {
				return err
			}
			open = append(open, e)
			if re, ok := e.(*rocklineEngine); ok {
				pool += re.bucketBytes()
			}
		}
		time.Sleep(200 * time.Millisecond) // let background threads settle
		a1, h1, err := settled()
		if err != nil {
			return err
		}
		n := float64(cfg.memDBs)
		r.AnonTotal, r.HeapTotal = float64(a1-a0)/mib, float64(h1-h0)/mib
		r.AnonPerDB, r.HeapPerDB, r.PoolPerDB = r.AnonTotal/n, r.HeapTotal/n, float64(pool)/n/mib
		return nil
	}()
	if err != nil {
		r.Error = err.Error()
	}
	json.NewEncoder(os.Stdout).Encode(r) // errors travel in the result
	return 0
}
