package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/pipeline"
)

// The index scenario: one event store with the type index (eventstore.TypeIndex)
// loaded with cfg.indexEvents events, one in indexRareEvery of type "rare"; then, round
// after round, the rare events read two ways: through the index
// (eventstore.Store.ReadIndex) and by today's scan of the log (Store.ReadAll with a
// type filter). Both reads must return the same events, in the same order.

// indexRareEvery is how many events of the load hold one rare one (1%).
const indexRareEvery = 100

// indexResult is one read of the index scenario: one JSON line.
type indexResult struct {
	Scenario       string  `json:"scenario"`
	Label          string  `json:"label"`
	Method         string  `json:"method"` // "index" or "scan"
	Round          int     `json:"round"`
	Events         uint64  `json:"events"`  // events in the database
	Matched        int     `json:"matched"` // events the read returned
	Seconds        float64 `json:"seconds"`
	EventsPerS     float64 `json:"matched_per_s"`
	CPUSeconds     float64 `json:"cpu_seconds"`
	LoadSeconds    float64 `json:"load_seconds"`
	LoadEventsPerS float64 `json:"load_events_per_s"`
	DiskBytes      int64   `json:"disk_bytes"`
	Error          string  `json:"error,omitempty"`
}

// runIndex loads the database, then runs cfg.rounds rounds of both reads (their order
// alternating), emitting each.
func runIndex(cfg *config, progress func(string), emit func(any)) []indexResult {
	ctx := context.Background()
	base := indexResult{Scenario: "index", Label: fmt.Sprintf("1 in %d of %d events", indexRareEvery, cfg.indexEvents)}
	fail := func(err error) []indexResult {
		r := base
		r.Error = err.Error()
		emit(r)
		return []indexResult{r}
	}
	dir, err := os.MkdirTemp(cfg.dir, "rockline-index-")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(dir)
	db, err := pipeline.Open(filepath.Join(dir, "db"), pipeline.Config{})
	if err != nil {
		return fail(err)
	}
	defer db.Close()
	es, err := eventstore.NewWithConfig(ctx, db, eventstore.Config{Indexes: []eventstore.Index{eventstore.TypeIndex()}})
	if err != nil {
		return fail(err)
	}
	progress(fmt.Sprintf("index | loading %d events, 1 in %d rare, 10 per commit, 8 workers", cfg.indexEvents, indexRareEvery))
	t0 := time.Now()
	if err := loadIndexed(ctx, es, cfg.indexEvents); err != nil {
		return fail(err)
	}
	base.LoadSeconds = time.Since(t0).Seconds()
	base.LoadEventsPerS = float64(cfg.indexEvents) / base.LoadSeconds
	base.Events = uint64(cfg.indexEvents)
	if u, err := diskUsage(dir); err == nil {
		base.DiskBytes = u.allocated
	}
	read := map[string]func() ([]eventstore.RecordedEvent, error){
		"index": func() ([]eventstore.RecordedEvent, error) {
			return es.ReadIndex(ctx, "type", "rare", eventstore.Start, eventstore.ToEnd)
		},
		"scan": func() ([]eventstore.RecordedEvent, error) {
			return es.ReadAll(ctx, eventstore.Start, eventstore.ToEnd, eventstore.Filter{TypePrefix: "rare"})
		},
	}
	var out []indexResult
	for round := 1; round <= cfg.rounds; round++ {
		order := []string{"index", "scan"}
		if round%2 == 0 {
			slices.Reverse(order)
		}
		var got [2][]eventstore.RecordedEvent
		for i, method := range order {
			r := base
			r.Method, r.Round = method, round
			cpu0 := cpuTime()
			start := time.Now()
			evs, err := read[method]()
			r.Seconds = time.Since(start).Seconds()
			r.CPUSeconds = (cpuTime() - cpu0).Seconds()
			r.Matched = len(evs)
			r.EventsPerS = float64(len(evs)) / r.Seconds
			if err != nil {
				r.Error = err.Error()
			}
			got[i] = evs
			if i == 1 && err == nil {
				if e := sameEvents(got[0], got[1]); e != nil {
					r.Error = e.Error()
				}
			}
			emit(r)
			out = append(out, r)
			progress(fmt.Sprintf("index | %s | round %d/%d | %d events in %.3f s", method, round, cfg.rounds, r.Matched, r.Seconds))
		}
	}
	return out
}

// sameEvents checks that two reads returned the same events in the same order.
func sameEvents(a, b []eventstore.RecordedEvent) error {
	if len(a) != len(b) {
		return fmt.Errorf("the index read %d events, the scan another number (%d)", len(a), len(b))
	}
	for i := range a {
		if a[i].Position != b[i].Position || a[i].Index != b[i].Index {
			return fmt.Errorf("event %d: %d/%d against %d/%d", i, a[i].Position, a[i].Index, b[i].Position, b[i].Index)
		}
	}
	return nil
}

// loadIndexed appends n events: 8 workers, 10 events per commit to streams of 100
// events; every indexRareEvery-th event of a worker is "rare".
func loadIndexed(ctx context.Context, es *eventstore.Store, n int) error {
	const workers, batch, perStream = 8, 10, 100
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for w := range workers {
		wg.Go(func() {
			evs := make([]eventstore.Event, batch)
			for {
				c := next.Add(batch) - batch // the first event of this commit
				if c >= int64(n) {
					return
				}
				stream, rev := fmt.Sprintf("load-%d", c/perStream), uint64(c%perStream)
				expected := eventstore.Any // another worker may have the stream's previous commit in flight
				for i := range evs {
					typ := "common"
					if (c+int64(i))%indexRareEvery == 0 {
						typ = "rare"
					}
					evs[i] = scaleEvent(typ, uint64(c/perStream), rev+uint64(i))
				}
				if _, err := es.Append(ctx, stream, expected, evs[:min(batch, n-int(c))]...); err != nil {
					errs[w] = err
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// writeIndexTable prints the medians of each read over the rounds.
func writeIndexTable(w io.Writer, rows []indexResult) {
	by := map[string][]indexResult{}
	var errs []string
	for _, r := range rows {
		by[r.Method] = append(by[r.Method], r)
		if r.Error != "" {
			errs = append(errs, r.Error)
		}
	}
	med := func(m string, f func(indexResult) float64) float64 {
		var xs []float64
		for _, r := range by[m] {
			xs = append(xs, f(r))
		}
		return median(xs)
	}
	if len(rows) == 0 {
		return
	}
	r0 := rows[0]
	fmt.Fprintf(w, "| read | events matched | seconds (median) | matched events/s | CPU s | × scan |\n|---|---|---|---|---|---|\n")
	scan := med("scan", func(r indexResult) float64 { return r.Seconds })
	for _, m := range []string{"index", "scan"} {
		if len(by[m]) == 0 {
			continue
		}
		s := med(m, func(r indexResult) float64 { return r.Seconds })
		fmt.Fprintf(w, "| %s | %d | %.3f | %s | %.3f | %.3f |\n", m, by[m][0].Matched, s,
			fmtRate(med(m, func(r indexResult) float64 { return r.EventsPerS })), med(m, func(r indexResult) float64 { return r.CPUSeconds }), s/scan)
	}
	fmt.Fprintf(w, "\n%d events (1 in %d of type \"rare\") loaded at %s events/s (8 workers, 10 events per commit, the type index on), %.2f GiB on disk; each read returns every rare event (ToEnd), the two checked equal every round. %s\n",
		r0.Events, indexRareEvery, fmtRate(r0.LoadEventsPerS), float64(r0.DiskBytes)/(1<<30), strings.Join(errs, "; "))
}
