package eventstore_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/pipeline"
)

// ordered is a read model that counts events per stream and checks, in the handler,
// that each stream's events arrive in revision order with none missing: it stores
// the next revision expected per stream ("next" + stream) beside the count, and also
// bumps one total every worker writes ("total"), so workers' commits conflict.
func ordered(db *pipeline.DB) func(tx *pipeline.Txn, events []eventstore.RecordedEvent) error {
	return func(tx *pipeline.Txn, events []eventstore.RecordedEvent) error {
		cf, err := db.ColumnFamily("counts")
		if err != nil {
			return err
		}
		get := func(k string) (uint64, error) {
			v, err := tx.Get(cf, []byte(k))
			if errors.Is(err, pipeline.ErrNotFound) {
				return 0, nil
			}
			if err != nil {
				return 0, err
			}
			return binary.BigEndian.Uint64(v), nil
		}
		put := func(k string, n uint64) error { return tx.Put(cf, []byte(k), binary.BigEndian.AppendUint64(nil, n)) }
		for _, e := range events {
			next, err := get("next" + e.Stream)
			if err != nil {
				return err
			}
			if e.Revision != next {
				return fmt.Errorf("stream %s: revision %d applied, %d expected next", e.Stream, e.Revision, next)
			}
			n, err := get(e.Stream)
			if err != nil {
				return err
			}
			total, err := get("total")
			if err != nil {
				return err
			}
			if err := errors.Join(put("next"+e.Stream, next+1), put(e.Stream, n+1), put("total", total+1)); err != nil {
				return err
			}
		}
		return nil
	}
}

// TestParallelProjection: 4 workers project 12 streams appended to while they run,
// are paused, resumed, closed and started again, and Reset under load: every time
// they catch up the read model equals a recount of the log (each event once, each
// stream's events in order, checked in the handler), though workers' commits
// conflict on a shared total.
func TestParallelProjection(t *testing.T) {
	db, es, _ := openStore(t, pipeline.Config{})
	if _, err := db.EnsureColumnFamily("counts"); err != nil {
		t.Fatal(err)
	}
	appendStreams := func(n int) {
		t.Helper()
		var wg sync.WaitGroup
		for w := range 3 {
			wg.Go(func() {
				for i := range n {
					stream := fmt.Sprintf("order-%d", (w*n+i)%12)
					if _, err := es.Append(ctx, stream, eventstore.Any, eventstore.Event{Type: "T"}); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
	}
	want := func() map[string]uint64 {
		out := map[string]uint64{}
		total := uint64(0)
		for s, n := range recount(t, es, ordersOnly) {
			out[s], out["next"+s] = n, n
			total += n
		}
		out["total"] = total
		return out
	}
	cfg := eventstore.ProjectionConfig{Name: "counts", Filter: ordersOnly, Handle: ordered(db), MaxBatchEvents: 16, Owns: []string{"counts"}}
	start := func() *eventstore.ParallelProjection {
		t.Helper()
		pp, err := es.StartParallelProjection(ctx, cfg, 4)
		if err != nil {
			t.Fatal(err)
		}
		return pp
	}
	check := func(what string, pp *eventstore.ParallelProjection) {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, deadline)
		defer cancel()
		if err := pp.CaughtUp(wctx, db.LastPosition()); err != nil {
			t.Fatalf("%s: not caught up (%+v): %v", what, pp.Status(), err)
		}
		if diff := cmp.Diff(want(), counts(t, db)); diff != "" {
			t.Fatalf("%s: read model against a recount (-want +got):\n%s", what, diff)
		}
	}

	appendStreams(100)
	pp := start()
	appendStreams(100) // while it runs
	check("caught up", pp)
	if err := pp.Pause(); err != nil {
		t.Fatal(err)
	}
	appendStreams(20)
	if st := pp.Status(); st.State != eventstore.ProjectionPaused || st.Lag == 0 {
		t.Errorf("paused with events behind: status %+v", st)
	}
	if err := pp.Resume(); err != nil {
		t.Fatal(err)
	}
	check("resumed", pp)
	if err := pp.Close(); err != nil {
		t.Fatal(err)
	}
	appendStreams(50)
	pp = start() // each worker resumes after its own position
	defer pp.Close()
	check("restarted", pp)
	var wg sync.WaitGroup
	wg.Go(func() { appendStreams(50) })
	if err := pp.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	check("reset under load", pp)
	if n := len(pp.Workers()); n != 4 {
		t.Errorf("%d workers, want 4", n)
	}
	// A paused projection stays paused through Reset, as a single one does (the model
	// test found a Reset that resumed it).
	if err := pp.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := pp.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	if st := pp.Status(); st.State != eventstore.ProjectionPaused {
		t.Errorf("after Reset of a paused projection: status %+v, want paused", st)
	}
	if err := pp.Resume(); err != nil {
		t.Fatal(err)
	}
	check("reset while paused, then resumed", pp)
}

// TestParallelProjectionConfig: bad worker counts and names too long for the
// workers' suffix are *ConfigErrors naming the field; nothing starts.
func TestParallelProjectionConfig(t *testing.T) {
	_, es, _ := openStore(t, pipeline.Config{})
	handle := func(*pipeline.Txn, []eventstore.RecordedEvent) error { return nil }
	cases := []struct {
		name    string
		cfg     eventstore.ProjectionConfig
		workers int
		field   string
	}{
		{"no workers", eventstore.ProjectionConfig{Name: "p", Handle: handle}, 0, "Workers"},
		{"too many", eventstore.ProjectionConfig{Name: "p", Handle: handle}, eventstore.MaxProjectionWorkers + 1, "Workers"},
		{"no handler", eventstore.ProjectionConfig{Name: "p"}, 2, "Handle"},
		{"name too long for the suffix", eventstore.ProjectionConfig{Name: fmt.Sprintf("%0*d", eventstore.MaxProjectionNameLen-3, 0), Handle: handle}, 2, "Name"},
	}
	for _, c := range cases {
		_, err := es.StartParallelProjection(ctx, c.cfg, c.workers)
		var ce *pipeline.ConfigError
		if !errors.As(err, &ce) || ce.Field != c.field {
			t.Errorf("%s: %v, want a *ConfigError naming %s", c.name, err, c.field)
		}
	}
	if ps, err := es.Projections(); err != nil || len(ps) != 0 {
		t.Errorf("projections after refused starts: %v, %v", ps, err)
	}
}
