package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// TestIndexScenario loads a tiny database and checks every read: no error (the index
// read and the scan agree, which the scenario checks itself), 1% matched, both
// methods each round, the table, and no folder left behind.
func TestIndexScenario(t *testing.T) {
	cfg := smokeConfig(t)
	cfg.indexEvents, cfg.rounds = 3_000, 2
	var rows []indexResult
	got := runIndex(cfg, func(string) {}, func(v any) { rows = append(rows, v.(indexResult)) })
	if len(got) != 4 || len(rows) != 4 {
		t.Fatalf("%d results, %d emitted; want 2 rounds of 2 reads", len(got), len(rows))
	}
	methods := map[string]int{}
	for _, r := range got {
		if r.Error != "" {
			t.Fatalf("%s round %d: %s", r.Method, r.Round, r.Error)
		}
		if r.Matched != cfg.indexEvents/indexRareEvery || r.Events != uint64(cfg.indexEvents) || r.Seconds <= 0 {
			t.Errorf("%s round %d: %d of %d events matched in %.6fs; want %d", r.Method, r.Round, r.Matched, r.Events, r.Seconds, cfg.indexEvents/indexRareEvery)
		}
		methods[r.Method]++
	}
	if methods["index"] != 2 || methods["scan"] != 2 {
		t.Errorf("reads by method: %v", methods)
	}
	var b bytes.Buffer
	writeIndexTable(&b, got)
	if !strings.Contains(b.String(), "| index | 30 |") || !strings.Contains(b.String(), "| scan | 30 |") {
		t.Errorf("table:\n%s", b.String())
	}
	entries, err := os.ReadDir(cfg.dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Errorf("%d entries left in %s", len(entries), cfg.dir)
	}
}
