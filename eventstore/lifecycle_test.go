package eventstore_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/pipeline"
)

// revisions reads the whole stream both ways and returns its revisions (forward),
// failing if the two directions disagree.
func revisions(t testing.TB, es *eventstore.Store, stream string) []uint64 {
	t.Helper()
	fwd := streamEvents(t, es, stream)
	back, err := es.ReadStreamBackward(ctx, stream, ^uint64(0), eventstore.ToEnd)
	if err != nil {
		t.Fatalf("ReadStreamBackward(%s): %v", stream, err)
	}
	var revs []uint64
	for i, e := range fwd {
		revs = append(revs, e.Revision)
		if b := back[len(back)-1-i]; b.Revision != e.Revision {
			t.Fatalf("%s: backward read disagrees at %d: %d vs %d", stream, i, b.Revision, e.Revision)
		}
	}
	if len(back) != len(fwd) {
		t.Fatalf("%s: %d events forward, %d backward", stream, len(fwd), len(back))
	}
	return revs
}

func mustAppend(t testing.TB, es *eventstore.Store, stream string, exp eventstore.ExpectedRevision) eventstore.AppendResult {
	t.Helper()
	res, err := es.Append(ctx, stream, exp, eventstore.Event{Type: "t"})
	if err != nil {
		t.Fatalf("Append(%s, %v): %v", stream, exp, err)
	}
	return res
}

// TestSoftDelete: a soft-deleted stream reads as absent; an append recreates it with
// revisions continuing and the old ones hidden; a stream subscription follows it
// across the delete; the expectations see it as no stream.
func TestSoftDelete(t *testing.T) {
	_, es, _ := openStore(t, pipeline.Config{})
	seedStream(t, es, "s", 3)
	c := newCollector(4)
	sub, err := es.SubscribeToStream(ctx, "s", 0, c.handle)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if _, err := es.DeleteStream(ctx, "s", eventstore.Revision(1)); !errors.Is(err, eventstore.ErrWrongExpectedVersion) {
		t.Errorf("DeleteStream with a stale revision = %v, want a wrong expected version", err)
	}
	if _, err := es.DeleteStream(ctx, "s", eventstore.Revision(2)); err != nil {
		t.Fatal(err)
	}
	if revs := revisions(t, es, "s"); len(revs) != 0 {
		t.Fatalf("deleted stream reads %v, want nothing", revs)
	}
	if pos, err := es.DeleteStream(ctx, "s", eventstore.Any); err != nil || pos != 0 {
		t.Errorf("second delete = %d, %v; want a no-op", pos, err)
	}
	_, err = es.Append(ctx, "s", eventstore.Revision(2), eventstore.Event{Type: "t"})
	var we *eventstore.WrongExpectedVersionError
	if !errors.As(err, &we) || we.Actual != eventstore.NoStream {
		t.Errorf("Append expecting the deleted revision = %v, want actual NoStream", err)
	}
	if res := mustAppend(t, es, "s", eventstore.NoStream); res.NextExpectedRevision != 3 {
		t.Errorf("recreating append at revision %d, want 3 (revisions continue)", res.NextExpectedRevision)
	}
	if diff := cmp.Diff([]uint64{3}, revisions(t, es, "s")); diff != "" {
		t.Errorf("recreated stream (-want +got):\n%s", diff)
	}
	wait(t, func() { <-c.done }, "the subscription's events")
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	var got []uint64
	for _, e := range c.got {
		got = append(got, e.Revision)
	}
	if diff := cmp.Diff([]uint64{0, 1, 2, 3}, got); diff != "" {
		t.Errorf("subscription across the delete (-want +got):\n%s", diff)
	}
}

// TestTombstone: a tombstoned stream refuses appends, reads, deletes and metadata with
// a *StreamDeletedError, also after a reopen; a name with no events can be tombstoned.
func TestTombstone(t *testing.T) {
	db, es, dir := openStore(t, pipeline.Config{})
	seedStream(t, es, "s", 2)
	if _, err := es.TombstoneStream(ctx, "s", eventstore.NoStream); !errors.Is(err, eventstore.ErrWrongExpectedVersion) {
		t.Errorf("TombstoneStream expecting no stream = %v, want a wrong expected version", err)
	}
	if _, err := es.TombstoneStream(ctx, "s", eventstore.StreamExists); err != nil {
		t.Fatal(err)
	}
	if _, err := es.TombstoneStream(ctx, "never", eventstore.NoStream); err != nil {
		t.Fatal(err)
	}
	check := func(es *eventstore.Store, when string) {
		t.Helper()
		for _, stream := range []string{"s", "never"} {
			calls := map[string]error{}
			_, calls["Append"] = es.Append(ctx, stream, eventstore.Any, eventstore.Event{Type: "t"})
			_, calls["ReadStream"] = es.ReadStream(ctx, stream, 0, 10)
			_, calls["ReadStreamBackward"] = es.ReadStreamBackward(ctx, stream, 10, 10)
			_, calls["DeleteStream"] = es.DeleteStream(ctx, stream, eventstore.Any)
			_, calls["TombstoneStream"] = es.TombstoneStream(ctx, stream, eventstore.Any)
			_, calls["SetStreamMetadata"] = es.SetStreamMetadata(ctx, stream, eventstore.StreamMetadata{MaxCount: 1})
			_, calls["GetStreamMetadata"] = es.GetStreamMetadata(ctx, stream)
			for call, err := range calls {
				var de *eventstore.StreamDeletedError
				if !errors.As(err, &de) || de.Stream != stream || !errors.Is(err, eventstore.ErrStreamDeleted) {
					t.Errorf("%s: %s(%s) = %v, want a *StreamDeletedError", when, call, stream, err)
				}
			}
		}
	}
	check(es, "after the tombstone")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	_, es = openStoreAt(t, dir, pipeline.Config{})
	check(es, "after a reopen")
}

// TestStreamMetadata: MaxCount, TruncateBefore and MaxAge bound what reads return at
// once, both ways; a soft delete's hidden revisions stay hidden when metadata changes.
func TestStreamMetadata(t *testing.T) {
	_, es, _ := openStore(t, pipeline.Config{})
	seedStream(t, es, "s", 6)
	cases := []struct {
		md   eventstore.StreamMetadata
		want []uint64
	}{
		{eventstore.StreamMetadata{}, []uint64{0, 1, 2, 3, 4, 5}},
		{eventstore.StreamMetadata{MaxCount: 2}, []uint64{4, 5}},
		{eventstore.StreamMetadata{TruncateBefore: 3}, []uint64{3, 4, 5}},
		{eventstore.StreamMetadata{TruncateBefore: 1, MaxCount: 4}, []uint64{2, 3, 4, 5}},
		{eventstore.StreamMetadata{MaxCount: 100}, []uint64{0, 1, 2, 3, 4, 5}},
		{eventstore.StreamMetadata{MaxAge: 1000 * time.Hour}, []uint64{0, 1, 2, 3, 4, 5}},
		{eventstore.StreamMetadata{MaxAge: time.Nanosecond}, nil},
		{eventstore.StreamMetadata{TruncateBefore: 9}, nil},
	}
	for _, tc := range cases {
		if _, err := es.SetStreamMetadata(ctx, "s", tc.md); err != nil {
			t.Fatal(err)
		}
		if got, err := es.GetStreamMetadata(ctx, "s"); err != nil || got != tc.md {
			t.Errorf("GetStreamMetadata = %+v, %v; want %+v", got, err, tc.md)
		}
		if diff := cmp.Diff(tc.want, revisions(t, es, "s")); diff != "" {
			t.Errorf("%+v (-want +got):\n%s", tc.md, diff)
		}
	}
	if evs, err := es.ReadStreamBackward(ctx, "s", 1, 10); err != nil || len(evs) != 0 {
		t.Errorf("backward from below TruncateBefore = %v, %v; want nothing", evs, err)
	}
	_, err := es.SetStreamMetadata(ctx, "s", eventstore.StreamMetadata{MaxAge: -time.Second})
	wantArgumentError(t, "negative MaxAge", err, "MaxAge")

	seedStream(t, es, "d", 3)
	if _, err := es.DeleteStream(ctx, "d", eventstore.Any); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, es, "d", eventstore.NoStream)
	if _, err := es.SetStreamMetadata(ctx, "d", eventstore.StreamMetadata{}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]uint64{3}, revisions(t, es, "d")); diff != "" {
		t.Errorf("metadata cleared on a recreated stream (-want +got):\n%s", diff)
	}
}

// TestReclaim: Reclaim deletes the records that metadata, soft deletes and tombstones
// hide, and nothing else: reads are the same before and after, a second pass finds
// nothing, and a rebuild from the log reproduces every stream's state.
func TestReclaim(t *testing.T) {
	db, es, _ := openStore(t, pipeline.Config{})
	seedStream(t, es, "count", 10)
	seedStream(t, es, "soft", 4)
	seedStream(t, es, "gone", 3)
	seedStream(t, es, "kept", 2)
	if _, err := es.SetStreamMetadata(ctx, "count", eventstore.StreamMetadata{MaxCount: 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := es.DeleteStream(ctx, "soft", eventstore.Any); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, es, "soft", eventstore.NoStream)
	if _, err := es.TombstoneStream(ctx, "gone", eventstore.Any); err != nil {
		t.Fatal(err)
	}
	before := map[string][]uint64{}
	for _, s := range []string{"count", "soft", "kept"} {
		before[s] = revisions(t, es, s)
	}
	n, err := es.Reclaim(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := 7 + 4 + 3; n != want {
		t.Errorf("Reclaim deleted %d records, want %d", n, want)
	}
	for s, want := range before {
		if diff := cmp.Diff(want, revisions(t, es, s)); diff != "" {
			t.Errorf("%s after Reclaim (-before +after):\n%s", s, diff)
		}
	}
	if n, err := es.Reclaim(ctx); err != nil || n != 0 {
		t.Errorf("second Reclaim = %d, %v; want nothing left", n, err)
	}
	rebuilt, err := db.Rebuild(ctx, filepath.Join(t.TempDir(), "rebuilt"), pipeline.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer rebuilt.Close()
	res, err := eventstore.New(rebuilt)
	if err != nil {
		t.Fatal(err)
	}
	for s, want := range before {
		if diff := cmp.Diff(want, revisions(t, res, s)); diff != "" {
			t.Errorf("%s rebuilt (-want +got):\n%s", s, diff)
		}
	}
	if _, err := res.Append(ctx, "gone", eventstore.Any, eventstore.Event{Type: "t"}); !errors.Is(err, eventstore.ErrStreamDeleted) {
		t.Errorf("tombstone after Rebuild: Append = %v, want ErrStreamDeleted", err)
	}
}

// TestReclaimer: the background reclaimer deletes what metadata hides without being
// asked, and ends with Close and with the database.
func TestReclaimer(t *testing.T) {
	db, es, _ := openStore(t, pipeline.Config{})
	seedStream(t, es, "s", 20)
	set, err := es.SetStreamMetadata(ctx, "s", eventstore.StreamMetadata{MaxCount: 5})
	if err != nil {
		t.Fatal(err)
	}
	r, err := es.StartReclaimer(ctx, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	// Nothing else writes: the next position is the reclaimer's delete commit.
	if err := db.WaitForPosition(wctx, set+1); err != nil {
		t.Fatalf("no reclaim commit: %v", err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if n := r.Reclaimed(); n != 15 {
		t.Errorf("Reclaimed = %d, want 15", n)
	}
	if diff := cmp.Diff([]uint64{15, 16, 17, 18, 19}, revisions(t, es, "s")); diff != "" {
		t.Errorf("after the reclaimer (-want +got):\n%s", diff)
	}
	_, err = es.StartReclaimer(ctx, time.Microsecond)
	wantArgumentError(t, "StartReclaimer every 1µs", err, "every")
	r, err = es.StartReclaimer(ctx, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Errorf("Close of a reclaimer whose database closed = %v", err)
	}
}

// TestDeleteRacingAppend: a soft delete and an append of the same stream, racing, end
// as one of the two serial orders: append then delete (the stream reads empty) or
// delete then append (it reads the new event alone), never a mix.
func TestDeleteRacingAppend(t *testing.T) {
	for _, pol := range policies {
		t.Run(pol, func(t *testing.T) {
			_, es, _ := openStore(t, pipeline.Config{Validation: pol, Lanes: 2})
			orders := map[string]int{}
			for round := range 30 {
				stream := fmt.Sprintf("s%d", round)
				seedStream(t, es, stream, 2)
				start := make(chan struct{})
				errs := make([]error, 2)
				var wg sync.WaitGroup
				wg.Go(func() {
					<-start
					_, errs[0] = es.Append(ctx, stream, eventstore.Any, eventstore.Event{ID: "new", Type: "t"})
				})
				wg.Go(func() {
					<-start
					_, errs[1] = es.DeleteStream(ctx, stream, eventstore.Any)
				})
				close(start)
				wait(t, wg.Wait, "the racing append and delete")
				for i, err := range errs {
					if err != nil {
						t.Fatalf("round %d, call %d: %v", round, i, err)
					}
				}
				switch evs := streamEvents(t, es, stream); {
				case len(evs) == 0:
					orders["append, delete"]++
				case len(evs) == 1 && evs[0].ID == "new" && evs[0].Revision == 2:
					orders["delete, append"]++
				default:
					t.Fatalf("round %d: stream reads %+v, neither serial order", round, evs)
				}
			}
			t.Logf("orders seen: %v", orders)
		})
	}
}
