package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/pipeline"
)

// The events scenario: the event store's read side, on rockline alone (no other engine
// has projections). Each variant seeds a fresh database with --event-count events (not
// timed) and times one catch-up over them: a projection folding them into a read model
// (batches of one event and of 256), and a subscription scanning them with a filter
// that matches 1% and with none. Ratios are to the first variant of each pair.

type eventsResult struct {
	Scenario string  `json:"scenario"`
	Variant  string  `json:"variant"`
	Round    int     `json:"round"`
	Events   int     `json:"events"`
	Seconds  float64 `json:"seconds"`
	Rate     float64 `json:"events_per_s"`
	Error    string  `json:"error,omitempty"`
}

// eventsVariants are the variants in report order; pairs share a baseline.
var eventsVariants = []struct{ name, baseline string }{
	{"projection, batch 1", "projection, batch 1"},
	{"projection, batch 256", "projection, batch 1"},
	{"subscription, no filter", "subscription, no filter"},
	{"subscription, 1% match", "subscription, no filter"},
}

func runEvents(cfg *config, progress func(string), emit func(any)) [][]eventsResult {
	out := make([][]eventsResult, len(eventsVariants))
	for r := 1; r <= cfg.rounds; r++ {
		for i, v := range eventsVariants {
			res := runEventsOnce(cfg, v.name, r)
			out[i] = append(out[i], res)
			emit(res)
			msg := fmt.Sprintf("events | %s | round %d/%d | %s events/s", v.name, r, cfg.rounds, fmtRate(res.Rate))
			if res.Error != "" {
				msg += ", ERROR: " + res.Error
			}
			progress(msg)
		}
	}
	return out
}

func runEventsOnce(cfg *config, variant string, round int) eventsResult {
	res := eventsResult{Scenario: "events", Variant: variant, Round: round, Events: cfg.eventCount}
	secs, err := timeEvents(cfg, variant)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	res.Seconds, res.Rate = secs, float64(cfg.eventCount)/secs
	return res
}

func timeEvents(cfg *config, variant string) (float64, error) {
	dir, err := os.MkdirTemp(cfg.dir, "rockline-events-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	db, err := pipeline.Open(dir, pipeline.Config{})
	if err != nil {
		return 0, err
	}
	defer db.Close()
	es, err := eventstore.New(db)
	if err != nil {
		return 0, err
	}
	ctx := context.Background()
	perCommit := 100
	if variant == "projection, batch 1" || variant == "projection, batch 256" {
		perCommit = 1 // a projection's batches close at commit boundaries
	}
	value := make([]byte, 100)
	var last uint64
	for i := 0; i < cfg.eventCount; i += perCommit {
		evs := make([]eventstore.Event, 0, perCommit)
		for j := i; j < min(cfg.eventCount, i+perCommit); j++ {
			typ := "Noise"
			if j%100 == 0 {
				typ = "Wanted"
			}
			evs = append(evs, eventstore.Event{Type: typ, Data: value})
		}
		res, err := es.Append(ctx, fmt.Sprintf("order-%d", (i/perCommit)%64), eventstore.Any, evs...)
		if err != nil {
			return 0, err
		}
		last = res.Position
	}
	switch variant {
	case "projection, batch 1", "projection, batch 256":
		batch := 1
		if variant == "projection, batch 256" {
			batch = 256
		}
		return timeProjection(ctx, db, es, batch, last)
	default:
		f := eventstore.Filter{}
		if variant == "subscription, 1% match" {
			f.TypePrefix = "Wanted"
		}
		return timeSubscription(ctx, es, f, last)
	}
}

// timeProjection times a projection that counts events per stream catching up to last.
func timeProjection(ctx context.Context, db *pipeline.DB, es *eventstore.Store, batch int, last uint64) (float64, error) {
	cf, err := db.EnsureColumnFamily("counts")
	if err != nil {
		return 0, err
	}
	start := time.Now()
	p, err := es.StartProjection(ctx, eventstore.ProjectionConfig{Name: "counts", MaxBatchEvents: batch,
		Handle: func(tx *pipeline.Txn, events []eventstore.RecordedEvent) error {
			for _, e := range events {
				n := uint64(0)
				v, err := tx.Get(cf, []byte(e.Stream))
				if err == nil {
					n = binary.BigEndian.Uint64(v)
				} else if !errors.Is(err, pipeline.ErrNotFound) {
					return err
				}
				if err := tx.Put(cf, []byte(e.Stream), binary.BigEndian.AppendUint64(nil, n+1)); err != nil {
					return err
				}
			}
			return nil
		}})
	if err != nil {
		return 0, err
	}
	err = p.CaughtUp(ctx, last)
	secs := time.Since(start).Seconds()
	return secs, errors.Join(err, p.Close())
}

// timeSubscription times a subscription with filter f scanning the log up to last.
func timeSubscription(ctx context.Context, es *eventstore.Store, f eventstore.Filter, last uint64) (float64, error) {
	start := time.Now()
	sub, err := es.SubscribeToAll(ctx, 0, func(eventstore.RecordedEvent) error { return nil },
		eventstore.SubscribeOptions{Filter: f, CheckpointEvery: 1, Checkpoint: func(pos uint64) error {
			if pos >= last {
				return io.EOF // caught up: end the subscription
			}
			return nil
		}})
	if err != nil {
		return 0, err
	}
	err = sub.Wait()
	secs := time.Since(start).Seconds()
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return secs, err
}

// writeEventsTable prints one row per variant: the median rate with its range and the
// median of the per-round ratios to the variant's baseline.
func writeEventsTable(w io.Writer, runs [][]eventsResult, events int) {
	fmt.Fprintf(w, "| variant | events/s median [min–max] | × base |\n|---|---|---|\n")
	byName := map[string][]eventsResult{}
	for i, v := range eventsVariants {
		byName[v.name] = runs[i]
	}
	for i, v := range eventsVariants {
		var rates, ratios []float64
		for r, res := range runs[i] {
			rates = append(rates, res.Rate)
			if base := byName[v.baseline]; r < len(base) && base[r].Rate > 0 {
				ratios = append(ratios, res.Rate/base[r].Rate)
			}
		}
		ratio := "base"
		if v.baseline != v.name && len(ratios) > 0 {
			ratio = fmt.Sprintf("%.2f", median(ratios))
		}
		lo, hi := minMax(rates)
		fmt.Fprintf(w, "| %s | %s [%s–%s] | %s |\n", v.name, fmtRate(median(rates)), fmtRate(lo), fmtRate(hi), ratio)
	}
	fmt.Fprintf(w, "\nEach run catches up once on %d events of 100 bytes in 64 order streams (projections: one event per commit, as their batches close at commit boundaries; subscriptions: 100 per commit), seeded untimed into a fresh database. The projection counts events per stream in its read model; the 1%% filter matches on event type.\n", events)
}
