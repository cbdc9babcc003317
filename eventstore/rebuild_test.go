package eventstore_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/pipeline"
)

// totals is a read model in family fam: events per stream, and their total.
func totals(db *pipeline.DB, fam string) func(tx *pipeline.Txn, events []eventstore.RecordedEvent) error {
	return func(tx *pipeline.Txn, events []eventstore.RecordedEvent) error {
		cf, err := db.ColumnFamily(fam)
		if err != nil {
			return err
		}
		for _, e := range events {
			for _, k := range []string{e.Stream, "total"} {
				n := uint64(0)
				v, err := tx.Get(cf, []byte(k))
				if err == nil {
					n = binary.BigEndian.Uint64(v)
				} else if !errors.Is(err, pipeline.ErrNotFound) {
					return err
				}
				if err := tx.Put(cf, []byte(k), binary.BigEndian.AppendUint64(nil, n+1)); err != nil {
					return err
				}
			}
		}
		return nil
	}
}

// TestRebuildUnderLoad: a read model served through an alias is rebuilt as a new
// version while appends run and readers read it through the alias. No reader ever
// sees a half-built model (a total below what the first version had applied before
// the rebuild began), readers see both versions, the new one ends equal to a recount
// of the log, and the old version's family is dropped and its position forgotten.
func TestRebuildUnderLoad(t *testing.T) {
	db, es, _ := openStore(t, pipeline.Config{})
	appendLoad(t, es, "before", 2000)
	cfg := func(name string) eventstore.ProjectionConfig {
		return eventstore.ProjectionConfig{Name: name, Filter: ordersOnly, Handle: totals(db, name), MaxBatchEvents: 1, Owns: []string{name}}
	}
	v1, err := es.Rebuild(ctx, "totals", nil, cfg("totals-v1"))
	if err != nil {
		t.Fatal(err)
	}
	var floor uint64 // what v1 had applied before the rebuild began
	for _, n := range recount(t, es, ordersOnly) {
		floor += n
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { // appends throughout
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := es.Append(ctx, fmt.Sprintf("order-%d", i%3), eventstore.Any, eventstore.Event{Type: "T"}); err != nil {
				t.Error(err)
				return
			}
		}
	})
	var seen sync.Map // version -> *atomic.Int64 of reads
	var violations atomic.Int64
	for range 2 {
		wg.Go(func() { // readers through the alias
			for {
				select {
				case <-stop:
					return
				default:
				}
				err := db.View(func(tx *pipeline.Txn) error {
					name, err := es.Alias(tx, "totals")
					if err != nil {
						return err
					}
					cf, err := db.ColumnFamily(name)
					if err != nil {
						return err // swapped out and dropped since: resolve again
					}
					v, err := tx.Get(cf, []byte("total"))
					if err != nil {
						return err
					}
					if total := binary.BigEndian.Uint64(v); total < floor {
						violations.Add(1)
						t.Errorf("a reader of %s saw a total of %d, below the %d served before the rebuild", name, total, floor)
					}
					c, _ := seen.LoadOrStore(name, &atomic.Int64{})
					c.(*atomic.Int64).Add(1)
					return nil
				})
				if err != nil && !errors.Is(err, pipeline.ErrColumnFamilyNotFound) {
					t.Error(err)
					return
				}
			}
		})
	}
	wctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	v2, err := es.Rebuild(wctx, "totals", v1, cfg("totals-v2"))
	if err != nil {
		t.Fatal(err)
	}
	defer v2.Close()
	// Keep reading the new version a while, then stop.
	for {
		if c, ok := seen.Load("totals-v2"); ok && c.(*atomic.Int64).Load() >= 20 {
			break
		}
		if wctx.Err() != nil || t.Failed() {
			break
		}
		if err := v2.CaughtUp(wctx, db.LastPosition()); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if err := v2.CaughtUp(wctx, db.LastPosition()); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"totals-v1", "totals-v2"} {
		c, ok := seen.Load(name)
		if !ok || c.(*atomic.Int64).Load() == 0 {
			t.Errorf("no reader read %s through the alias", name)
		}
	}
	want := recount(t, es, ordersOnly)
	var total uint64
	for _, n := range want {
		total += n
	}
	want["total"] = total
	if diff := cmp.Diff(want, familyCounts(t, db, "totals-v2")); diff != "" {
		t.Errorf("the rebuilt read model against a recount (-want +got):\n%s", diff)
	}
	if _, err := db.ColumnFamily("totals-v1"); !errors.Is(err, pipeline.ErrColumnFamilyNotFound) {
		t.Errorf("the old version's family after the rebuild: %v, want it dropped", err)
	}
	ps, err := es.Projections()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if p.Name == "totals-v1" {
			t.Errorf("the old version's position is still stored: %+v", p)
		}
	}
	// A swap from a version the alias no longer names is refused.
	if err := es.SwapAlias(ctx, "totals", "totals-v1", "totals-v3"); !errors.Is(err, eventstore.ErrAliasMoved) {
		t.Errorf("a swap from a stale version: %v, want ErrAliasMoved", err)
	}
	t.Logf("reads through the alias: v1 %v, v2 %v; floor %d, final total %d", load(&seen, "totals-v1"), load(&seen, "totals-v2"), floor, total)
}

func load(m *sync.Map, k string) int64 {
	if c, ok := m.Load(k); ok {
		return c.(*atomic.Int64).Load()
	}
	return 0
}

// TestRebuildOutlivesItsContext: the context given to Rebuild bounds the wait, not
// the version it returns: cancelled once Rebuild returned, the new version still
// applies what is appended next (the model test found it stopping with the context).
func TestRebuildOutlivesItsContext(t *testing.T) {
	db, es, _ := openStore(t, pipeline.Config{})
	appendLoad(t, es, "before", 10)
	rctx, cancel := context.WithCancel(ctx)
	p, err := es.Rebuild(rctx, "totals", nil, eventstore.ProjectionConfig{Name: "v1", Filter: ordersOnly, Handle: totals(db, "v1"), Owns: []string{"v1"}})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	appendLoad(t, es, "after", 10)
	wctx, wcancel := context.WithTimeout(ctx, deadline)
	defer wcancel()
	if err := p.CaughtUp(wctx, db.LastPosition()); err != nil {
		t.Fatalf("the rebuilt version after its Rebuild context ended: %v (status %+v)", err, p.Status())
	}
}
