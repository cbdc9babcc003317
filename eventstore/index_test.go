package eventstore_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/pipeline"
)

// allIndexes declares every kind: type, category, tag, and a selector keying an event
// by the first byte of its data.
var allIndexes = eventstore.Config{Indexes: []eventstore.Index{
	eventstore.TypeIndex(), eventstore.CategoryIndex(), eventstore.TagIndex(),
	eventstore.SelectorIndex("initial", func(_ string, e eventstore.Event) []string {
		if len(e.Data) == 0 {
			return nil
		}
		return []string{string(e.Data[:1])}
	}),
}}

// openIndexed opens a database in dir with a store declaring cfg.
func openIndexed(t testing.TB, dir string, cfg eventstore.Config) (*pipeline.DB, *eventstore.Store) {
	t.Helper()
	db, err := pipeline.Open(dir, pipeline.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	es, err := eventstore.NewWithConfig(ctx, db, cfg)
	if err != nil {
		t.Fatalf("NewWithConfig: %v", err)
	}
	return db, es
}

// indexRecount returns the events of the log's streams that under keys by value, in log
// order, read with ReadAll: what ReadIndex must return.
func indexRecount(t *testing.T, es *eventstore.Store, under func(eventstore.RecordedEvent) bool) []eventstore.RecordedEvent {
	t.Helper()
	all, err := es.ReadAll(ctx, eventstore.At{Position: es.DB().FirstPosition()}, eventstore.ToEnd, eventstore.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var out []eventstore.RecordedEvent
	for _, e := range all {
		if e.Stream != "" && under(e) {
			out = append(out, e)
		}
	}
	return out
}

// places reduces events to their log places, for diffs.
func places(evs []eventstore.RecordedEvent) []eventstore.At {
	out := make([]eventstore.At, len(evs))
	for i, e := range evs {
		out[i] = eventstore.At{Position: e.Position, Index: e.Index}
	}
	return out
}

func verifyOK(t *testing.T, es *eventstore.Store) eventstore.VerifyReport {
	t.Helper()
	r, err := es.Verify(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK() {
		t.Fatalf("Verify: %d problems: %q", r.ProblemCount, r.Problems)
	}
	return r
}

func TestIndexConfigValidate(t *testing.T) {
	sel := func(string, eventstore.Event) []string { return nil }
	for _, c := range []struct {
		name string
		cfg  eventstore.Config
		arg  string
	}{
		{"empty name", eventstore.Config{Indexes: []eventstore.Index{{Kind: eventstore.ByType}}}, "Indexes[0].Name"},
		{"bad byte", eventstore.Config{Indexes: []eventstore.Index{{Name: "a b", Kind: eventstore.ByType}}}, "Indexes[0].Name"},
		{"twice", eventstore.Config{Indexes: []eventstore.Index{eventstore.TypeIndex(), eventstore.TypeIndex()}}, "Indexes[1].Name"},
		{"no kind", eventstore.Config{Indexes: []eventstore.Index{{Name: "x"}}}, "Indexes[0].Kind"},
		{"selector without Select", eventstore.Config{Indexes: []eventstore.Index{{Name: "x", Kind: eventstore.BySelector}}}, "Indexes[0].Select"},
		{"Select on a type index", eventstore.Config{Indexes: []eventstore.Index{{Name: "x", Kind: eventstore.ByType, Select: sel}}}, "Indexes[0].Select"},
		{"too many", eventstore.Config{Indexes: make([]eventstore.Index, eventstore.MaxIndexes+1)}, "Indexes"},
	} {
		wantArgumentError(t, c.name, c.cfg.Validate(), c.arg)
	}
	if err := allIndexes.Validate(); err != nil {
		t.Errorf("Validate of every kind: %v", err)
	}
}

// TestIndexReadsRacingAppends: while four writers append to streams of two
// categories, a reader follows each index value from Next of the last event it got;
// at the end every follower holds exactly the recount of the log (none missed, none
// twice), backward reads are the reverse, and Verify agrees.
func TestIndexReadsRacingAppends(t *testing.T) {
	_, es := openIndexed(t, filepath.Join(t.TempDir(), "db"), allIndexes)
	values := []struct {
		index, value string
		under        func(eventstore.RecordedEvent) bool
	}{
		{"type", "placed", func(e eventstore.RecordedEvent) bool { return e.Type == "placed" }},
		{"category", "order", func(e eventstore.RecordedEvent) bool { return e.Stream[:6] == "order-" }},
		{"tag", "vip", func(e eventstore.RecordedEvent) bool { return slices.Contains(e.Tags, "vip") }},
		{"initial", "b", func(e eventstore.RecordedEvent) bool { return len(e.Data) > 0 && e.Data[0] == 'b' }},
	}
	const writers, each = 4, 60
	var wg sync.WaitGroup
	done := make(chan struct{})
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				stream := fmt.Sprintf("order-%d", i%5)
				if w%2 == 1 {
					stream = fmt.Sprintf("invoice-%d", i%5)
				}
				e := eventstore.Event{Type: []string{"placed", "paid"}[i%2], Data: []byte{"ab"[(i/2)%2]}}
				if i%3 == 0 {
					e.Tags = []string{"vip"}
				}
				if _, err := es.Append(ctx, stream, eventstore.Any, e, eventstore.Event{Type: "noted"}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	followed := make([][]eventstore.RecordedEvent, len(values))
	from := make([]eventstore.At, len(values))
	follow := func() {
		for i, v := range values {
			page, err := es.ReadIndex(ctx, v.index, v.value, from[i], 7)
			if err != nil {
				t.Error(err)
				return
			}
			followed[i] = append(followed[i], page...)
			if len(page) > 0 {
				from[i] = eventstore.Next(page[len(page)-1])
			}
		}
	}
	go func() { wg.Wait(); close(done) }()
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		follow()
	}
	for range 200 { // drain: each round reads up to 7 more of each value
		follow()
	}
	for i, v := range values {
		want := indexRecount(t, es, v.under)
		if len(want) == 0 {
			t.Fatalf("%s %s: the recount is empty; the test appends none", v.index, v.value)
		}
		if diff := cmp.Diff(places(want), places(followed[i])); diff != "" {
			t.Errorf("%s %s followed during the appends (-recount +index):\n%s", v.index, v.value, diff)
		}
		got, err := es.ReadIndex(ctx, v.index, v.value, eventstore.Start, eventstore.ToEnd)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s %s read whole (-recount +index):\n%s", v.index, v.value, diff)
		}
		back, err := es.ReadIndexBackward(ctx, v.index, v.value, eventstore.End, eventstore.ToEnd)
		if err != nil {
			t.Fatal(err)
		}
		slices.Reverse(back)
		if diff := cmp.Diff(places(want), places(back)); diff != "" {
			t.Errorf("%s %s backward, reversed (-recount +index):\n%s", v.index, v.value, diff)
		}
	}
	r := verifyOK(t, es)
	if r.IndexEntries == 0 {
		t.Error("Verify checked no index entries")
	}
}

// TestIndexBuildAndAgreement: an index declared on a database with events is built
// over them; every later Store of the open database declares the same or adopts
// them; a reopen must declare what the database keeps.
func TestIndexBuildAndAgreement(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	db, es := openIndexed(t, dir, eventstore.Config{})
	seedStream(t, es, "cart-1", 5)
	if _, err := es.Append(ctx, "cart-2", eventstore.NoStream, eventstore.Event{Type: "other"}); err != nil {
		t.Fatal(err)
	}
	if _, err := es.SetStreamMetadata(ctx, "cart-1", eventstore.StreamMetadata{TruncateBefore: 2}); err != nil {
		t.Fatal(err)
	}
	if n, err := es.Reclaim(ctx); err != nil || n != 2 {
		t.Fatalf("Reclaim = %d, %v; want 2 records", n, err)
	}
	if _, err := eventstore.NewWithConfig(ctx, db, eventstore.Config{Indexes: []eventstore.Index{eventstore.TypeIndex()}}); !errors.Is(err, eventstore.ErrIndexMismatch) {
		t.Errorf("a second Store of the open database declaring an index = %v; want ErrIndexMismatch", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db, es = openIndexed(t, dir, eventstore.Config{Indexes: []eventstore.Index{eventstore.TypeIndex(), eventstore.CategoryIndex()}})
	seeded, err := es.ReadIndex(ctx, "type", "seeded", eventstore.Start, eventstore.ToEnd)
	if err != nil {
		t.Fatal(err)
	}
	var revs []uint64
	for _, e := range seeded {
		revs = append(revs, e.Revision)
	}
	if diff := cmp.Diff([]uint64{2, 3, 4}, revs); diff != "" { // 0 and 1 reclaimed before the build
		t.Errorf("the built type index's revisions (-want +got):\n%s", diff)
	}
	if got, err := es.ReadIndex(ctx, "category", "cart", eventstore.Start, eventstore.ToEnd); err != nil || len(got) != 4 {
		t.Errorf("the built category index holds %d events, %v; want 4", len(got), err)
	}
	verifyOK(t, es)
	adopted, err := eventstore.New(db)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(adopted.Indexes()); got != 2 {
		t.Errorf("a Store made with New adopts %d indexes, want 2", got)
	}
	if _, err := eventstore.NewWithConfig(ctx, db, eventstore.Config{Indexes: []eventstore.Index{eventstore.TagIndex()}}); !errors.Is(err, eventstore.ErrIndexMismatch) {
		t.Errorf("a Store declaring other indexes = %v; want ErrIndexMismatch", err)
	}
	if _, err := adopted.Append(ctx, "cart-2", eventstore.Any, eventstore.Event{Type: "seeded"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := es.ReadIndex(ctx, "type", "seeded", eventstore.Start, eventstore.ToEnd); len(got) != 4 {
		t.Errorf("after an adopting Store's append the type index holds %d seeded events, want 4", len(got))
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db2, err := pipeline.Open(dir, pipeline.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	var mm *eventstore.IndexMismatchError
	if _, err := eventstore.NewWithConfig(ctx, db2, eventstore.Config{Indexes: []eventstore.Index{eventstore.CategoryIndex()}}); !errors.As(err, &mm) || mm.Index != "type" {
		t.Errorf("reopening without an index the database keeps = %v; want an *IndexMismatchError naming type", err)
	}
	es2, err := eventstore.New(db2)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(es2.Indexes()); got != 2 {
		t.Errorf("New after a reopen adopts %d indexes, want the 2 the database keeps", got)
	}
	if err := db2.Close(); err != nil {
		t.Fatal(err)
	}

	// A read-only open declaring the indexes the database keeps reads them.
	ro, err := pipeline.OpenReadOnly(dir, pipeline.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	esro, err := eventstore.NewWithConfig(ctx, ro, eventstore.Config{Indexes: []eventstore.Index{eventstore.TypeIndex(), eventstore.CategoryIndex()}})
	if err != nil {
		t.Fatalf("NewWithConfig on a read-only open: %v", err)
	}
	if got, err := esro.ReadIndex(ctx, "type", "seeded", eventstore.Start, eventstore.ToEnd); err != nil || len(got) != 4 {
		t.Errorf("ReadIndex on a read-only open = %d events, %v; want 4", len(got), err)
	}
}

// TestIndexSelectorAndArguments: a selector's bad value fails the append naming it,
// writing nothing; a Store without a kept selector's function reads but refuses to
// append; reads name a bad index, value or limit.
func TestIndexSelectorAndArguments(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	db, es := openIndexed(t, dir, eventstore.Config{Indexes: []eventstore.Index{
		eventstore.SelectorIndex("sel", func(_ string, e eventstore.Event) []string { return []string{string(e.Data)} }),
	}})
	last := db.LastPosition()
	_, err := es.Append(ctx, "a", eventstore.Any, eventstore.Event{Type: "t", Data: []byte("ok")}, eventstore.Event{Type: "t"})
	wantArgumentError(t, "an empty selected value", err, `events[1]: index "sel" value`)
	if db.LastPosition() != last {
		t.Errorf("the refused append moved the log from %d to %d", last, db.LastPosition())
	}
	if _, err := es.Append(ctx, "a", eventstore.Any, eventstore.Event{Type: "t", Data: []byte("ok")}); err != nil {
		t.Fatal(err)
	}
	wantArgumentError(t, "an unknown index", func() error { _, err := es.ReadIndex(ctx, "nope", "x", eventstore.Start, 1); return err }(), "index")
	wantArgumentError(t, "an empty value", func() error { _, err := es.ReadIndex(ctx, "sel", "", eventstore.Start, 1); return err }(), "value")
	wantArgumentError(t, "a zero limit", func() error { _, err := es.ReadIndexBackward(ctx, "sel", "ok", eventstore.End, 0); return err }(), "limit")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db, es = openIndexed(t, dir, eventstore.Config{}) // adopts "sel" without its function
	if got, err := es.ReadIndex(ctx, "sel", "ok", eventstore.Start, eventstore.ToEnd); err != nil || len(got) != 1 {
		t.Errorf("ReadIndex through a Store without the selector = %d events, %v; want 1", len(got), err)
	}
	if _, err := es.Append(ctx, "a", eventstore.Any, eventstore.Event{Type: "t"}); !errors.Is(err, eventstore.ErrIndexMismatch) {
		t.Errorf("Append through a Store without the selector = %v; want ErrIndexMismatch", err)
	}
	if r := verifyOK(t, es); r.IndexEntries != 1 {
		t.Errorf("Verify checked %d index entries, want 1", r.IndexEntries)
	}
}

// TestIndexReclaimAndTruncation: Reclaim deletes the entries of the records it
// deletes, and the entries of positions TruncateLog removed; Verify agrees after each.
func TestIndexReclaimAndTruncation(t *testing.T) {
	db, es := openIndexed(t, filepath.Join(t.TempDir(), "db"), allIndexes)
	seedStream(t, es, "log-1", 6)
	seedStream(t, es, "log-2", 3)
	if _, err := es.SetStreamMetadata(ctx, "log-1", eventstore.StreamMetadata{MaxCount: 2}); err != nil {
		t.Fatal(err)
	}
	if n, err := es.Reclaim(ctx); err != nil || n != 4 {
		t.Fatalf("Reclaim = %d, %v; want 4", n, err)
	}
	count := func(value string) int {
		got, err := es.ReadIndex(ctx, "category", value, eventstore.Start, eventstore.ToEnd)
		if err != nil {
			t.Fatal(err)
		}
		return len(got)
	}
	if got := count("log"); got != 5 {
		t.Errorf("after Reclaim the category index holds %d events, want 5 (2 of log-1, 3 of log-2)", got)
	}
	before := verifyOK(t, es).IndexEntries
	log2, err := es.ReadStream(ctx, "log-2", 0, eventstore.ToEnd)
	if err != nil {
		t.Fatal(err)
	}
	cut := log2[1].Position // truncate below log-2's second event
	if _, err := db.Checkpoint(filepath.Join(t.TempDir(), "cp")); err != nil {
		t.Fatal(err)
	}
	if err := db.TruncateLog(cut); err != nil {
		t.Fatal(err)
	}
	if got := count("log"); got != 2 { // log-1's events came first: all truncated
		t.Errorf("after TruncateLog the category index reads %d events, want log-2's last 2", got)
	}
	if _, err := es.Reclaim(ctx); err != nil {
		t.Fatal(err)
	}
	if after := verifyOK(t, es).IndexEntries; after >= before {
		t.Errorf("Reclaim after TruncateLog left %d index entries of %d", after, before)
	}
}

// TestPositionAt: for every entry, PositionAt of its time is at or before it and no
// entry before the answer is as new.
func TestPositionAt(t *testing.T) {
	db, es := openIndexed(t, filepath.Join(t.TempDir(), "db"), eventstore.Config{})
	seedStream(t, es, "clock", 20)
	for p := db.FirstPosition(); p <= db.LastPosition(); p++ {
		e, err := db.Entry(p)
		if err != nil {
			t.Fatal(err)
		}
		at, err := es.PositionAt(ctx, e.Time)
		if err != nil {
			t.Fatal(err)
		}
		if at.Position > p || at.Index != 0 {
			t.Fatalf("PositionAt(time of %d) = %+v, after it", p, at)
		}
		if at.Position > 1 {
			prev, err := db.Entry(at.Position - 1)
			if err != nil {
				t.Fatal(err)
			}
			if !prev.Time.Before(e.Time) {
				t.Fatalf("PositionAt(time of %d) = %d, but entry %d is as new", p, at.Position, at.Position-1)
			}
		}
	}
	if at, err := es.PositionAt(ctx, time.Now().Add(time.Hour)); err != nil || at.Position != db.LastPosition()+1 {
		t.Errorf("PositionAt(the future) = %+v, %v; want just past the last position", at, err)
	}
}
