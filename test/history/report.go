package history

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Environment knobs of the history tests.
const (
	// EnvSeed replays a run: the generator's and the fault schedule's seed.
	EnvSeed = "ROCKLINE_HISTORY_SEED"
	// EnvRuns is how many times each schedule runs (the long form: make crash).
	EnvRuns = "ROCKLINE_HISTORY_RUNS"
	// EnvDir is where a failing run's history is written (default the system's
	// temporary folder).
	EnvDir = "ROCKLINE_HISTORY_DIR"
)

// Seed returns EnvSeed's value, or a new seed from the clock.
func Seed(t testing.TB) uint64 {
	t.Helper()
	if s := os.Getenv(EnvSeed); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: want an unsigned integer", EnvSeed, s)
		}
		return v
	}
	return uint64(time.Now().UnixNano())
}

// Runs returns EnvRuns's value, or def.
func Runs(t testing.TB, def int) int {
	t.Helper()
	s := os.Getenv(EnvRuns)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive integer", EnvRuns, s)
	}
	return n
}

// maxReported bounds the anomalies and transactions printed in the test log.
const maxReported = 40

// Report fails t when res holds anomalies: it prints the seed, the anomalies, the
// transactions they involve in compact form, and writes the whole history as JSON
// lines to a file it names (in EnvDir or the temporary folder), which is kept.
func Report(t testing.TB, name string, seed uint64, h History, res Result) {
	t.Helper()
	if res.Valid() {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: seed %d (%s=%d replays it): %s\n", name, seed, EnvSeed, seed, res.Summary())
	for i, a := range res.Anomalies {
		if i == maxReported {
			fmt.Fprintf(&b, "  ... %d more anomalies\n", len(res.Anomalies)-i)
			break
		}
		fmt.Fprintf(&b, "  %s\n", a)
	}
	byID := map[int]*Txn{}
	for _, tx := range h {
		byID[tx.ID] = tx
	}
	involved := res.Involved()
	b.WriteString("transactions involved:\n")
	for i, id := range involved {
		if i == maxReported {
			fmt.Fprintf(&b, "  ... %d more\n", len(involved)-i)
			break
		}
		if tx := byID[id]; tx != nil {
			fmt.Fprintf(&b, "  %s\n", tx)
		}
	}
	if path, err := Dump(name, seed, h); err != nil {
		fmt.Fprintf(&b, "writing the history: %v\n", err)
	} else {
		fmt.Fprintf(&b, "history (%d transactions, JSON lines): %s\n", len(h), path)
	}
	t.Error(b.String())
}

// DumpIfFailed is for a defer of a run: when t has failed by then (a run that could not
// finish), it logs the seed and dumps the history recorded so far.
func DumpIfFailed(t testing.TB, name string, seed uint64, r *Recorder) {
	t.Helper()
	if !t.Failed() {
		return
	}
	h := r.History()
	path, err := Dump(name, seed, h)
	if err != nil {
		t.Logf("%s: seed %d; writing the history: %v", name, seed, err)
		return
	}
	t.Logf("%s: seed %d (%s=%d replays it); outcomes %v; history so far (%d transactions, JSON lines): %s", name, seed, EnvSeed, seed, h.Counts(), len(h), path)
}

// Dump writes h as JSON lines to a file named after the test and seed, in EnvDir or
// the temporary folder, and returns its path; the file is kept for a post-mortem.
func Dump(name string, seed uint64, h History) (string, error) {
	dir := os.Getenv(EnvDir)
	if dir == "" {
		dir = os.TempDir()
	}
	safe := strings.NewReplacer("/", "_", " ", "_").Replace(name)
	path := filepath.Join(dir, fmt.Sprintf("rockline-history-%s-%d.jsonl", safe, seed))
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	if err := h.WriteJSONL(f); err != nil {
		f.Close()
		return "", err
	}
	return path, f.Close()
}
