package eventstore_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/pipeline"
)

// mixedLog commits, in this order: orders and payments streams (several events per
// commit now and then), events of no stream, and plain writes without events. It
// returns every event as the log holds it.
func mixedLog(t testing.TB, db *pipeline.DB, es *eventstore.Store) []eventstore.RecordedEvent {
	t.Helper()
	for i := range 12 {
		var err error
		switch i % 4 {
		case 0:
			_, err = es.Append(ctx, fmt.Sprintf("order-%d", i%3), eventstore.Any,
				eventstore.Event{Type: "OrderPlaced", Data: []byte(fmt.Sprint(i))}, eventstore.Event{Type: "OrderNoted"})
		case 1:
			_, err = es.Append(ctx, "payment-1", eventstore.Any, eventstore.Event{Type: "PaymentTaken"})
		case 2:
			err = db.Update(ctx, func(tx *pipeline.Txn) error { return tx.AddEvents(pipeline.Event{Type: "Tick"}) })
		case 3:
			put(t, db, db.Default(), fmt.Sprint(i), "v")
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	var all []eventstore.RecordedEvent
	for _, e := range wholeLog(t, db) {
		all = append(all, e.Events...)
	}
	return all
}

// wholeLog reads every published log entry.
func wholeLog(t testing.TB, db *pipeline.DB) []pipeline.LogEntry {
	t.Helper()
	es, err := db.ReadLog(1, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	return es
}

func matching(all []eventstore.RecordedEvent, f eventstore.Filter) []eventstore.RecordedEvent {
	var out []eventstore.RecordedEvent
	for i := range all {
		if f.Match(&all[i]) {
			out = append(out, all[i])
		}
	}
	return out
}

var filters = map[string]eventstore.Filter{
	"none":           {},
	"stream prefix":  {StreamPrefix: "order-"},
	"type prefix":    {TypePrefix: "Order"},
	"stream regexp":  {StreamRegexp: regexp.MustCompile(`^(order-1|payment-\d)$`)},
	"type regexp":    {TypeRegexp: regexp.MustCompile(`Taken$|^Tick$`)},
	"both":           {StreamPrefix: "order-", TypePrefix: "OrderNo"},
	"matches none":   {StreamPrefix: "nobody"},
	"stream, no typ": {StreamRegexp: regexp.MustCompile(`.`)},
}

// TestReadAll: forward and backward reads in pages of every size return exactly the
// matching events in log order (or its reverse), resuming with Next and Prev, under
// every filter; ToEnd reads them all at once.
func TestReadAll(t *testing.T) {
	db, es, _ := openStore(t, pipeline.Config{})
	all := mixedLog(t, db, es)
	for name, f := range filters {
		t.Run(name, func(t *testing.T) {
			want := matching(all, f)
			got, err := es.ReadAll(ctx, eventstore.Start, eventstore.ToEnd, f)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("ReadAll ToEnd (-want +got):\n%s", diff)
			}
			back, err := es.ReadAllBackward(ctx, eventstore.End, eventstore.ToEnd, f)
			if err != nil {
				t.Fatal(err)
			}
			rev := slices.Clone(want)
			slices.Reverse(rev)
			if diff := cmp.Diff(rev, back); diff != "" {
				t.Fatalf("ReadAllBackward ToEnd (-want +got):\n%s", diff)
			}
			for _, page := range []int{1, 2, 3, 7} {
				var fwd []eventstore.RecordedEvent
				for from := eventstore.Start; ; {
					p, err := es.ReadAll(ctx, from, page, f)
					if err != nil {
						t.Fatal(err)
					}
					if len(p) > page {
						t.Fatalf("page of %d events, limit %d", len(p), page)
					}
					if len(p) == 0 {
						break
					}
					fwd = append(fwd, p...)
					from = eventstore.Next(p[len(p)-1])
				}
				if diff := cmp.Diff(want, fwd); diff != "" {
					t.Fatalf("forward pages of %d (-want +got):\n%s", page, diff)
				}
				var bwd []eventstore.RecordedEvent
				for from := eventstore.End; ; {
					p, err := es.ReadAllBackward(ctx, from, page, f)
					if err != nil {
						t.Fatal(err)
					}
					if len(p) == 0 {
						break
					}
					bwd = append(bwd, p...)
					from = eventstore.Prev(p[len(p)-1])
					if from == eventstore.Start {
						break
					}
				}
				if diff := cmp.Diff(rev, bwd); diff != "" {
					t.Fatalf("backward pages of %d (-want +got):\n%s", page, diff)
				}
			}
		})
	}
}

// TestReadAllTruncated: a forward read below the truncation point fails with
// ErrLogTruncated; a backward read stops at it.
func TestReadAllTruncated(t *testing.T) {
	db, es, _ := openStore(t, pipeline.Config{})
	all := mixedLog(t, db, es)
	covered, err := db.Checkpoint(filepath.Join(t.TempDir(), "cp"))
	if err != nil {
		t.Fatal(err)
	}
	cut := covered / 2
	if err := db.TruncateLog(cut); err != nil {
		t.Fatal(err)
	}
	if _, err := es.ReadAll(ctx, eventstore.Start, 10, eventstore.Filter{}); !errors.Is(err, pipeline.ErrLogTruncated) {
		t.Errorf("ReadAll below the truncation = %v, want ErrLogTruncated", err)
	}
	got, err := es.ReadAllBackward(ctx, eventstore.End, eventstore.ToEnd, eventstore.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var kept []eventstore.RecordedEvent
	for _, e := range all {
		if e.Position >= cut {
			kept = append([]eventstore.RecordedEvent{e}, kept...)
		}
	}
	if diff := cmp.Diff(kept, got); diff != "" {
		t.Errorf("backward over a truncated log (-want +got):\n%s", diff)
	}
}

// TestReadAllArguments: limits outside 1..1<<20 other than ToEnd are refused.
func TestReadAllArguments(t *testing.T) {
	_, es, _ := openStore(t, pipeline.Config{})
	for _, limit := range []int{0, -2, 1<<20 + 1} {
		_, err := es.ReadAll(ctx, eventstore.Start, limit, eventstore.Filter{})
		wantArgumentError(t, fmt.Sprintf("ReadAll limit %d", limit), err, "limit")
		_, err = es.ReadAllBackward(ctx, eventstore.End, limit, eventstore.Filter{})
		wantArgumentError(t, fmt.Sprintf("ReadAllBackward limit %d", limit), err, "limit")
	}
}

// TestMaxAgeOverATruncatedLog: a stream with MaxAge whose oldest revisions' entries
// TruncateLog removed still reads from its first revision still in the log, and
// Reclaim still runs: the age search no longer reads the commit time of revisions
// outside the read, failing the whole read with ErrLogTruncated.
func TestMaxAgeOverATruncatedLog(t *testing.T) {
	db, es, _ := openStore(t, pipeline.Config{})
	var positions []uint64
	for i := range 4 {
		res, err := es.Append(ctx, "s", eventstore.Any, eventstore.Event{Type: "E", Data: []byte{byte(i)}})
		if err != nil {
			t.Fatal(err)
		}
		positions = append(positions, res.Position)
	}
	if _, err := es.SetStreamMetadata(ctx, "s", eventstore.StreamMetadata{MaxAge: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Checkpoint(filepath.Join(t.TempDir(), "cp")); err != nil {
		t.Fatal(err)
	}
	if err := db.TruncateLog(positions[0] + 1); err != nil {
		t.Fatal(err)
	}
	got, err := es.ReadStream(ctx, "s", 2, 10)
	if err != nil {
		t.Fatalf("ReadStream from revision 2 over a log truncated below revision 1: %v", err)
	}
	if len(got) != 2 || got[0].Revision != 2 || got[1].Revision != 3 {
		t.Errorf("ReadStream from 2 = %+v, want revisions 2 and 3", got)
	}
	if _, err := es.Reclaim(ctx); err != nil {
		t.Errorf("Reclaim over a truncated log: %v", err)
	}
}
