package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rockline/rockline/jetstream/jstest"
)

// TestJSBare starts one embedded 3-node cluster (sync_interval: always) for both
// checks of the jsbare scenario: that the bare side sends what the engine sends, and
// that every cell runs and gives sane figures.
func TestJSBare(t *testing.T) {
	dir, err := os.MkdirTemp(t.TempDir(), "jsbare-")
	if err != nil {
		t.Fatal(err)
	}
	c, err := jstest.Start(jstest.Options{Dir: filepath.Join(dir, "cluster")})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Shutdown(); err != nil {
			t.Error(err)
		}
	}()
	t.Run("same messages", func(t *testing.T) { testJSBareWire(t, c) })
	t.Run("cells", func(t *testing.T) { testJSBareCells(t, c) })
}

// testJSBareWire captures the second append of one worker on the api side and on
// the bare side (the first creates the stream's subjects on both) and compares them
// message by message: subjects under the prefix, header names and values (batch IDs
// and the catalog record's shard, both random, by their form only), data.
func testJSBareWire(t *testing.T, c *jstest.Cluster) {
	capture := func(side string, run int) []*nats.Msg {
		t.Helper()
		sn, err := c.Connect(0) // worker 0's node: it sees the worker's publishes in order
		if err != nil {
			t.Fatal(err)
		}
		defer sn.Close()
		prefix := partitionConfigs(side, run, 1)[0].Subject
		sub, err := sn.SubscribeSync(prefix + ".>")
		if err != nil {
			t.Fatal(err)
		}
		if err := sn.Flush(); err != nil {
			t.Fatal(err)
		}
		s, err := openJSSide(c, side, run, 1, 1, false)
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := s.close(); err != nil {
				t.Error(err)
			}
		}()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for range 2 {
			if err := s.appenders[0](ctx); err != nil {
				t.Fatalf("%s: %v", side, err)
			}
		}
		var out []*nats.Msg
		for len(out) < 8 {
			m, err := sub.NextMsg(10 * time.Second)
			if err != nil {
				t.Fatalf("%s: %d messages of two appends captured: %v", side, len(out), err)
			}
			m.Subject = strings.TrimPrefix(m.Subject, prefix)
			out = append(out, m)
		}
		return out[4:]
	}
	api, bare := capture(sideAPI, 1001), capture(sideBare, 1002)
	for i := range api {
		a, b := api[i], bare[i]
		if a.Subject != b.Subject {
			t.Errorf("message %d: subject %q, bare %q", i+1, a.Subject, b.Subject)
		}
		if !bytes.Equal(a.Data, b.Data) {
			t.Errorf("message %d (%s): data %q, bare %q", i+1, a.Subject, a.Data, b.Data)
		}
		names := func(h nats.Header) []string {
			var ks []string
			for k := range h {
				ks = append(ks, k)
			}
			slices.Sort(ks)
			return ks
		}
		if an, bn := names(a.Header), names(b.Header); !slices.Equal(an, bn) {
			t.Errorf("message %d (%s): headers %v, bare %v", i+1, a.Subject, an, bn)
			continue
		}
		for k := range a.Header {
			av, bv := a.Header.Get(k), b.Header.Get(k)
			switch k {
			case hdrBatchID, hdrRlTxn, hdrMsgID, hdrRlSum: // random or a checksum: its size
				av, bv = fmt.Sprint(len(av)), fmt.Sprint(len(bv))
			}
			if av != bv {
				t.Errorf("message %d (%s): %s %q, bare %q", i+1, a.Subject, k, a.Header.Get(k), b.Header.Get(k))
			}
		}
	}
}

// testJSBareCells runs the scenario's groups once at a tiny duration: every run
// commits, with sane latencies and CPU, and the ratios and tables come out.
func testJSBareCells(t *testing.T, c *jstest.Cluster) {
	cfg := smokeConfig(t)
	cfg.rounds = 1
	cfg.jsbareSides, cfg.jsbareWorkers, cfg.jsbarePartitions, cfg.jsbareScaleWorkers = slices.Clone(jsbareSides), []int{2}, []int{1, 2}, 2
	rs := runJSBareOn(cfg, c, func(s string) { t.Log(s) }, func(any) {})
	if want := len(cfg.jsbareSides) + 4; len(rs) != want {
		t.Fatalf("%d results, want %d", len(rs), want)
	}
	for _, r := range rs {
		switch {
		case r.Error != "":
			t.Errorf("%s %s: %s", r.Cell, r.Side, r.Error)
		case r.Commits == 0 || r.CommitsPerS <= 0:
			t.Errorf("%s %s: no commits: %+v", r.Cell, r.Side, r)
		case r.Latency.P50 <= 0 || r.Latency.P99 < r.Latency.P50 || r.CPUPerCommit <= 0:
			t.Errorf("%s %s: latency or CPU not sane: %+v", r.Cell, r.Side, r)
		case r.Side != sideBare && r.CostToBare <= 0:
			t.Errorf("%s %s: no ratio to the bare publish: %+v", r.Cell, r.Side, r)
		case r.scaling && r.ToOnePartition <= 0:
			t.Errorf("%s %s: no ratio to one partition: %+v", r.Cell, r.Side, r)
		}
	}
	var b strings.Builder
	writeJSBareTables(&b, cfg, rs)
	for _, row := range []string{"| W=2 | api |", "| W=2 | bare+reads |", "| W=2 | bare+1read |", "| partitions=2, W=2 | bare |"} {
		if !strings.Contains(b.String(), row) {
			t.Errorf("no row %q in the tables:\n%s", row, b.String())
		}
	}
}
