package eventstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/internal/testhooks"
	"github.com/rockline/rockline/pipeline"
)

// revisionsEqual lets cmp compare ExpectedRevision, whose fields are unexported.
var revisionsEqual = cmp.Comparer(func(a, b eventstore.ExpectedRevision) bool { return a == b })

// seedStream appends n events (no IDs) to stream, one commit each.
func seedStream(t testing.TB, es *eventstore.Store, stream string, n int) {
	t.Helper()
	for i := range n {
		exp := eventstore.NoStream
		if i > 0 {
			exp = eventstore.Revision(uint64(i - 1))
		}
		if _, err := es.Append(context.Background(), stream, exp, pipeline.Event{Type: "seeded", Data: []byte(fmt.Sprint(i))}); err != nil {
			t.Fatalf("seed %s event %d: %v", stream, i, err)
		}
	}
}

// streamEvents reads the whole stream forward.
func streamEvents(t testing.TB, es *eventstore.Store, stream string) []eventstore.RecordedEvent {
	t.Helper()
	evs, err := es.ReadStream(ctx, stream, 0, 1<<20)
	if err != nil {
		t.Fatalf("ReadStream(%s): %v", stream, err)
	}
	return evs
}

// wantArgumentError fails unless err is an *ArgumentError naming arg (and matching
// ErrInvalidArgument).
func wantArgumentError(t testing.TB, what string, err error, arg string) {
	t.Helper()
	var ae *pipeline.ArgumentError
	if !errors.As(err, &ae) {
		t.Errorf("%s: error %v, want an *ArgumentError for %s", what, err, arg)
		return
	}
	if ae.Arg != arg {
		t.Errorf("%s: ArgumentError names %q (%v), want %q", what, ae.Arg, err, arg)
	}
	if !errors.Is(err, pipeline.ErrInvalidArgument) {
		t.Errorf("%s: %v does not match ErrInvalidArgument", what, err)
	}
}

// TestStreamExpectedRevision is the truth table of the four expectations against a
// missing stream and streams whose last revision is 0 and 2, through Store.Append and
// Store.AppendTxn: success appends at the next revision; failure is a
// *WrongExpectedVersionError with the stream's actual state and the expectation, and
// writes nothing.
func TestStreamExpectedRevision(t *testing.T) {
	type state struct {
		name   string
		events int // events in the stream before the append
	}
	none, rev0, rev2 := state{"no stream", 0}, state{"last revision 0", 1}, state{"last revision 2", 3}
	cases := []struct {
		state    state
		expected eventstore.ExpectedRevision
		ok       bool
	}{
		{none, eventstore.Any, true},
		{none, eventstore.NoStream, true},
		{none, eventstore.StreamExists, false},
		{none, eventstore.Revision(0), false},
		{none, eventstore.Revision(2), false},
		{rev0, eventstore.Any, true},
		{rev0, eventstore.NoStream, false},
		{rev0, eventstore.StreamExists, true},
		{rev0, eventstore.Revision(0), true},
		{rev0, eventstore.Revision(1), false},
		{rev0, eventstore.Revision(2), false},
		{rev2, eventstore.Any, true},
		{rev2, eventstore.NoStream, false},
		{rev2, eventstore.StreamExists, true},
		{rev2, eventstore.Revision(0), false},
		{rev2, eventstore.Revision(1), false},
		{rev2, eventstore.Revision(2), true},
		{rev2, eventstore.Revision(3), false},
	}
	db, es, _ := openStore(t, pipeline.Config{})
	appenders := map[string]func(db *pipeline.DB, stream string, exp eventstore.ExpectedRevision, ev pipeline.Event) (eventstore.AppendResult, error){
		"Store.Append": func(db *pipeline.DB, stream string, exp eventstore.ExpectedRevision, ev pipeline.Event) (eventstore.AppendResult, error) {
			return es.Append(context.Background(), stream, exp, ev)
		},
		"Store.AppendTxn": func(db *pipeline.DB, stream string, exp eventstore.ExpectedRevision, ev pipeline.Event) (eventstore.AppendResult, error) {
			tx := db.Begin()
			if err := es.AppendTxn(tx, stream, exp, ev); err != nil {
				tx.Discard()
				return eventstore.AppendResult{}, err
			}
			pos, err := tx.CommitPosition(context.Background())
			return eventstore.AppendResult{Position: pos}, err
		},
	}
	for via, appendFn := range appenders {
		for i, tc := range cases {
			t.Run(fmt.Sprintf("%s/%s/%s", via, tc.state.name, tc.expected), func(t *testing.T) {
				stream := fmt.Sprintf("%s-%d", via, i)
				seedStream(t, es, stream, tc.state.events)
				before, last := streamEvents(t, es, stream), db.LastPosition()
				ev := pipeline.Event{Type: "appended", Data: []byte("x")}
				res, err := appendFn(db, stream, tc.expected, ev)
				if !tc.ok {
					wantActual := eventstore.NoStream
					if tc.state.events > 0 {
						wantActual = eventstore.Revision(uint64(tc.state.events - 1))
					}
					var we *eventstore.WrongExpectedVersionError
					if !errors.As(err, &we) {
						t.Fatalf("error %v, want a *WrongExpectedVersionError", err)
					}
					want := &eventstore.WrongExpectedVersionError{Stream: stream, Expected: tc.expected, Actual: wantActual}
					if diff := cmp.Diff(want, we, revisionsEqual); diff != "" {
						t.Errorf("error (-want +got):\n%s", diff)
					}
					if !errors.Is(err, eventstore.ErrWrongExpectedVersion) {
						t.Errorf("%v does not match ErrWrongExpectedVersion", err)
					}
					if got := db.LastPosition(); got != last {
						t.Errorf("LastPosition %d -> %d after a refused append", last, got)
					}
					if diff := cmp.Diff(before, streamEvents(t, es, stream)); diff != "" {
						t.Errorf("stream changed by a refused append (-before +after):\n%s", diff)
					}
					return
				}
				if err != nil {
					t.Fatalf("append: %v", err)
				}
				if res.Position != last+1 || db.LastPosition() != last+1 {
					t.Errorf("position %d, LastPosition %d; want both %d", res.Position, db.LastPosition(), last+1)
				}
				if via == "Store.Append" && res.NextExpectedRevision != uint64(tc.state.events) {
					t.Errorf("NextExpectedRevision = %d, want %d", res.NextExpectedRevision, tc.state.events)
				}
				after := streamEvents(t, es, stream)
				if len(after) != tc.state.events+1 {
					t.Fatalf("stream has %d events, want %d", len(after), tc.state.events+1)
				}
				got := after[len(after)-1]
				if got.Revision != uint64(tc.state.events) || got.Position != last+1 || got.Type != ev.Type {
					t.Errorf("appended event = %+v, want revision %d at position %d", got, tc.state.events, last+1)
				}
			})
		}
	}
	t.Run("zero ExpectedRevision", func(t *testing.T) {
		last := db.LastPosition()
		_, err := es.Append(context.Background(), "zero", eventstore.ExpectedRevision{}, pipeline.Event{Type: "t"})
		wantArgumentError(t, "Store.Append", err, "expected")
		tx := db.Begin()
		defer tx.Discard()
		wantArgumentError(t, "Store.AppendTxn", es.AppendTxn(tx, "zero", eventstore.ExpectedRevision{}, pipeline.Event{Type: "t"}), "expected")
		if got := db.LastPosition(); got != last {
			t.Errorf("LastPosition %d -> %d", last, got)
		}
	})
}

// TestStreamConcurrentAppendSameRevision: 8 goroutines, released together, append to
// the same stream expecting the same revision. Exactly one succeeds; every other gets
// ErrWrongExpectedVersion reporting the winner's revision; the stream holds the
// winner's event only.
func TestStreamConcurrentAppendSameRevision(t *testing.T) {
	const racers = 8
	cases := []struct {
		name     string
		seeded   int
		expected eventstore.ExpectedRevision
	}{
		{"NoStream", 0, eventstore.NoStream},
		{"Revision(1)", 2, eventstore.Revision(1)},
	}
	for _, pol := range policies {
		for _, tc := range cases {
			t.Run(pol+"/"+tc.name, func(t *testing.T) {
				db, es, _ := openStore(t, pipeline.Config{Validation: pol, Lanes: 4})
				seedStream(t, es, "race", tc.seeded)
				type result struct {
					res eventstore.AppendResult
					err error
				}
				results := make([]result, racers)
				start := make(chan struct{})
				var wg sync.WaitGroup
				for i := range racers {
					wg.Go(func() {
						<-start
						r, err := es.Append(context.Background(), "race", tc.expected, pipeline.Event{Type: "raced", Data: []byte(fmt.Sprint(i))})
						results[i] = result{r, err}
					})
				}
				close(start)
				wait(t, wg.Wait, "racing appends")
				winner := -1
				for i, r := range results {
					if r.err == nil {
						if winner >= 0 {
							t.Fatalf("appends %d and %d both succeeded", winner, i)
						}
						winner = i
					}
				}
				if winner < 0 {
					t.Fatalf("no append succeeded: %v", results)
				}
				wantRev := uint64(tc.seeded)
				if got := results[winner].res.NextExpectedRevision; got != wantRev {
					t.Errorf("winner's NextExpectedRevision = %d, want %d", got, wantRev)
				}
				for i, r := range results {
					if i == winner {
						continue
					}
					var we *eventstore.WrongExpectedVersionError
					if !errors.As(r.err, &we) || !errors.Is(r.err, eventstore.ErrWrongExpectedVersion) {
						t.Errorf("append %d: %v, want ErrWrongExpectedVersion", i, r.err)
						continue
					}
					if we.Actual != eventstore.Revision(wantRev) || we.Expected != tc.expected {
						t.Errorf("append %d: expected %s actual %s, want expected %s actual %d", i, we.Expected, we.Actual, tc.expected, wantRev)
					}
				}
				evs := streamEvents(t, es, "race")
				if len(evs) != tc.seeded+1 {
					t.Fatalf("stream has %d events, want %d", len(evs), tc.seeded+1)
				}
				last := evs[len(evs)-1]
				if string(last.Data) != fmt.Sprint(winner) || last.Position != results[winner].res.Position {
					t.Errorf("last event %+v, want the winner's (%d at position %d)", last, winner, results[winner].res.Position)
				}
				if got := db.LastPosition(); got != uint64(tc.seeded+1) {
					t.Errorf("LastPosition = %d, want %d (seeds and the one winner)", got, tc.seeded+1)
				}
			})
		}
	}
}

// TestStreamMultiStreamAppend: appends to three streams in one transaction land at the
// same log position, in one entry holding all the events in order; a transaction whose
// second append is refused and that is then discarded leaves no trace in any stream.
func TestStreamMultiStreamAppend(t *testing.T) {
	for _, pol := range policies {
		t.Run(pol, func(t *testing.T) {
			db, es, _ := openStore(t, pipeline.Config{Validation: pol})
			batches := map[string][]pipeline.Event{
				"a": {{ID: "a0", Type: "t", Data: []byte("a0")}, {ID: "a1", Type: "t"}},
				"b": {{ID: "b0", Type: "t", Data: []byte("b0")}},
				"c": {{Type: "t", Data: []byte("c0")}, {Type: "t", Data: []byte("c1")}, {Type: "t", Metadata: []byte("c2")}},
			}
			order := []string{"a", "b", "c"}
			tx := db.Begin()
			for _, s := range order {
				if err := es.AppendTxn(tx, s, eventstore.NoStream, batches[s]...); err != nil {
					t.Fatalf("Append(%s): %v", s, err)
				}
			}
			pos, err := tx.CommitPosition(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			entry, err := db.Entry(pos)
			if err != nil {
				t.Fatal(err)
			}
			var all []eventstore.RecordedEvent
			streams := map[string][]eventstore.RecordedEvent{}
			for _, s := range order {
				for i, ev := range batches[s] {
					r := eventstore.RecordedEvent{Stream: s, Revision: uint64(i), Position: pos, Index: len(all), Time: entry.Time, Event: ev}
					all = append(all, r)
					streams[s] = append(streams[s], r)
				}
			}
			if diff := cmp.Diff(all, entry.Events); diff != "" {
				t.Errorf("entry events (-want +got):\n%s", diff)
			}
			for _, s := range order {
				want := streams[s]
				if diff := cmp.Diff(want, streamEvents(t, es, s)); diff != "" {
					t.Errorf("stream %s (-want +got):\n%s", s, diff)
				}
			}

			before := map[string][]eventstore.RecordedEvent{}
			for _, s := range append(order, "new") {
				before[s] = streamEvents(t, es, s)
			}
			last := db.LastPosition()
			tx = db.Begin()
			if err := es.AppendTxn(tx, "a", eventstore.Revision(1), pipeline.Event{Type: "t", ID: "a2"}); err != nil {
				t.Fatalf("first append: %v", err)
			}
			if err := es.AppendTxn(tx, "b", eventstore.Revision(5), pipeline.Event{Type: "t", ID: "b1"}); !errors.Is(err, eventstore.ErrWrongExpectedVersion) {
				t.Fatalf("second append: %v, want ErrWrongExpectedVersion", err)
			}
			if err := es.AppendTxn(tx, "new", eventstore.StreamExists, pipeline.Event{Type: "t"}); !errors.Is(err, eventstore.ErrWrongExpectedVersion) {
				t.Fatalf("third append: %v, want ErrWrongExpectedVersion", err)
			}
			tx.Discard()
			if got := db.LastPosition(); got != last {
				t.Errorf("LastPosition %d -> %d after a discarded transaction", last, got)
			}
			for _, s := range append(order, "new") {
				if diff := cmp.Diff(before[s], streamEvents(t, es, s)); diff != "" {
					t.Errorf("stream %s changed (-before +after):\n%s", s, diff)
				}
			}
			// The heads were not moved either: the same appends still expect the old revisions.
			if _, err := es.Append(context.Background(), "a", eventstore.Revision(1), pipeline.Event{Type: "t", ID: "a2"}); err != nil {
				t.Errorf("append to a at revision 1 after the discard: %v", err)
			}
			if _, err := es.Append(context.Background(), "b", eventstore.Revision(0), pipeline.Event{Type: "t", ID: "b1"}); err != nil {
				t.Errorf("append to b at revision 0 after the discard: %v", err)
			}
		})
	}
}

// TestStreamIdempotentAppend: repeating an append whose events (all with IDs) are
// already there returns the original result without writing: same AppendResult, stream
// not longer, LastPosition unchanged. Events with other IDs are not mistaken for a
// retry.
func TestStreamIdempotentAppend(t *testing.T) {
	evs := []pipeline.Event{{ID: "id-1", Type: "t", Data: []byte("1")}, {ID: "id-2", Type: "t", Data: []byte("2")}}
	cases := []struct {
		name     string
		seeded   int
		expected eventstore.ExpectedRevision
		wantNext uint64
	}{
		{"NoStream", 0, eventstore.NoStream, 1},
		{"Revision(2)", 3, eventstore.Revision(2), 4},
		{"Any on a new stream", 0, eventstore.Any, 1},
		{"Any", 1, eventstore.Any, 2},
		{"StreamExists", 2, eventstore.StreamExists, 3},
	}
	for _, pol := range policies {
		for _, tc := range cases {
			t.Run(pol+"/"+tc.name, func(t *testing.T) {
				ctx := context.Background()
				db, es, _ := openStore(t, pipeline.Config{Validation: pol})
				seedStream(t, es, "s", tc.seeded)
				first, err := es.Append(ctx, "s", tc.expected, evs...)
				if err != nil {
					t.Fatal(err)
				}
				want := eventstore.AppendResult{NextExpectedRevision: tc.wantNext, Position: db.LastPosition()}
				if diff := cmp.Diff(want, first); diff != "" {
					t.Errorf("first append (-want +got):\n%s", diff)
				}
				stream, last := streamEvents(t, es, "s"), db.LastPosition()
				for attempt := range 2 {
					again, err := es.Append(ctx, "s", tc.expected, evs...)
					if err != nil {
						t.Fatalf("retry %d: %v", attempt, err)
					}
					if diff := cmp.Diff(first, again); diff != "" {
						t.Errorf("retry %d result (-first +retry):\n%s", attempt, diff)
					}
				}
				if got := db.LastPosition(); got != last {
					t.Errorf("LastPosition %d -> %d after retries", last, got)
				}
				if diff := cmp.Diff(stream, streamEvents(t, es, "s")); diff != "" {
					t.Errorf("stream changed by retries (-before +after):\n%s", diff)
				}
				// The same expectation with different IDs is a new append, refused or
				// appended by the usual rules, never reported as the earlier one.
				other := []pipeline.Event{{ID: "id-1", Type: "t"}, {ID: "id-9", Type: "t"}}
				res, err := es.Append(ctx, "s", tc.expected, other...)
				switch {
				case tc.expected == eventstore.Any || tc.expected == eventstore.StreamExists:
					if err != nil || res.NextExpectedRevision != tc.wantNext+2 {
						t.Errorf("append of other IDs = %+v, %v; want a new append up to revision %d", res, err, tc.wantNext+2)
					}
				default:
					if !errors.Is(err, eventstore.ErrWrongExpectedVersion) {
						t.Errorf("append of other IDs = %+v, %v; want ErrWrongExpectedVersion", res, err)
					}
				}
			})
		}
	}
}

// TestStreamRead reads a stream forward and backward with various from and limit
// values. Each RecordedEvent carries its stream, revision, log position, the log
// entry's time and the event as appended (nil Data stays nil); other streams' events
// and commits are not mixed in.
func TestStreamRead(t *testing.T) {
	ctx := context.Background()
	db, es, _ := openStore(t, pipeline.Config{})
	appends := [][]pipeline.Event{
		{{ID: "o0", Type: "placed", Data: []byte("zero")}, {ID: "o1", Type: "paid", Data: []byte("one")}},
		{{Type: "noted"}},
		{{Type: "packed", Data: []byte("three"), Metadata: []byte("meta")}, {ID: "o4", Type: "shipped", Data: []byte{}}},
	}
	var all []eventstore.RecordedEvent
	rev := uint64(0)
	for i, batch := range appends {
		exp := eventstore.NoStream
		if i > 0 {
			exp = eventstore.Revision(rev - 1)
		}
		res, err := es.Append(ctx, "order", exp, batch...)
		if err != nil {
			t.Fatal(err)
		}
		entry, err := db.Entry(res.Position)
		if err != nil {
			t.Fatal(err)
		}
		if entry.Time.IsZero() {
			t.Fatalf("entry %d has no time", res.Position)
		}
		for i, ev := range batch {
			if len(ev.Data) == 0 {
				ev.Data = nil // empty and nil Data are stored alike
			}
			all = append(all, eventstore.RecordedEvent{Stream: "order", Revision: rev, Position: res.Position, Index: i, Time: entry.Time, Event: ev})
			rev++
		}
		// Unrelated commits between the appends: another stream and a plain write.
		if _, err := es.Append(ctx, "order-other", eventstore.Any, pipeline.Event{Type: "noise"}); err != nil {
			t.Fatal(err)
		}
		put(t, db, db.Default(), fmt.Sprintf("k%d", i), "v")
	}
	if all[2].Data != nil {
		t.Fatal("the test needs an event with nil Data")
	}
	reversed := func(evs []eventstore.RecordedEvent) []eventstore.RecordedEvent {
		out := make([]eventstore.RecordedEvent, len(evs))
		for i, e := range evs {
			out[len(evs)-1-i] = e
		}
		return out
	}
	cases := []struct {
		name     string
		backward bool
		from     uint64
		limit    int
		want     []eventstore.RecordedEvent
	}{
		{"forward all", false, 0, 100, all},
		{"forward limit", false, 0, 2, all[:2]},
		{"forward from", false, 2, 100, all[2:]},
		{"forward from and limit", false, 1, 3, all[1:4]},
		{"forward from last", false, 4, 1, all[4:]},
		{"forward past the end", false, 5, 10, nil},
		{"backward all", true, 100, 100, reversed(all)},
		{"backward from last", true, 4, 100, reversed(all)},
		{"backward from and limit", true, 3, 2, reversed(all[2:4])},
		{"backward from 0", true, 0, 10, all[:1]},
		{"backward from max", true, ^uint64(0), 1, all[4:]},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []eventstore.RecordedEvent
			var err error
			if tc.backward {
				got, err = es.ReadStreamBackward(ctx, "order", tc.from, tc.limit)
			} else {
				got, err = es.ReadStream(ctx, "order", tc.from, tc.limit)
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) == 0 {
				got = nil
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	t.Run("missing stream", func(t *testing.T) {
		for _, backward := range []bool{false, true} {
			read := es.ReadStream
			if backward {
				read = es.ReadStreamBackward
			}
			if got, err := read(ctx, "ord", 0, 10); err != nil || len(got) != 0 {
				t.Errorf("backward=%v: %v, %v; want no events and no error", backward, got, err)
			}
		}
	})
}

// TestStreamInvalidArguments: bad stream names, event types and limits are refused with
// an *ArgumentError naming the argument, by every call that takes them, and nothing is
// written. The longest valid name and nil Data are accepted.
func TestStreamInvalidArguments(t *testing.T) {
	ctx := context.Background()
	db, es, _ := openStore(t, pipeline.Config{})
	ev := pipeline.Event{Type: "t"}
	streamCalls := map[string]func(stream string) error{
		"Store.Append": func(s string) error {
			_, err := es.Append(ctx, s, eventstore.Any, ev)
			return err
		},
		"Store.AppendTxn": func(s string) error {
			tx := db.Begin()
			defer tx.Discard()
			return es.AppendTxn(tx, s, eventstore.Any, ev)
		},
		"ReadStream": func(s string) error {
			_, err := es.ReadStream(ctx, s, 0, 10)
			return err
		},
		"ReadStreamBackward": func(s string) error {
			_, err := es.ReadStreamBackward(ctx, s, 0, 10)
			return err
		},
	}
	badNames := map[string]string{
		"empty":        "",
		"1025 bytes":   strings.Repeat("s", eventstore.MaxStreamNameLen+1),
		"invalid UTF8": "\xff",
		"NUL":          "a\x00b",
	}
	for call, fn := range streamCalls {
		for name, s := range badNames {
			t.Run(call+"/stream "+name, func(t *testing.T) {
				wantArgumentError(t, call, fn(s), "stream")
			})
		}
	}

	eventCalls := map[string]func(events ...pipeline.Event) error{
		"Store.Append": func(evs ...pipeline.Event) error {
			_, err := es.Append(ctx, "s", eventstore.Any, evs...)
			return err
		},
		"Store.AppendTxn": func(evs ...pipeline.Event) error {
			tx := db.Begin()
			defer tx.Discard()
			return es.AppendTxn(tx, "s", eventstore.Any, evs...)
		},
		"Txn.AddEvents": func(evs ...pipeline.Event) error {
			tx := db.Begin()
			if err := tx.AddEvents(evs...); err != nil {
				tx.Discard()
				return err
			}
			return tx.Commit(ctx)
		},
	}
	badEvents := []struct {
		name   string
		events []pipeline.Event
		arg    string
	}{
		{"empty type", []pipeline.Event{{Type: ""}}, "events[0].Type"},
		{"invalid UTF8 type", []pipeline.Event{{Type: "\xff"}}, "events[0].Type"},
		{"second event bad", []pipeline.Event{{Type: "ok"}, {Type: "bad\xfe"}}, "events[1].Type"},
	}
	for call, fn := range eventCalls {
		for _, tc := range badEvents {
			t.Run(call+"/"+tc.name, func(t *testing.T) {
				wantArgumentError(t, call, fn(tc.events...), tc.arg)
			})
		}
	}
	for _, limit := range []int{0, -2, 1<<20 + 1} {
		_, err := es.ReadStream(ctx, "s", 0, limit)
		wantArgumentError(t, fmt.Sprintf("ReadStream limit %d", limit), err, "limit")
	}
	if got := db.LastPosition(); got != 0 {
		t.Fatalf("LastPosition = %d after refused calls only, want 0", got)
	}

	t.Run("valid edge cases", func(t *testing.T) {
		longest := strings.Repeat("s", eventstore.MaxStreamNameLen)
		if _, err := es.Append(ctx, longest, eventstore.NoStream, pipeline.Event{Type: "t", Data: nil}); err != nil {
			t.Fatalf("append to a %d-byte stream name with nil Data: %v", len(longest), err)
		}
		got := streamEvents(t, es, longest)
		if len(got) != 1 || got[0].Data != nil || got[0].Stream != longest {
			t.Errorf("read back %+v, want one event with nil Data", got)
		}
		if _, err := es.Append(ctx, "ünïcødé/stream", eventstore.NoStream, pipeline.Event{Type: "týpe"}); err != nil {
			t.Errorf("append with UTF-8 stream and type: %v", err)
		}
	})
}

// TestStreamEventsInTheLog: the log entry of an append carries each event's stream and
// revision, so the log readers hand out exactly what ReadStream does.
func TestStreamEventsInTheLog(t *testing.T) {
	db, es, _ := openStore(t, pipeline.Config{})
	seedStream(t, es, "a", 2)
	tx := db.Begin()
	if err := es.AppendTxn(tx, "a", eventstore.Revision(1), eventstore.Event{ID: "x", Type: "t"}, eventstore.Event{ID: "y", Type: "t"}); err != nil {
		t.Fatal(err)
	}
	if err := es.AppendTxn(tx, "b", eventstore.NoStream, eventstore.Event{ID: "z", Type: "u"}); err != nil {
		t.Fatal(err)
	}
	pos, err := tx.CommitPosition(ctx)
	if err != nil {
		t.Fatal(err)
	}
	entry, err := db.Entry(pos)
	if err != nil {
		t.Fatal(err)
	}
	a, b := streamEvents(t, es, "a"), streamEvents(t, es, "b")
	if diff := cmp.Diff(append(a[2:], b...), entry.Events); diff != "" {
		t.Errorf("log entry events against ReadStream's (-stream +log):\n%s", diff)
	}
	if got := entry.Events[2]; got.Stream != "b" || got.Revision != 0 || got.Index != 2 {
		t.Errorf("third event = %+v, want stream b revision 0 at index 2", got)
	}
}

// TestLosingAppendDoesNotBackOff: an append that loses a race to another append
// reports the wrong expected version at once: the retry that re-reads the head does
// not wait out Config.RetryBackoff (1 s here, so a first sleep of 0.5-1.5 s, past the
// victim's half-second deadline).
func TestLosingAppendDoesNotBackOff(t *testing.T) {
	var armed atomic.Bool
	var es *eventstore.Store
	rival := make(chan error, 1)
	hooks := &testhooks.Hooks{AfterAdmit: func() {
		if !armed.CompareAndSwap(true, false) {
			return // the seed's commits, and the rival's own
		}
		// The victim holds its claims, its head read at revision 0: a rival appends
		// after revision 0 and commits first.
		go func() {
			_, err := es.Append(ctx, "race", eventstore.Revision(0), eventstore.Event{Type: "rival"})
			rival <- err
		}()
		if err := <-rival; err != nil {
			rival <- err
		}
	}}
	_, store, _ := openStore(t, testhooks.With(pipeline.Config{RetryBackoff: time.Second}, hooks))
	es = store
	seedStream(t, es, "race", 1)
	armed.Store(true)
	vctx, cancel := context.WithTimeout(ctx, time.Second/2) // the backoff's first sleep is 0.5..1.5 s
	defer cancel()
	_, err := es.Append(vctx, "race", eventstore.Revision(0), eventstore.Event{Type: "victim"})
	var wrong *eventstore.WrongExpectedVersionError
	if !errors.As(err, &wrong) {
		t.Fatalf("the losing append: %v, want a *WrongExpectedVersionError without waiting out the backoff", err)
	}
	select {
	case err := <-rival:
		t.Fatalf("the rival append: %v", err)
	default:
	}
	evs := streamEvents(t, es, "race")
	if len(evs) != 2 || evs[1].Type != "rival" {
		t.Errorf("stream holds %+v, want the seed and the rival", evs)
	}
}
