package esmodel_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/pipeline"
)

// The projection counts the matching events per stream ("-" for events of no stream)
// in a family it owns; it runs one handler (StartProjection) or two or three workers
// that share the streams (StartParallelProjection). Its read model must always count
// exactly the matching events of each stream up to the stored position of the
// worker that applies the stream: none twice, none skipped, across pauses, resets,
// closes, reopens and kills. A Reset once the log is truncated cannot apply the removed events
// again: the projection then fails with ErrLogTruncated, and the next one started is
// a new generation (a new name and family).

// proj is the projection of the machine, running or not.
type proj struct {
	gen     int
	filter  int // index in filters
	workers int // 1: StartProjection; more: StartParallelProjection
	p       projRunner
	paused  bool
	doomed  bool // reset on a truncated log: it fails once it runs
	// wasRunning: it ran when the database closed, so it starts again after the reopen.
	wasRunning bool
}

func projName(gen int) string   { return fmt.Sprintf("p%d", gen) }
func projFamily(gen int) string { return fmt.Sprintf("pm%d", gen) }

// projConfig is the projection's configuration, the kill child's too.
func projConfig(db *pipeline.DB, gen, filter int) eventstore.ProjectionConfig {
	fam := projFamily(gen)
	return eventstore.ProjectionConfig{
		Name:           projName(gen),
		Filter:         filters[filter].api(),
		MaxBatchEvents: 2,
		Owns:           []string{fam},
		Handle: func(tx *pipeline.Txn, events []eventstore.RecordedEvent) error {
			cf, err := db.ColumnFamily(fam)
			if err != nil {
				return err
			}
			for _, e := range events {
				key := []byte(e.Stream)
				if e.Stream == "" {
					key = []byte("-")
				}
				n := uint64(0)
				v, err := tx.Get(cf, key)
				switch {
				case err == nil:
					n = binary.BigEndian.Uint64(v)
				case !errors.Is(err, pipeline.ErrNotFound):
					return err
				}
				if err := tx.Put(cf, key, binary.BigEndian.AppendUint64(nil, n+1)); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

// projRunner is what *eventstore.Projection and *eventstore.ParallelProjection both
// offer.
type projRunner interface {
	Close() error
	Pause() error
	Resume() error
	Reset(ctx context.Context) error
	Status() eventstore.ProjectionStatus
	CaughtUp(ctx context.Context, pos uint64) error
	Wait() error
}

// startProjection starts generation gen on db's store with workers workers, creating
// its family first.
func startProjection(db *pipeline.DB, es *eventstore.Store, gen, filter, workers int) (projRunner, error) {
	if _, err := db.EnsureColumnFamily(projFamily(gen)); err != nil {
		return nil, err
	}
	if workers > 1 {
		pp, err := es.StartParallelProjection(context.Background(), projConfig(db, gen, filter), workers)
		if err != nil {
			return nil, err
		}
		return pp, nil
	}
	p, err := es.StartProjection(context.Background(), projConfig(db, gen, filter))
	if err != nil {
		return nil, err
	}
	return p, nil
}

func (m *machine) running(t *rapid.T) *proj {
	if m.proj == nil || m.proj.p == nil {
		t.Skip("no running projection")
	}
	return m.proj
}

// projStart: a new projection, or the stopped one started again (resuming after its
// stored position); starting the running one again fails with ErrProjectionRunning.
func (m *machine) projStart(t *rapid.T) {
	if m.proj == nil {
		m.gens++
		// A new projection reads the log from its start: once the log is truncated it
		// fails with ErrLogTruncated.
		m.proj = &proj{gen: m.gens, filter: rapid.IntRange(0, len(filters)-1).Draw(t, "projection filter"),
			workers: rapid.IntRange(1, 3).Draw(t, "projection workers"), doomed: m.model.first > 1}
	}
	pr := m.proj
	p, err := startProjection(m.db, m.es, pr.gen, pr.filter, pr.workers)
	if pr.p != nil {
		expectIs(t, "StartProjection of a running projection", err, eventstore.ErrProjectionRunning)
		return
	}
	if err != nil {
		fatalf(t, "StartProjection(%s): %v", projName(pr.gen), err)
	}
	pr.p, pr.paused = p, false
}

// projStop: Close stops the projection, cleanly.
func (m *machine) projStop(t *rapid.T) {
	pr := m.running(t)
	err := pr.p.Close()
	if pr.doomed && errors.Is(err, pipeline.ErrLogTruncated) {
		m.proj = nil
		return
	}
	if err != nil {
		fatalf(t, "projection Close: %v", err)
	}
	pr.p = nil
}

// projPause: Pause returns once no batch is in flight; the projection reads as paused.
func (m *machine) projPause(t *rapid.T) {
	pr := m.running(t)
	if err := pr.p.Pause(); err != nil {
		if pr.doomed && errors.Is(err, eventstore.ErrProjectionStopped) {
			return // it has failed already; the check sees why
		}
		fatalf(t, "projection Pause: %v", err)
	}
	pr.paused = true
	if st := pr.p.Status(); st.State != eventstore.ProjectionPaused {
		fatalf(t, "projection Status after Pause: %+v, want paused", st)
	}
}

// projResume: a paused projection goes on.
func (m *machine) projResume(t *rapid.T) {
	pr := m.running(t)
	if err := pr.p.Resume(); err != nil {
		if pr.doomed && errors.Is(err, eventstore.ErrProjectionStopped) {
			return
		}
		fatalf(t, "projection Resume: %v", err)
	}
	pr.paused = false
}

// projReset: the read model rebuilt from the start of the log; a paused projection
// stays paused. On a truncated log the projection is doomed to ErrLogTruncated.
func (m *machine) projReset(t *rapid.T) {
	pr := m.running(t)
	if err := pr.p.Reset(context.Background()); err != nil {
		if pr.doomed && errors.Is(err, eventstore.ErrProjectionStopped) {
			return
		}
		fatalf(t, "projection Reset: %v", err)
	}
	if m.model.first > 1 {
		pr.doomed = true
	}
}

// stopProjection closes the running projection before a Close of the database; a
// doomed one that failed meanwhile is gone.
func (m *machine) stopProjection(t *rapid.T) {
	if m.proj == nil || m.proj.p == nil {
		return
	}
	pr := m.proj
	err := pr.p.Close()
	pr.p, pr.paused = nil, false
	switch {
	case pr.doomed && errors.Is(err, pipeline.ErrLogTruncated):
		m.proj = nil
	case err != nil:
		fatalf(t, "projection Close before closing the database: %v", err)
	default:
		pr.wasRunning = true
	}
}

// restartProjection starts again, after a reopen or a kill, the projection that ran
// before it.
func (m *machine) restartProjection(t *rapid.T) {
	if m.proj == nil || !m.proj.wasRunning {
		return
	}
	m.proj.wasRunning = false
	p, err := startProjection(m.db, m.es, m.proj.gen, m.proj.filter, m.proj.workers)
	if err != nil {
		fatalf(t, "StartProjection(%s) after reopening: %v", projName(m.proj.gen), err)
	}
	m.proj.p = p
}

// projectionStored returns the position the projection would resume after, when there
// is a projection that is not doomed; a running one has caught up first.
func (m *machine) projectionStored(t *rapid.T) (uint64, bool) {
	pr := m.proj
	if pr == nil || pr.doomed {
		return 0, false
	}
	if pr.p == nil {
		return slices.Min(m.storedPositions(t, pr)), true
	}
	if !pr.paused {
		m.caughtUp(t, pr)
	}
	return pr.p.Status().Position, true
}

func (m *machine) caughtUp(t *rapid.T, pr *proj) {
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	if err := pr.p.CaughtUp(ctx, m.db.LastPosition()); err != nil {
		fatalf(t, "projection CaughtUp(%d): %v (status %+v)", m.db.LastPosition(), err, pr.p.Status())
	}
}

// storedPositions are the positions of the projection's workers as Projections lists
// them (0 for one that has stored none).
func (m *machine) storedPositions(t *rapid.T, pr *proj) []uint64 {
	list, err := m.es.Projections()
	if err != nil {
		fatalf(t, "Projections: %v", err)
	}
	names := workerNames(pr)
	out := make([]uint64, len(names))
	for _, st := range list {
		if i := slices.Index(names, st.Name); i >= 0 {
			out[i] = st.Position
		}
	}
	return out
}

// workerNames are the names the projection's workers store their positions under.
func workerNames(pr *proj) []string {
	if pr.workers <= 1 {
		return []string{projName(pr.gen)}
	}
	out := make([]string, pr.workers)
	for i := range out {
		out[i] = fmt.Sprintf("%s/%d-of-%d", projName(pr.gen), i, pr.workers)
	}
	return out
}

// runningPositions are the positions of the running projection's workers.
func runningPositions(pr *proj) []uint64 {
	pp, ok := pr.p.(*eventstore.ParallelProjection)
	if !ok {
		return []uint64{pr.p.Status().Position}
	}
	var out []uint64
	for _, w := range pp.Workers() {
		out = append(out, w.Status().Position)
	}
	return out
}

// checkProjection: a running projection catches up (a doomed one fails with
// ErrLogTruncated instead); its read model counts exactly the matching events up to
// its stored position.
func (m *machine) checkProjection(t *rapid.T) {
	pr := m.proj
	if pr == nil {
		return
	}
	var pos []uint64
	switch {
	case pr.p == nil:
		pos = m.storedPositions(t, pr)
	case pr.doomed && !pr.paused:
		ended := make(chan error, 1)
		go func() { ended <- pr.p.Wait() }() // ends with the projection, at the latest at teardown's Close
		var err error
		select {
		case err = <-ended:
		case <-time.After(deadline):
			fatalf(t, "projection reset on a truncated log still runs after %v: %+v", deadline, pr.p.Status())
		}
		expectIs(t, "projection reset on a truncated log", err, pipeline.ErrLogTruncated)
		if st := pr.p.Status(); st.State != eventstore.ProjectionFailed {
			fatalf(t, "projection reset on a truncated log: status %+v, want failed", st)
		}
		m.proj = nil
		return
	default:
		if !pr.paused {
			m.caughtUp(t, pr)
		}
		st := pr.p.Status()
		want := eventstore.ProjectionRunning
		if pr.paused {
			want = eventstore.ProjectionPaused
		}
		if st.State != want {
			fatalf(t, "projection status %+v, want %s", st, want)
		}
		pos = runningPositions(pr)
	}
	m.compareReadModel(t, pr, pos)
}

// compareReadModel fails t unless the projection's family counts, for each stream,
// exactly the matching events at or below the position of one of its workers (pos):
// the worker that applies the stream, which the test does not name (an event
// skipped or applied twice makes a count no worker's position gives).
func (m *machine) compareReadModel(t *rapid.T, pr *proj, pos []uint64) {
	counts := make([]map[string]uint64, len(pos))
	keys := map[string]bool{}
	for i, p := range pos {
		counts[i] = make(map[string]uint64)
		for _, e := range m.model.matchingUpTo(filters[pr.filter], 0, p) {
			key := e.stream
			if key == "" {
				key = "-"
			}
			counts[i][key]++
			keys[key] = true
		}
	}
	got := make(map[string]uint64)
	cf, err := m.db.ColumnFamily(projFamily(pr.gen))
	if err != nil {
		fatalf(t, "projection family: %v", err)
	}
	err = m.db.View(func(tx *pipeline.Txn) error {
		it, err := tx.NewIterator(cf, pipeline.IterOptions{})
		if err != nil {
			return err
		}
		defer it.Close()
		for it.First(); it.Valid(); it.Next() {
			got[string(it.Key())] = binary.BigEndian.Uint64(it.Value())
		}
		return it.Err()
	})
	if err != nil {
		fatalf(t, "reading the read model: %v", err)
	}
	for k := range got {
		keys[k] = true
	}
	want := make(map[string]uint64) // the count of the worker whose position explains it, else worker 0's
	for k := range keys {
		want[k] = counts[0][k]
		for _, c := range counts {
			if c[k] == got[k] {
				want[k] = c[k]
				break
			}
		}
		if want[k] == 0 {
			delete(want, k)
		}
	}
	if diff := cmp.Diff(want, got, equateEmpty); diff != "" {
		fatalf(t, "projection %s (%d workers, filter %v) at positions %v: counts (-model +read model):\n%s", projName(pr.gen), pr.workers, filters[pr.filter], pos, diff)
	}
}
