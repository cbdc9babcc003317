package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rockline/rockline/eventstore"
)

// scaleAppendStats are one append worker's counters.
type scaleAppendStats struct {
	appends              uint64
	all, existing, fresh hist
}

// measureAppends runs cfg.scaleWorkers workers for cfg.scaleDuration, each appending
// one event at a time, by turns to one of its loaded streams at random (expecting
// the stream's exact revision) and to a stream of its own it creates (expecting no
// stream), and fills r's append figures, CPU time and bytes read per append among
// them (the whole process's, RocksDB's flushes and compactions included: on a shared
// machine steadier figures than latency, which waits for the CPU as much as for the
// database).
func (s *scaleDB) measureAppends(cfg *config, r *scaleResult) error {
	workers := cfg.scaleWorkers
	stats := make([]*scaleAppendStats, workers)
	errs := make([]error, workers)
	var stop atomic.Bool
	var wg sync.WaitGroup
	io0, err := readIO()
	if err != nil {
		return err
	}
	cpu0, t0 := cpuTime(), time.Now()
	timer := time.AfterFunc(cfg.scaleDuration, func() { stop.Store(true) })
	defer timer.Stop()
	for w := range workers {
		st := &scaleAppendStats{}
		stats[w] = st
		rng := rand.New(rand.NewPCG(s.events, uint64(w)))
		wg.Go(func() { errs[w] = s.appendWorker(w, workers, rng, st, &stop) })
	}
	wg.Wait()
	cpu := cpuTime() - cpu0
	r.Seconds = time.Since(t0).Seconds()
	io1, err := readIO()
	if err != nil {
		return err
	}
	var all, existing, fresh hist
	for _, st := range stats {
		r.Appends += st.appends
		all.merge(&st.all)
		existing.merge(&st.existing)
		fresh.merge(&st.fresh)
	}
	s.events += r.Appends
	r.AppendsPerS = ratioOf(float64(r.Appends), r.Seconds)
	r.AppendCPU = ratioOf(float64(cpu.Microseconds()), float64(r.Appends))
	r.AppendReadKiB, r.AppendDeviceKiB = io1.perCall(io0, r.Appends)
	r.AppendLat, r.AppendExisting, r.AppendNew = all.summary(), existing.summary(), fresh.summary()
	return errors.Join(errs...)
}

// appendWorker is worker w of measureAppends. Worker w appends only to the loaded
// streams i with i % workers == w and to the streams it creates, so it knows every
// revision it expects, and records what it added in s.extras[w] and s.created[w].
func (s *scaleDB) appendWorker(w, workers int, rng *rand.Rand, st *scaleAppendStats, stop *atomic.Bool) error {
	ctx := context.Background()
	own := 0 // loaded streams of this worker
	if s.streams > w {
		own = (s.streams - w + workers - 1) / workers
	}
	for turn := 0; !stop.Load(); turn++ {
		var key, rev uint64
		expected, h := eventstore.NoStream, &st.fresh
		if turn%2 == 0 && own > 0 {
			i := w + workers*rng.IntN(own)
			key, rev = uint64(i), scaleStreamEvents+s.extras[w][i]
			expected, h = eventstore.Revision(rev-1), &st.existing
		} else {
			key = scaleNewKey(w, s.created[w])
		}
		stream := scaleStream(key)
		start := time.Now()
		res, err := s.es.Append(ctx, stream, expected, scaleEvent("Appended", key, rev))
		d := time.Since(start)
		if err == nil && res.NextExpectedRevision != rev {
			err = fmt.Errorf("next expected revision %d, want %d", res.NextExpectedRevision, rev)
		}
		if err != nil {
			stop.Store(true)
			return fmt.Errorf("stream %s revision %d: %w", stream, rev, err)
		}
		st.appends++
		st.all.add(d)
		h.add(d)
		if rev > 0 {
			s.extras[w][int(key)]++
		} else {
			s.created[w]++
		}
	}
	return nil
}

// scaleReadStats are one read worker's counters.
type scaleReadStats struct {
	reads, events uint64
	lat           hist
}

// measureReads runs cfg.scaleWorkers workers for cfg.scaleDuration, each reading whole
// loaded streams chosen at random, and checks every read: the stream's events, every
// one of them, in revision order, with the IDs the load and the appends gave them.
// CPU time and bytes read per read are the whole process's, as for appends.
func (s *scaleDB) measureReads(ctx context.Context, cfg *config, r *scaleResult) error {
	if s.streams == 0 {
		return errors.New("no stream loaded")
	}
	workers := cfg.scaleWorkers
	stats := make([]*scaleReadStats, workers)
	errs := make([]error, workers)
	var stop atomic.Bool
	var wg sync.WaitGroup
	io0, err := readIO()
	if err != nil {
		return err
	}
	cpu0, t0 := cpuTime(), time.Now()
	timer := time.AfterFunc(cfg.scaleDuration, func() { stop.Store(true) })
	defer timer.Stop()
	for w := range workers {
		st := &scaleReadStats{}
		stats[w] = st
		rng := rand.New(rand.NewPCG(s.events, uint64(workers+w)))
		wg.Go(func() {
			for !stop.Load() {
				if errs[w] = s.readOne(ctx, rng.IntN(s.streams), workers, st); errs[w] != nil {
					stop.Store(true)
					return
				}
			}
		})
	}
	wg.Wait()
	secs, cpu := time.Since(t0).Seconds(), cpuTime()-cpu0
	io1, err := readIO()
	if err != nil {
		return err
	}
	var lat hist
	var events uint64
	for _, st := range stats {
		r.Reads += st.reads
		events += st.events
		lat.merge(&st.lat)
	}
	r.ReadsPerS = ratioOf(float64(r.Reads), secs)
	r.ReadEvents = ratioOf(float64(events), float64(r.Reads))
	r.ReadCPU = ratioOf(float64(cpu.Microseconds()), float64(r.Reads))
	r.ReadReadKiB, r.ReadDeviceKiB = io1.perCall(io0, r.Reads)
	r.ReadLat = lat.summary()
	return errors.Join(errs...)
}

// readOne reads loaded stream i whole and checks it. It reads s.extras, which only
// measureAppends writes, before this phase.
func (s *scaleDB) readOne(ctx context.Context, i, workers int, st *scaleReadStats) error {
	stream := scaleStream(uint64(i))
	start := time.Now()
	evs, err := s.es.ReadStream(ctx, stream, 0, eventstore.ToEnd)
	d := time.Since(start)
	if err != nil {
		return fmt.Errorf("stream %s: %w", stream, err)
	}
	if want := scaleStreamEvents + s.extras[i%workers][i]; uint64(len(evs)) != want {
		return fmt.Errorf("stream %s: %d events, want %d", stream, len(evs), want)
	}
	for j, e := range evs {
		if e.Stream != stream || e.Revision != uint64(j) || e.ID != scaleEventID(uint64(i), uint64(j)) {
			return fmt.Errorf("stream %s: event %d is revision %d of %q with ID %s, want ID %s",
				stream, j, e.Revision, e.Stream, e.ID, scaleEventID(uint64(i), uint64(j)))
		}
	}
	st.reads++
	st.events += uint64(len(evs))
	st.lat.add(d)
	return nil
}
