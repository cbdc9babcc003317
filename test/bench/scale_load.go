package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rockline/rockline/eventstore"
)

// scaleProgressEvery is how often a growth prints how far it has got.
const scaleProgressEvery = 15 * time.Second

// grow appends new streams of scaleStreamEvents events each until the database holds
// at least size events. cfg.scaleLoadWorkers workers share the streams (worker w the
// streams i with i % workers == w) and go round by round: every stream's first
// cfg.scaleLoadBatch events, then every stream's next ones, so a stream's commits are
// spread over the part of the log this growth writes. Each append states the exact
// revision it expects, as an application's would, and checks the one it gets. Before
// each progress line it passes the planned cost of the events appended since the last
// one to advance.
func (s *scaleDB) grow(ctx context.Context, cfg *config, size int, progress func(string), advance func(time.Duration)) error {
	if uint64(size) <= s.events {
		return nil
	}
	from := s.streams
	to := from + int((uint64(size)-s.events+scaleStreamEvents-1)/scaleStreamEvents)
	total := uint64(to-from) * scaleStreamEvents
	progress(fmt.Sprintf("scale | growing to %d events: %d streams of %d events, %d events per commit, %d workers",
		size, to-from, scaleStreamEvents, cfg.scaleLoadBatch, cfg.scaleLoadWorkers))
	var loaded atomic.Uint64
	var stop atomic.Bool
	errs := make([]error, cfg.scaleLoadWorkers)
	var wg sync.WaitGroup
	for w := range cfg.scaleLoadWorkers {
		wg.Go(func() {
			errs[w] = loadStreams(ctx, s.es, from+w, to, cfg.scaleLoadWorkers, cfg.scaleLoadBatch, &loaded, &stop)
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	tick := time.NewTicker(scaleProgressEvery)
	defer tick.Stop()
	t0 := time.Now()
	var reported uint64
	for waiting := true; waiting; {
		select {
		case <-done:
			waiting = false
		case <-tick.C:
			n := loaded.Load()
			advance(time.Duration(n-reported) * scaleLoadCost)
			reported = n
			progress(fmt.Sprintf("scale | growing to %d events: %d of %d appended (%.0f%%), %s events/s",
				size, n, total, 100*float64(n)/float64(total), fmtRate(float64(n)/time.Since(t0).Seconds())))
		}
	}
	s.events += loaded.Load()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	s.streams = to
	return nil
}

// loadStreams appends the events of streams first, first+step, ... below end, batch
// events per commit, round after round; it stops early when another worker failed.
func loadStreams(ctx context.Context, es *eventstore.Store, first, end, step, batch int, loaded *atomic.Uint64, stop *atomic.Bool) error {
	evs := make([]eventstore.Event, 0, batch)
	for rev := 0; rev < scaleStreamEvents; rev += batch {
		n := min(batch, scaleStreamEvents-rev)
		expected := eventstore.NoStream
		if rev > 0 {
			expected = eventstore.Revision(uint64(rev - 1))
		}
		for i := first; i < end; i += step {
			if stop.Load() {
				return nil
			}
			evs = evs[:0]
			for j := range n {
				evs = append(evs, scaleEvent("Loaded", uint64(i), uint64(rev+j)))
			}
			res, err := es.Append(ctx, scaleStream(uint64(i)), expected, evs...)
			if err == nil && res.NextExpectedRevision != uint64(rev+n-1) {
				err = fmt.Errorf("next expected revision %d, want %d", res.NextExpectedRevision, rev+n-1)
			}
			if err != nil {
				stop.Store(true)
				return fmt.Errorf("stream %d revisions %d..%d: %w", i, rev, rev+n-1, err)
			}
			loaded.Add(uint64(n))
		}
	}
	return nil
}

// scaleSettlePoll is how often settle looks at the compaction backlog.
const scaleSettlePoll = 200 * time.Millisecond

// settle waits, for at most bound, until no family has an immutable memtable or bytes
// pending compaction, as in a database that grew over time rather than in one load.
// It returns how long it waited and the bytes still pending when it stopped (0 when
// it settled); it looks once before waiting, so a settled database costs no wait.
func (s *scaleDB) settle(bound time.Duration) (time.Duration, uint64, error) {
	t0 := time.Now()
	deadline := time.NewTimer(bound)
	defer deadline.Stop()
	tick := time.NewTicker(scaleSettlePoll)
	defer tick.Stop()
	for {
		st, err := s.db.StorageStats()
		if err != nil {
			return time.Since(t0), 0, fmt.Errorf("storage stats: %w", err)
		}
		var pending, imm uint64
		for _, f := range st.Families {
			pending += f.PendingCompactionBytes
			imm += f.ImmutableMemtables
		}
		if pending == 0 && imm == 0 {
			return time.Since(t0), 0, nil
		}
		select {
		case <-deadline.C:
			return time.Since(t0), pending, nil
		case <-tick.C:
		}
	}
}
