package model_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/pipeline"
)

// model is what the public API promises, in memory: families with generations and
// their contents, the dense log (its length and which positions record family
// changes), the streams, and the log's checkpoint and truncation marks.
type model struct {
	fams    map[string]*family // live families but default
	def     map[string]string  // the default family
	maxGen  map[string]int     // highest generation per name, ever
	streams map[string][]string
	evPos   map[string][]uint64 // log position of each stream event
	pos     uint64              // the last log position
	changes map[uint64]pipeline.FamilyChange
	// checkpointed is the highest position a checkpoint covers; truncated the first
	// position TruncateLog kept.
	checkpointed, truncated uint64
}

type family struct {
	gen  int
	data map[string]string
}

func newModel() *model {
	return &model{
		fams:    make(map[string]*family),
		def:     make(map[string]string),
		maxGen:  make(map[string]int),
		streams: make(map[string][]string),
		evPos:   make(map[string][]uint64),
		changes: make(map[uint64]pipeline.FamilyChange),
	}
}

func (m *model) live(name string) bool { _, ok := m.fams[name]; return ok }

func (m *model) liveNames() []string { return slices.Sorted(maps.Keys(m.fams)) }

// create records generation gen of name, created at the next position. Generations
// grow but may skip a number: a crash between recording a name's next generation and
// creating the family uses one up.
func (m *model) create(name string, gen int) {
	m.pos++
	m.createdAt(name, gen, m.pos)
}

func (m *model) createdAt(name string, gen int, pos uint64) {
	m.maxGen[name] = gen
	m.fams[name] = &family{gen: gen, data: make(map[string]string)}
	m.changes[pos] = pipeline.FamilyChange{Family: name, Generation: gen}
}

func (m *model) drop(name string) {
	m.pos++
	m.droppedAt(name, m.pos)
}

func (m *model) droppedAt(name string, pos uint64) {
	m.changes[pos] = pipeline.FamilyChange{Family: name, Generation: m.fams[name].gen, Dropped: true}
	delete(m.fams, name)
}

func (m *model) commit(ws []write) {
	m.apply(ws)
	m.pos++
}

// apply changes the contents as ws does, without taking a position.
func (m *model) apply(ws []write) {
	for _, w := range ws {
		data := m.def
		if w.family != "default" {
			data = m.fams[w.family].data
		}
		if w.del {
			delete(data, w.key)
		} else {
			data[w.key] = w.value
		}
	}
}

func (m *model) append(stream, id string) {
	m.pos++
	m.streams[stream] = append(m.streams[stream], id)
	m.evPos[stream] = append(m.evPos[stream], m.pos)
}

// raceDrop applies the commits that landed while name was dropped: their default
// writes stand, their writes to name went with it, and the drop took the one position
// among theirs that none of them has.
func (m *model) raceDrop(name string, writes [][]write, landed map[int]uint64, positions map[int]uint64) {
	taken := make(map[uint64]bool)
	for i := range landed {
		w := writes[i][1]
		m.def[w.key] = w.value
		taken[positions[i]] = true
	}
	dropPos := m.pos + 1
	for taken[dropPos] {
		dropPos++
	}
	m.droppedAt(name, dropPos)
	m.pos += uint64(1 + len(landed))
}

// compare fails t unless db agrees with the model: its families, their contents, its
// log (dense, with the family changes at their positions, from its truncation mark on:
// the model's own for the database, the one a copy was taken with for a copy) and its
// streams (the events whose entries are kept). es is the database's event store.
func (m *model) compare(t *rapid.T, what string, es *eventstore.Store, truncated uint64) {
	t.Helper()
	db := es.DB()
	floor := max(truncated, 1)
	if got := db.LastPosition(); got != m.pos {
		t.Fatalf("%s: LastPosition %d, model %d", what, got, m.pos)
	}
	names, err := db.ColumnFamilies()
	if err != nil {
		t.Fatalf("%s: ColumnFamilies: %v", what, err)
	}
	if diff := cmp.Diff(slices.Sorted(slices.Values(append([]string{"default"}, m.liveNames()...))), names); diff != "" {
		t.Fatalf("%s: families (-model +db):\n%s", what, diff)
	}
	want := map[string]map[string]string{"default": m.def}
	for n, f := range m.fams {
		want[n] = f.data
	}
	got := make(map[string]map[string]string)
	for _, n := range names {
		got[n] = contents(t, db, n)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("%s: contents (-model +db):\n%s", what, diff)
	}
	m.compareLog(t, what, db, floor)
	for _, s := range streamNames {
		m.compareStream(t, what, es, s, floor)
	}
}

func contents(t *rapid.T, db *pipeline.DB, name string) map[string]string {
	cf, err := db.ColumnFamily(name)
	if err != nil {
		t.Fatalf("ColumnFamily(%q): %v", name, err)
	}
	kv := make(map[string]string)
	err = db.View(func(tx *pipeline.Txn) error {
		it, err := tx.NewIterator(cf, pipeline.IterOptions{})
		if err != nil {
			return err
		}
		defer it.Close()
		for it.First(); it.Valid(); it.Next() {
			kv[string(it.Key())] = string(it.Value())
		}
		return it.Err()
	})
	if err != nil {
		t.Fatalf("read %q: %v", name, err)
	}
	return kv
}

func (m *model) compareLog(t *rapid.T, what string, db *pipeline.DB, floor uint64) {
	if floor > 1 {
		if _, err := db.ReadLog(floor-1, 1); !errors.Is(err, pipeline.ErrLogTruncated) {
			t.Fatalf("%s: ReadLog(%d) below the truncation: %v, want ErrLogTruncated", what, floor-1, err)
		}
	}
	next := floor
	for next <= m.pos {
		es, err := db.ReadLog(next, 512)
		if err != nil {
			t.Fatalf("%s: ReadLog(%d): %v", what, next, err)
		}
		if len(es) == 0 {
			t.Fatalf("%s: ReadLog(%d) empty below LastPosition %d", what, next, m.pos)
		}
		for _, e := range es {
			if e.Position != next {
				t.Fatalf("%s: log position %d where %d was due", what, e.Position, next)
			}
			var want []pipeline.FamilyChange
			if c, ok := m.changes[e.Position]; ok {
				want = []pipeline.FamilyChange{c}
			}
			if diff := cmp.Diff(want, e.Families); diff != "" {
				t.Fatalf("%s: family changes at position %d (-model +log):\n%s", what, e.Position, diff)
			}
			next++
		}
	}
}

func (m *model) compareStream(t *rapid.T, what string, es *eventstore.Store, s string, floor uint64) {
	ids, pos := m.streams[s], m.evPos[s]
	first := 0
	for first < len(pos) && pos[first] < floor {
		first++
	}
	evs, err := es.ReadStream(context.Background(), s, uint64(first), 1<<10)
	if err != nil {
		t.Fatalf("%s: ReadStream(%s, %d): %v", what, s, first, err)
	}
	var got []string
	for i, e := range evs {
		if e.Revision != uint64(first+i) || e.Stream != s {
			t.Fatalf("%s: stream %s event %d is %s@%d", what, s, first+i, e.Stream, e.Revision)
		}
		got = append(got, e.ID)
	}
	if diff := cmp.Diff(ids[first:], got, cmp.Comparer(func(a, b []string) bool { return slices.Equal(a, b) })); diff != "" {
		t.Fatalf("%s: stream %s from revision %d (-model +db):\n%s", what, s, first, diff)
	}
}

// follower is a subscription that checks it sees every position once, in order.
type follower struct {
	sub     *pipeline.Subscription
	cancel  context.CancelFunc
	done    <-chan struct{}
	mu      sync.Mutex
	last    uint64
	bad     error
	changed chan struct{} // closed and replaced on every delivery
}

func follow(t *rapid.T, db *pipeline.DB, after uint64) *follower {
	f := &follower{last: after, changed: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	sub, err := db.Subscribe(ctx, after, func(e pipeline.LogEntry) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		if e.Position != f.last+1 && f.bad == nil {
			f.bad = fmt.Errorf("subscription got position %d after %d", e.Position, f.last)
		}
		f.last = e.Position
		close(f.changed)
		f.changed = make(chan struct{})
		return nil
	})
	if err != nil {
		cancel()
		t.Fatalf("Subscribe: %v", err)
	}
	f.sub, f.cancel, f.done = sub, cancel, sub.Done()
	return f
}

// caughtUp waits until the subscription has delivered position pos.
func (f *follower) caughtUp(t *rapid.T, pos uint64) {
	timeout := time.After(deadline)
	for {
		f.mu.Lock()
		last, bad, changed := f.last, f.bad, f.changed
		f.mu.Unlock()
		if bad != nil {
			t.Fatalf("%v", bad)
		}
		if last >= pos {
			if last > pos {
				t.Fatalf("subscription at %d, past the last position %d", last, pos)
			}
			return
		}
		select {
		case <-changed:
		case <-f.done:
			t.Fatalf("subscription ended at %d (want %d): %v", last, pos, f.sub.Wait())
		case <-timeout:
			t.Fatalf("subscription stuck at %d, want %d", last, pos)
		}
	}
}

// stop ends the subscription before Close and returns where it got to.
func (f *follower) stop(t *rapid.T) uint64 {
	if err := f.sub.Close(); err != nil {
		t.Fatalf("subscription: %v", err)
	}
	f.cancel()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.bad != nil {
		t.Fatalf("%v", f.bad)
	}
	return f.last
}
