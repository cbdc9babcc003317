package eventstore_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/pipeline"
)

// counter is a projection that counts events per stream in the family "counts", the
// read model a recount of the log must reproduce.
type counter struct {
	db        *pipeline.DB
	batches   atomic.Int64
	maxBatch  atomic.Int64
	failAfter atomic.Int64 // when > 0: the handler fails on the batch holding that many-th event
	seen      atomic.Int64
}

var errInjected = errors.New("injected handler failure")

func (c *counter) handle(tx *pipeline.Txn, events []eventstore.RecordedEvent) error {
	cf, err := c.db.ColumnFamily("counts")
	if err != nil {
		return err
	}
	c.batches.Add(1)
	if n := int64(len(events)); n > c.maxBatch.Load() {
		c.maxBatch.Store(n)
	}
	if f := c.failAfter.Load(); f > 0 && c.seen.Load()+int64(len(events)) >= f {
		return errInjected
	}
	for _, e := range events {
		v, err := tx.Get(cf, []byte(e.Stream))
		n := uint64(0)
		if err == nil {
			n = binary.BigEndian.Uint64(v)
		} else if !errors.Is(err, pipeline.ErrNotFound) {
			return err
		}
		if err := tx.Put(cf, []byte(e.Stream), binary.BigEndian.AppendUint64(nil, n+1)); err != nil {
			return err
		}
	}
	c.seen.Add(int64(len(events)))
	return nil
}

// counts reads the read model.
func counts(t testing.TB, db *pipeline.DB) map[string]uint64 {
	t.Helper()
	return familyCounts(t, db, "counts")
}

// familyCounts reads a read model of counters: every key of family fam with its
// big-endian count.
func familyCounts(t testing.TB, db *pipeline.DB, fam string) map[string]uint64 {
	t.Helper()
	cf, err := db.ColumnFamily(fam)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	err = db.View(func(tx *pipeline.Txn) error {
		it, err := tx.NewIterator(cf, pipeline.IterOptions{})
		if err != nil {
			return err
		}
		defer it.Close()
		for it.First(); it.Valid(); it.Next() {
			out[string(it.Key())] = binary.BigEndian.Uint64(it.Value())
		}
		return it.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// recount counts the events per stream of the whole log that f matches.
func recount(t testing.TB, es *eventstore.Store, f eventstore.Filter) map[string]uint64 {
	t.Helper()
	all, err := es.ReadAll(ctx, eventstore.Start, eventstore.ToEnd, f)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	for _, e := range all {
		out[e.Stream]++
	}
	return out
}

// appendLoad appends n events round-robin to three order streams and a noise stream
// that the projections' filter leaves out, one commit each.
func appendLoad(t testing.TB, es *eventstore.Store, tag string, n int) {
	t.Helper()
	for i := range n {
		stream := fmt.Sprintf("order-%d", i%3)
		if i%4 == 3 {
			stream = "noise"
		}
		if _, err := es.Append(ctx, stream, eventstore.Any, eventstore.Event{Type: "T", Data: []byte(fmt.Sprintf("%s-%d", tag, i))}); err != nil {
			t.Fatal(err)
		}
	}
}

// caughtUp waits until p has applied every event published when it is called.
func caughtUp(t testing.TB, db *pipeline.DB, p *eventstore.Projection) {
	t.Helper()
	target := db.LastPosition()
	wctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	if err := p.CaughtUp(wctx, target); err != nil {
		t.Fatalf("projection not caught up with %d (%+v): %v", target, p.Status(), err)
	}
}

var ordersOnly = eventstore.Filter{StreamPrefix: "order-"}

func startCounter(t testing.TB, db *pipeline.DB, es *eventstore.Store, c *counter, maxBatch int) *eventstore.Projection {
	t.Helper()
	if _, err := db.EnsureColumnFamily("counts"); err != nil {
		t.Fatal(err)
	}
	p, err := es.StartProjection(ctx, eventstore.ProjectionConfig{Name: "counts", Filter: ordersOnly, Handle: c.handle, MaxBatchEvents: maxBatch, Owns: []string{"counts"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// TestProjectionExactlyOnce: a projection started on a log with events, fed more while
// it runs, and restarted twice (once after a handler failure) ends with a read model
// equal to a recount of the log: no event applied twice or skipped.
func TestProjectionExactlyOnce(t *testing.T) {
	for _, pol := range policies {
		t.Run(pol, func(t *testing.T) {
			db, es, _ := openStore(t, pipeline.Config{Validation: pol})
			appendLoad(t, es, "before", 40)
			c := &counter{db: db}
			p := startCounter(t, db, es, c, 4)
			appendLoad(t, es, "live", 40)
			caughtUp(t, db, p)
			if diff := cmp.Diff(recount(t, es, ordersOnly), counts(t, db)); diff != "" {
				t.Fatalf("read model against a recount (-recount +model):\n%s", diff)
			}
			if m := c.maxBatch.Load(); m < 2 || m > 4 {
				t.Errorf("largest batch %d events, want 2..4 (MaxBatchEvents 4, one event per commit)", m)
			}
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}

			// A failure part-way: the failed batch rolls back whole.
			appendLoad(t, es, "while stopped", 20)
			c.failAfter.Store(c.seen.Load() + 5)
			p = startCounter(t, db, es, c, 4)
			err := p.Wait()
			var pe *eventstore.ProjectionError
			if !errors.As(err, &pe) || !errors.Is(err, errInjected) || pe.Name != "counts" {
				t.Fatalf("Wait = %v, want the *ProjectionError of the injected failure", err)
			}
			if st := p.Status(); st.State != eventstore.ProjectionFailed || !errors.Is(st.Err, errInjected) {
				t.Errorf("Status of the failed projection = %+v", st)
			}
			c.failAfter.Store(0)
			p = startCounter(t, db, es, c, 4)
			appendLoad(t, es, "after", 10)
			caughtUp(t, db, p)
			if diff := cmp.Diff(recount(t, es, ordersOnly), counts(t, db)); diff != "" {
				t.Fatalf("read model after restarts (-recount +model):\n%s", diff)
			}
		})
	}
}

// TestProjectionOperations: pause holds the position while events arrive, resume
// catches up, Reset rebuilds the owned family from position 0 without doubling, and
// Projections lists the projection with its state; a second start of the same name
// is refused.
func TestProjectionOperations(t *testing.T) {
	db, es, _ := openStore(t, pipeline.Config{})
	appendLoad(t, es, "a", 12)
	c := &counter{db: db}
	p := startCounter(t, db, es, c, 0)
	caughtUp(t, db, p)
	if _, err := es.StartProjection(ctx, eventstore.ProjectionConfig{Name: "counts", Handle: c.handle}); !errors.Is(err, eventstore.ErrProjectionRunning) {
		t.Errorf("second start = %v, want ErrProjectionRunning", err)
	}

	if err := p.Pause(); err != nil {
		t.Fatal(err)
	}
	held := p.Status()
	appendLoad(t, es, "b", 8)
	if st := p.Status(); st.State != eventstore.ProjectionPaused || st.Position != held.Position || st.Lag == 0 {
		t.Errorf("paused status = %+v, want paused at %d with a lag", st, held.Position)
	}
	list, err := es.Projections()
	if err != nil || len(list) != 1 || list[0].State != eventstore.ProjectionPaused {
		t.Errorf("Projections while paused = %+v, %v", list, err)
	}
	if err := p.Resume(); err != nil {
		t.Fatal(err)
	}
	caughtUp(t, db, p)
	want := recount(t, es, ordersOnly)
	if diff := cmp.Diff(want, counts(t, db)); diff != "" {
		t.Fatalf("after resume (-recount +model):\n%s", diff)
	}

	if err := p.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	caughtUp(t, db, p)
	if diff := cmp.Diff(want, counts(t, db)); diff != "" {
		t.Fatalf("after Reset (-recount +model):\n%s", diff)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	list, err = es.Projections()
	if err != nil || len(list) != 1 || list[0].Name != "counts" || list[0].State != eventstore.ProjectionStopped || list[0].Position == 0 {
		t.Errorf("Projections after Close = %+v, %v", list, err)
	}
	if err := p.Pause(); !errors.Is(err, eventstore.ErrProjectionStopped) {
		t.Errorf("Pause after Close = %v, want ErrProjectionStopped", err)
	}
}

// TestProjectionConfig: bad settings are refused with a *pipeline.ConfigError naming
// the field.
func TestProjectionConfig(t *testing.T) {
	_, es, _ := openStore(t, pipeline.Config{})
	ok := func(*pipeline.Txn, []eventstore.RecordedEvent) error { return nil }
	cases := map[string]eventstore.ProjectionConfig{
		"Name":           {Handle: ok},
		"Handle":         {Name: "p"},
		"MaxBatchEvents": {Name: "p", Handle: ok, MaxBatchEvents: -1},
		"MaxBatchBytes":  {Name: "p", Handle: ok, MaxBatchBytes: -1},
		"Owns[0]":        {Name: "p", Handle: ok, Owns: []string{""}},
	}
	cases["Name/long"] = eventstore.ProjectionConfig{Name: strings.Repeat("n", 256), Handle: ok}
	for field, cfg := range cases {
		_, err := es.StartProjection(ctx, cfg)
		var ce *pipeline.ConfigError
		if !errors.As(err, &ce) || ce.Field != strings.Split(field, "/")[0] {
			t.Errorf("%s: %v, want a *pipeline.ConfigError for %s", field, err, field)
		}
	}
}

// TestProjectionEndsWithDatabase: closing the database ends a running projection.
func TestProjectionEndsWithDatabase(t *testing.T) {
	db, es, _ := openStore(t, pipeline.Config{})
	p := startCounter(t, db, es, &counter{db: db}, 0)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
	case <-time.After(deadline):
		t.Fatal("projection outlived its database")
	}
	if err := p.Wait(); err != nil && !errors.Is(err, pipeline.ErrClosed) {
		t.Errorf("Wait = %v, want nil or ErrClosed", err)
	}
}

// TestProjectionCloseUnderLoad: closing a projection while it is busy with batches
// ends it cleanly (Wait returns nil, not the cancelled context), and a restart finishes
// the work exactly once.
func TestProjectionCloseUnderLoad(t *testing.T) {
	db, es, _ := openStore(t, pipeline.Config{})
	appendLoad(t, es, "x", 300)
	for round := range 5 {
		appendLoad(t, es, fmt.Sprint(round), 20) // work for this round, whatever earlier ones did
		c := &counter{db: db}
		p := startCounter(t, db, es, c, 1) // one event a batch: many commits in flight
		for c.batches.Load() == 0 {
			if err := db.WaitForPosition(ctx, db.LastPosition()+1); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.Close(); err != nil {
			t.Fatalf("round %d: Close under load = %v, want nil", round, err)
		}
	}
	p := startCounter(t, db, es, &counter{db: db}, 0)
	caughtUp(t, db, p)
	if diff := cmp.Diff(recount(t, es, ordersOnly), counts(t, db)); diff != "" {
		t.Errorf("after the closes (-recount +model):\n%s", diff)
	}
}
