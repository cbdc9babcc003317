package jetstream_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rockline/rockline/jetstream"
	"github.com/rockline/rockline/pipeline"
)

func TestFamilyGenerations(t *testing.T) {
	ctx := ctxT(t)
	p, _ := open(t, 3)
	gen, _, err := p.CreateFamily(ctx, "f")
	if err != nil || gen != 1 {
		t.Fatalf("CreateFamily: %d %v", gen, err)
	}
	if _, _, err := p.CreateFamily(ctx, "f"); !errors.Is(err, pipeline.ErrColumnFamilyExists) {
		t.Errorf("CreateFamily of a live family: %v", err)
	}
	tx, _ := p.Begin(ctx)
	if err := tx.Put("f", []byte("a"), []byte("1")); err != nil {
		t.Fatal(err)
	}
	at1, err := tx.Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A transaction that read the family before the drop fails at Commit.
	stale, _ := p.Begin(ctx)
	if v, ok, err := stale.Get(ctx, "f", []byte("a")); err != nil || !ok || string(v) != "1" {
		t.Fatalf("Get: %q %v %v", v, ok, err)
	}
	_ = stale.Put("f", []byte("b"), []byte("late"))
	// So does one that only writes it (its blind write reads the key's version).
	blind, _ := p.Begin(ctx)
	_ = blind.Put("f", []byte("c"), []byte("late"))
	dgen, dpos, err := p.DropFamily(ctx, "f")
	if err != nil || dgen != 1 {
		t.Fatalf("DropFamily: %d %v", dgen, err)
	}
	if _, err := stale.Commit(ctx); !errors.Is(err, pipeline.ErrColumnFamilyDropped) {
		t.Errorf("a commit that read the family before the drop: %v", err)
	}
	if _, err := blind.Commit(ctx); !errors.Is(err, pipeline.ErrColumnFamilyDropped) {
		t.Errorf("a commit that wrote the family, begun before the drop: %v", err)
	}
	if _, _, err := p.DropFamily(ctx, "f"); !errors.Is(err, pipeline.ErrColumnFamilyDropped) {
		t.Errorf("dropping a dropped family: %v", err)
	}
	after, _ := p.Begin(ctx)
	if _, _, err := after.Get(ctx, "f", []byte("a")); !errors.Is(err, pipeline.ErrColumnFamilyDropped) {
		t.Errorf("Get of a dropped family: %v", err)
	}
	if _, err := after.NewIterator(ctx, "f", jetstream.IterOptions{}); !errors.Is(err, pipeline.ErrColumnFamilyDropped) {
		t.Errorf("iterator of a dropped family: %v", err)
	}
	gen2, cpos, err := p.CreateFamily(ctx, "f")
	if err != nil || gen2 != 2 {
		t.Fatalf("re-create: %d %v", gen2, err)
	}
	// The new generation starts empty; the old one stays readable at old positions.
	fresh, _ := p.Begin(ctx)
	if _, ok, err := fresh.Get(ctx, "f", []byte("a")); err != nil || ok {
		t.Errorf("Get in the new generation: %v %v", ok, err)
	}
	_ = fresh.Put("f", []byte("x"), []byte("new"))
	at2, err := fresh.Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if it, ok, _ := p.GetGen(ctx, "f", 2, []byte("x"), at2); !ok || string(it.Value) != "new" || it.Generation != 2 {
		t.Errorf("GetGen 2: %+v %v", it, ok)
	}
	if it, ok, _ := p.Get(ctx, "f", []byte("a"), at1); !ok || string(it.Value) != "1" {
		t.Errorf("generation 1 at an old position: %+v %v", it, ok)
	}
	if items, _ := p.Scan(ctx, "f", nil, at2); len(items) != 1 || string(items[0].Key) != "a" {
		t.Errorf("Scan (generation 1) at %d: %v", at2, items)
	}
	st, err := p.Family(ctx, "f", at2)
	if err != nil || st.Generation != 2 || st.Dropped || !st.Recorded {
		t.Errorf("Family at %d: %+v %v", at2, st, err)
	}
	if st, _ := p.Family(ctx, "f", dpos); st.Generation != 1 || !st.Dropped {
		t.Errorf("Family at the drop: %+v", st)
	}
	if fs, err := p.Families(ctx, at2); err != nil || len(fs) != 1 || fs[0].Generation != 2 {
		t.Errorf("Families: %+v %v", fs, err)
	}
	// The catalog changes are entries of the log.
	for _, c := range []struct {
		pos     uint64
		gen     uint64
		dropped bool
	}{{dpos, 1, true}, {cpos, 2, false}} {
		e, err := p.Entry(ctx, c.pos)
		if err != nil || len(e.Families) != 1 || e.Families[0] != (jetstream.FamilyChange{Family: "f", Generation: c.gen, Dropped: c.dropped}) {
			t.Errorf("Entry %d: %+v %v", c.pos, e.Families, err)
		}
	}
	var es []jetstream.Entry
	for _, e := range collect(t, p, at1, 3) {
		if !e.Aborted { // the conflicts above each left an abort marker (fenceRefusal)
			es = append(es, e)
		}
	}
	if len(es) != 3 || es[0].Position != dpos || len(es[0].Families) != 1 || len(es[2].Writes) != 1 || es[2].Writes[0].Generation != 2 {
		t.Errorf("subscription: %+v", es)
	}
	// Purging: only a dropped generation.
	if err := p.PurgeGeneration(ctx, "f", 2); !errors.Is(err, jetstream.ErrInvalidArgument) {
		t.Errorf("purging the live generation: %v", err)
	}
	if err := p.PurgeGeneration(ctx, "f", 1); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := p.Get(ctx, "f", []byte("a"), at2); ok {
		t.Error("generation 1 survived its purge")
	}
	if it, ok, _ := p.GetGen(ctx, "f", 2, []byte("x"), at2); !ok || string(it.Value) != "new" {
		t.Error("the purge of generation 1 touched generation 2")
	}
}

// Writers keep committing to one family while it is dropped and re-created: every
// commit acknowledged after the drop wrote the new generation, none the old one, and
// writers of one family do not conflict with one another through the catalog check.
func TestDropRacesCommits(t *testing.T) {
	ctx := ctxT(t)
	p, _ := open(t, 3)
	if _, _, err := p.CreateFamily(ctx, "f"); err != nil {
		t.Fatal(err)
	}
	const writers, rounds = 4, 40
	var wg sync.WaitGroup
	var mu sync.Mutex
	acked := map[uint64]bool{}
	dropped := 0
	var dropAt uint64
	dropDone := make(chan struct{})
	for w := range writers {
		wg.Go(func() {
			for i := range rounds {
				if i == rounds/4 && w == 0 {
					_, pos, err := p.DropFamily(ctx, "f")
					if err != nil {
						t.Error(err)
					}
					if _, _, err := p.CreateFamily(ctx, "f"); err != nil {
						t.Error(err)
					}
					mu.Lock()
					dropAt = pos
					mu.Unlock()
					close(dropDone)
				}
				tx, err := p.Begin(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				_ = tx.Put("f", fmt.Appendf(nil, "w%d-%d", w, i), []byte("v"))
				pos, err := tx.Commit(ctx)
				mu.Lock()
				switch {
				case err == nil:
					acked[pos] = true
				case errors.Is(err, pipeline.ErrColumnFamilyDropped):
					dropped++
				default:
					t.Errorf("writer %d round %d: %v", w, i, err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	<-dropDone
	last, _ := p.Position(ctx)
	es, err := p.ReadLog(ctx, 0, 10000)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range es {
		for _, w := range e.Writes {
			if w.Family == "f" && e.Position > dropAt && w.Generation != 2 {
				t.Errorf("commit %d after the drop at %d wrote generation %d", e.Position, dropAt, w.Generation)
			}
		}
		if acked[e.Position] {
			n++
		}
	}
	if n != len(acked) {
		t.Errorf("%d acknowledged commits, %d in the log up to %d", len(acked), n, last)
	}
	t.Logf("%d commits acknowledged, %d refused as dropped, stats %+v", len(acked), dropped, p.Stats())
}

// The cost of the catalog check: the same concurrent blind commits with and without
// a FamilyCheck, for the report.
func TestFamilyCheckCost(t *testing.T) {
	if testing.Short() {
		t.Skip("measurement")
	}
	ctx := ctxT(t)
	for _, check := range []bool{false, true} {
		p, _ := open(t, 3)
		const writers, per = 4, 150
		var wg sync.WaitGroup
		start := time.Now()
		for w := range writers {
			wg.Go(func() {
				for i := range per {
					c := &jetstream.Commit{Writes: []jetstream.Write{{Family: "f", Key: fmt.Appendf(nil, "w%d-%d", w, i), Value: []byte("v")}}}
					if check {
						c.Families = []jetstream.FamilyCheck{{Family: "f", Shard: (w*per + i) % jetstream.FamilyShards}}
					}
					if _, err := p.Commit(ctx, c); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		el := time.Since(start)
		t.Logf("family check %v: %d writers × %d commits in %v (%.0f commits/s), in-flight retries %d", check, writers, per, el, float64(writers*per)/el.Seconds(), p.Stats().InFlight)
	}
}
