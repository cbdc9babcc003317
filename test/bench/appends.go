package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The appends scenario: event appends as an event-sourcing user would make them, on
// rockline and on what such a user would pick instead (PostgreSQL with a Message DB
// style schema, NATS JetStream), each doing the same logical work: append K events of
// about 200 bytes to a stream expecting its exact revision; on a mismatch re-read the
// stream's head and try again. Afterwards every stream must be dense, with no
// duplicate and no lost event (the engine's own read-back, checked against what the
// workers were told was appended).
//
// Cells: 1 and 8 workers, K = 1 and 10, 100 streams per worker (no contention), and 8
// workers on 4 shared streams (contention: most appends first see a wrong revision).
// Each at the engine's default durability (no fsync per append: rockline's default,
// PostgreSQL with synchronous_commit=off, JetStream's default sync interval) and with
// an fsync per append (rockline Config.Sync, PostgreSQL synchronous_commit=on,
// JetStream sync always).

// appender is one engine of the appends scenario. Implementations are used from many
// goroutines at once.
//
// A stream's version is the engine's own token for "the stream as last read": its last
// revision for rockline and PostgreSQL, its subject's last sequence for JetStream; -1
// for a stream with no events, on every engine.
type appender interface {
	// appendEvents appends events to stream if its version is expected. It returns the
	// stream's new version, or wrong for a mismatch, with nothing written.
	appendEvents(ctx context.Context, stream string, expected int64, events [][]byte) (next int64, wrong bool, err error)
	// head returns the stream's version.
	head(ctx context.Context, stream string) (int64, error)
	// events returns the stream's events in revision order.
	events(ctx context.Context, stream string) ([][]byte, error)
	// fsyncs returns how many fsyncs the engine has made of its log so far, or -1
	// when it cannot tell.
	fsyncs() int64
	// serverCPU returns the CPU time the engine's server processes have used so far
	// (0 for an engine in the harness's own process, whose CPU cpuTime counts).
	serverCPU() time.Duration
	close() error
}

// appendsEngine opens a fresh engine for one run.
type appendsEngine struct {
	name string
	open func(cfg *config, sync bool) (appender, error)
}

type appendsCell struct {
	workers, k, streams int // streams: per worker, or shared when shared
	shared              bool
	sync                bool
}

func (c appendsCell) label() string {
	streams := fmt.Sprintf("%d streams/worker", c.streams)
	if c.shared {
		streams = fmt.Sprintf("%d shared streams", c.streams)
	}
	dur := "default durability"
	if c.sync {
		dur = "fsync per append"
	}
	return fmt.Sprintf("W=%d K=%d %s, %s", c.workers, c.k, streams, dur)
}

func appendsCells() []appendsCell {
	var cells []appendsCell
	for _, sync := range []bool{false, true} {
		for _, w := range []int{1, 8} {
			for _, k := range []int{1, 10} {
				cells = append(cells, appendsCell{workers: w, k: k, streams: 100, sync: sync})
			}
		}
		cells = append(cells, appendsCell{workers: 8, k: 1, streams: 4, shared: true, sync: sync})
	}
	return cells
}

type appendsResult struct {
	Scenario     string  `json:"scenario"`
	Cell         string  `json:"cell"`
	Engine       string  `json:"engine"`
	Round        int     `json:"round"`
	Appends      int64   `json:"appends"`
	AppendsPerS  float64 `json:"appends_per_s"`
	EventsPerS   float64 `json:"events_per_s"`
	Retries      int64   `json:"wrong_revision_retries"`
	Latency      latency `json:"append_latency"`
	CPUPerAppend float64 `json:"cpu_us_per_append"`
	PerFsync     float64 `json:"appends_per_fsync,omitempty"`
	Ratio        float64 `json:"ratio_to_rockline,omitempty"`
	Error        string  `json:"error,omitempty"`
}

// allAppendsEngines is every engine of the appends scenario, in report order;
// allAppendsKinds their names.
var (
	allAppendsEngines = []appendsEngine{
		{kindRocklineAppends, openRocklineAppender}, {"postgresql", openPGAppender}, {"jetstream", openJSAppender},
		{kindDiskAppends, openDiskAppender}, {kindNullAppends, openNullAppender},
	}
	allAppendsKinds = func() (names []string) {
		for _, e := range allAppendsEngines {
			names = append(names, e.name)
		}
		return names
	}()
)

// appendsEngines are the engines of the appends scenario among names that can run
// here; an engine that cannot (PostgreSQL not installed) is left out with a progress
// line saying why.
func appendsEngines(names []string, progress func(string)) []appendsEngine {
	var engines []appendsEngine
	for _, e := range allAppendsEngines {
		if !slices.Contains(names, e.name) {
			continue
		}
		if e.name == "postgresql" {
			if why := pgAvailable(); why != "" {
				progress("appends: leaving out postgresql: " + why)
				continue
			}
		}
		engines = append(engines, e)
	}
	return engines
}

func runAppends(cfg *config, engines []appendsEngine, progress func(string), emit func(any)) map[string][]appendsResult {
	out := map[string][]appendsResult{} // cell label + engine -> rounds
	for _, cell := range appendsCells() {
		for r := 1; r <= cfg.rounds; r++ {
			var round []appendsResult
			for i := range engines {
				e := engines[(i+r-1)%len(engines)]
				if !anchorRuns(e.name, cell) {
					continue
				}
				res := runAppendsOnce(cfg, e, cell, r)
				round = append(round, res)
				msg := fmt.Sprintf("appends | %s | %s | round %d/%d | %s appends/s, p99 %s, %.1f µs CPU each",
					cell.label(), e.name, r, cfg.rounds, fmtRate(res.AppendsPerS), fmtUS(res.Latency.P99), res.CPUPerAppend)
				if res.PerFsync > 0 {
					msg += fmt.Sprintf(", %.1f appends/fsync", res.PerFsync)
				}
				if res.Error != "" {
					msg += ", ERROR: " + res.Error
				}
				progress(msg)
			}
			var base float64
			for _, res := range round {
				if res.Engine == kindRocklineAppends && res.Error == "" {
					base = res.AppendsPerS
				}
			}
			for _, res := range round {
				if base > 0 {
					res.Ratio = res.AppendsPerS / base
				}
				emit(res)
				out[cell.label()+"|"+res.Engine] = append(out[cell.label()+"|"+res.Engine], res)
			}
		}
	}
	return out
}

const kindRocklineAppends = "rockline"

func runAppendsOnce(cfg *config, e appendsEngine, cell appendsCell, round int) (res appendsResult) {
	res = appendsResult{Scenario: "appends", Cell: cell.label(), Engine: e.name, Round: round}
	eng, err := e.open(cfg, cell.sync)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	defer func() {
		if err := eng.close(); err != nil && res.Error == "" {
			res.Error = err.Error()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), cfg.duration+cfg.runTimeout)
	defer cancel()

	// Every worker's streams, and what it appended to each (for the check).
	streams := make([][]string, cell.workers)
	for w := range streams {
		for s := range cell.streams {
			name := fmt.Sprintf("w%d-s%d", w, s)
			if cell.shared {
				name = fmt.Sprintf("shared-%d", s)
			}
			streams[w] = append(streams[w], name)
		}
	}
	type workerOut struct {
		h        hist
		appends  int64
		retries  int64
		appended map[string][]int // stream -> the seq of each append this worker made, in order
		err      error
	}
	outs := make([]workerOut, cell.workers)
	deadline := time.Now().Add(cfg.duration)
	fsync0 := eng.fsyncs()
	cpu0 := cpuTime() + eng.serverCPU()
	start := time.Now()
	var wg sync.WaitGroup
	for w := range cell.workers {
		wg.Add(1)
		go func() { // ends at the deadline or on the first error
			defer wg.Done()
			o := &outs[w]
			o.appended = map[string][]int{}
			known := map[string]int64{}
			for _, s := range streams[w] {
				known[s] = -1
			}
			rng := rand.New(rand.NewPCG(uint64(w), uint64(round)))
			for seq := 0; time.Now().Before(deadline); seq++ {
				s := streams[w][rng.IntN(len(streams[w]))]
				evs := make([][]byte, cell.k)
				for i := range evs {
					evs[i] = appendsPayload(w, seq, i)
				}
				t0 := time.Now()
				for {
					next, wrong, err := eng.appendEvents(ctx, s, known[s], evs)
					if err != nil {
						o.err = fmt.Errorf("append to %s expecting %d: %w", s, known[s], err)
						return
					}
					if !wrong {
						known[s] = next
						break
					}
					o.retries++
					if known[s], err = eng.head(ctx, s); err != nil {
						o.err = fmt.Errorf("head of %s: %w", s, err)
						return
					}
				}
				o.h.add(time.Since(t0))
				o.appends++
				o.appended[s] = append(o.appended[s], seq)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := cpuTime() + eng.serverCPU() - cpu0
	var h hist
	var errs []error
	for i := range outs {
		h.merge(&outs[i].h)
		res.Appends += outs[i].appends
		res.Retries += outs[i].retries
		errs = append(errs, outs[i].err)
	}
	if err := errors.Join(errs...); err != nil {
		res.Error = err.Error()
		return res
	}
	res.AppendsPerS = float64(res.Appends) / elapsed.Seconds()
	res.EventsPerS = res.AppendsPerS * float64(cell.k)
	res.Latency = h.summary()
	if res.Appends > 0 {
		res.CPUPerAppend = float64(cpu.Microseconds()) / float64(res.Appends)
	}
	if f := eng.fsyncs(); cell.sync && fsync0 >= 0 && f > fsync0 {
		res.PerFsync = float64(res.Appends) / float64(f-fsync0)
	}
	appended := make([]map[string][][]byte, len(outs))
	for w := range outs {
		appended[w] = map[string][][]byte{}
		for s, seqs := range outs[w].appended {
			evs := make([][]byte, 0, len(seqs)*cell.k)
			for _, seq := range seqs {
				for i := range cell.k {
					evs = append(evs, appendsPayload(w, seq, i))
				}
			}
			appended[w][s] = evs
		}
	}
	if err := checkAppended(ctx, eng, streams, appended); err != nil {
		res.Error = err.Error()
	}
	return res
}

// appendsPad is the padding appendsPayload cuts from.
var appendsPad = strings.Repeat("x", 200)

// appendsPayload returns the i-th event of worker w's append number seq: a flat JSON
// object of about 200 bytes, unique per (w, seq, i), so the read-back can tell every
// event apart. Its keys are in jsonb's order (by length, then bytes), so PostgreSQL's
// read-back of its jsonb column, spaces removed, is these bytes again. Workers keep
// only seq, not the bytes, so the harness's own heap and CPU per append stay small
// beside the engines' (the null engine measures what is left).
func appendsPayload(w, seq, i int) []byte {
	const size = 200
	var tail [48]byte
	t := append(tail[:0], `","seq":`...)
	t = strconv.AppendInt(t, int64(seq), 10)
	t = append(t, `,"worker":`...)
	t = strconv.AppendInt(t, int64(w), 10)
	t = append(t, '}')
	b := make([]byte, 0, size+16)
	b = append(b, `{"i":`...)
	b = strconv.AppendInt(b, int64(i), 10)
	b = append(b, `,"pad":"`...)
	b = append(b, appendsPad[:max(0, size-len(b)-len(t))]...)
	return append(b, t...)
}

// checkAppended reads every stream back and checks that it holds exactly the events
// the workers were told were appended: each worker's in its order, interleaved on
// shared streams, none lost, none twice.
func checkAppended(ctx context.Context, eng appender, streams [][]string, perWorker []map[string][][]byte) error {
	all := map[string]bool{}
	for _, ss := range streams {
		for _, s := range ss {
			all[s] = true
		}
	}
	for _, s := range slices.Sorted(maps.Keys(all)) {
		got, err := eng.events(ctx, s)
		if err != nil {
			return fmt.Errorf("read back %s: %w", s, err)
		}
		seen := map[string]int{}
		for i, e := range got {
			if j, dup := seen[string(e)]; dup {
				return fmt.Errorf("stream %s: the event at revision %d repeats revision %d", s, i, j)
			}
			seen[string(e)] = i
		}
		want := 0
		for _, appended := range perWorker {
			last := -1
			for _, e := range appended[s] {
				i, ok := seen[string(e)]
				if !ok {
					return fmt.Errorf("stream %s: an acknowledged event is missing (%d events read)", s, len(got))
				}
				if i <= last {
					return fmt.Errorf("stream %s: a worker's events out of order (revision %d after %d)", s, i, last)
				}
				last = i
				want++
			}
		}
		if want != len(got) {
			return fmt.Errorf("stream %s: %d events read, %d acknowledged", s, len(got), want)
		}
	}
	return nil
}

// writeAppendsTable prints, per cell, each engine's median appends/s with its range,
// the median ratio to rockline in the same round, p50/p99, CPU per append and, with
// fsync, appends per fsync.
func writeAppendsTable(w io.Writer, runs map[string][]appendsResult, engines []appendsEngine) {
	fmt.Fprintf(w, "| cell | engine | appends/s median [min–max] | rockline ÷ engine | p50 | p99 | CPU µs/append | appends/fsync | retries/s |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, cell := range appendsCells() {
		for _, e := range engines {
			rs := runs[cell.label()+"|"+e.name]
			if len(rs) == 0 {
				continue
			}
			var rates, ratios, p50, p99, cpu, perSync, retries []float64
			errs := ""
			for _, r := range rs {
				if r.Error != "" {
					errs = r.Error
					continue
				}
				rates = append(rates, r.AppendsPerS)
				if r.Ratio > 0 {
					ratios = append(ratios, 1/r.Ratio)
				}
				p50, p99, cpu = append(p50, r.Latency.P50), append(p99, r.Latency.P99), append(cpu, r.CPUPerAppend)
				if r.PerFsync > 0 {
					perSync = append(perSync, r.PerFsync)
				}
				retries = append(retries, float64(r.Retries)/(float64(r.Appends)/r.AppendsPerS))
			}
			if len(rates) == 0 {
				fmt.Fprintf(w, "| %s | %s | ERROR: %s | | | | | | |\n", cell.label(), e.name, errs)
				continue
			}
			lo, hi := minMax(rates)
			ratio, sync := "—", "—"
			if e.name != kindRocklineAppends && len(ratios) > 0 {
				ratio = fmt.Sprintf("%.2f", median(ratios))
			}
			if len(perSync) > 0 {
				sync = fmt.Sprintf("%.1f", median(perSync))
			}
			fmt.Fprintf(w, "| %s | %s | %s [%s–%s] | %s | %s | %s | %.1f | %s | %s |\n", cell.label(), e.name,
				fmtRate(median(rates)), fmtRate(lo), fmtRate(hi), ratio, fmtUS(median(p50)), fmtUS(median(p99)), median(cpu), sync, fmtRate(median(retries)))
		}
	}
	fmt.Fprintf(w, "\nEach append carries K events of about 200 bytes and expects the stream's exact revision; a wrong revision re-reads the head and tries again (counted in retries/s; its time is in the append's latency). Every run ends by reading each stream back: dense, no duplicate, every acknowledged event present, each worker's in order. CPU is user+system time per append of the harness process (which holds rockline and the embedded JetStream node) plus, for PostgreSQL, its server processes. Default durability means no fsync per append (rockline's default, PostgreSQL synchronous_commit=off, JetStream's default sync interval); fsync per append means rockline Config.Sync, synchronous_commit=on, JetStream sync always. Every engine shares the machine's cores with the harness.\n")
}
