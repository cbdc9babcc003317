package eventstore

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"

	"github.com/rockline/rockline/pipeline"
)

// MaxProjectionWorkers bounds StartParallelProjection's workers.
const MaxProjectionWorkers = 64

// ParallelProjection is a projection whose events are applied by several workers at
// once: worker i of n applies the events of the streams that hash to i (FNV-1a of the
// stream name, mod n; events of no stream go to worker 0), so the events of one
// stream stay in log order while different streams are applied side by side. Each
// worker is a Projection of its own, named "name/i-of-n", committing its batches
// with its own stored position, so every worker applies each of its events exactly
// once across crashes, as a single projection does. Handlers of different workers
// that write the same read-model key conflict, and Update's retry runs the loser's
// batch again in a fresh transaction: the read model stays what one projection would
// have built, in another order across streams.
//
// Each worker reads the whole log and keeps its share, so reading is repeated n
// times while handling is divided: workers pay off when handling an event costs more
// than reading it. Starting the projection with another number of workers starts
// from the beginning of the log (other names, no stored positions); Reset first, or
// drop the read model, so it is not applied twice.
type ParallelProjection struct {
	name  string
	owns  []string
	s     *Store
	parts []*Projection
}

// StartParallelProjection starts cfg as workers Projections (1..MaxProjectionWorkers)
// that share its events by stream, each resuming after its stored position. Errors
// are StartProjection's; a *pipeline.ConfigError names Workers or a Name too long for
// the workers' suffix. If a worker cannot start, the ones started are closed.
func (s *Store) StartParallelProjection(ctx context.Context, cfg ProjectionConfig, workers int) (*ParallelProjection, error) {
	if workers < 1 || workers > MaxProjectionWorkers {
		return nil, configError("Workers", workers, fmt.Sprintf("1 to %d", MaxProjectionWorkers))
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	suffix := fmt.Sprintf("/%d-of-%d", workers-1, workers)
	if len(cfg.Name)+len(suffix) > MaxProjectionNameLen {
		return nil, configError("Name", cfg.Name, fmt.Sprintf("at most %d bytes with %d workers (each is named name/i-of-n)", MaxProjectionNameLen-len(suffix), workers))
	}
	pp := &ParallelProjection{name: cfg.Name, owns: cfg.Owns, s: s}
	for i := range workers {
		part := cfg
		part.Name = fmt.Sprintf("%s/%d-of-%d", cfg.Name, i, workers)
		part.Owns = nil // Reset re-creates the read model once, for every worker
		part.part = func(e *RecordedEvent) bool { return workerOf(e.Stream, workers) == i }
		p, err := s.StartProjection(ctx, part)
		if err != nil {
			_ = pp.Close()
			return nil, err
		}
		pp.parts = append(pp.parts, p)
	}
	return pp, nil
}

func configError(field string, value any, expected string) error {
	return &pipeline.ConfigError{Field: field, Value: value, Expected: expected}
}

// workerOf is the worker of n that applies the events of stream.
func workerOf(stream string, n int) int {
	if stream == "" || n == 1 {
		return 0
	}
	h := fnv.New32a()
	h.Write([]byte(stream))
	return int(h.Sum32() % uint32(n))
}

// Workers returns the workers, in order; each is an ordinary Projection (its Status
// says how far it is).
func (pp *ParallelProjection) Workers() []*Projection { return pp.parts }

// CaughtUp returns once every worker has applied every matching event at or below
// pos, with Projection.CaughtUp's errors.
func (pp *ParallelProjection) CaughtUp(ctx context.Context, pos uint64) error {
	for _, p := range pp.parts {
		if err := p.CaughtUp(ctx, pos); err != nil {
			return err
		}
	}
	return nil
}

// Status sums the workers up: the lowest position and the highest lag, running
// unless a worker is paused (paused), stopped (stopped) or failed (failed, with the
// first worker's error).
func (pp *ParallelProjection) Status() ProjectionStatus {
	st := ProjectionStatus{Name: pp.name, State: ProjectionRunning}
	rank := map[ProjectionState]int{ProjectionRunning: 0, ProjectionPaused: 1, ProjectionStopped: 2, ProjectionFailed: 3}
	for i, p := range pp.parts {
		w := p.Status()
		if i == 0 || w.Position < st.Position {
			st.Position = w.Position
		}
		st.Lag = max(st.Lag, w.Lag)
		if rank[w.State] > rank[st.State] {
			st.State, st.Err = w.State, w.Err
		}
	}
	return st
}

// Pause pauses every worker and returns once all have parked (errors joined).
func (pp *ParallelProjection) Pause() error {
	var errs []error
	for _, p := range pp.parts {
		errs = append(errs, p.Pause())
	}
	return errors.Join(errs...)
}

// Resume resumes every worker (errors joined).
func (pp *ParallelProjection) Resume() error {
	var errs []error
	for _, p := range pp.parts {
		errs = append(errs, p.Resume())
	}
	return errors.Join(errs...)
}

// Reset rebuilds the read model from the start of the log, as Projection.Reset does
// for one: it pauses every worker, drops and re-creates the families of Owns once,
// sets every worker's position back to 0 and resumes the workers that were not
// paused before (a paused projection stays paused).
func (pp *ParallelProjection) Reset(ctx context.Context) error {
	wasPaused := make([]bool, len(pp.parts))
	for i, p := range pp.parts {
		p.mu.Lock()
		wasPaused[i] = p.paused
		p.mu.Unlock()
	}
	if err := pp.Pause(); err != nil {
		return err
	}
	if err := recreate(pp.s.db, pp.name, pp.owns); err != nil {
		return err
	}
	for _, p := range pp.parts {
		if err := p.rewind(ctx); err != nil {
			return err
		}
	}
	var errs []error
	for i, p := range pp.parts {
		if !wasPaused[i] {
			errs = append(errs, p.Resume())
		}
	}
	return errors.Join(errs...)
}

// Close stops every worker and waits for them; it returns the first error that
// ended one (Projection.Wait's), nil after a clean stop.
func (pp *ParallelProjection) Close() error {
	for _, p := range pp.parts {
		p.cancel()
	}
	return pp.Wait()
}

// Wait blocks until every worker has ended and returns the first error that ended
// one (nil when all ended cleanly).
func (pp *ParallelProjection) Wait() error {
	var first error
	for _, p := range pp.parts {
		if err := p.Wait(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
