package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rockline/rockline/pipeline"
)

// wholeLog returns every published log entry (positions 1..LastPosition).
func wholeLog(t testing.TB, db *pipeline.DB) []pipeline.LogEntry {
	t.Helper()
	return logFrom(t, db, 1)
}

// logFrom returns the published log entries from position from on.
func logFrom(t testing.TB, db *pipeline.DB, from uint64) []pipeline.LogEntry {
	t.Helper()
	var out []pipeline.LogEntry
	for {
		page, err := db.ReadLog(from, 1024)
		if err != nil {
			t.Fatalf("ReadLog(%d): %v", from, err)
		}
		if len(page) == 0 {
			return out
		}
		out = append(out, page...)
		from = page[len(page)-1].Position + 1
	}
}

// loadCommit describes one commit of the load in TestLogDenseUnderLoad.
type loadCommit struct {
	id     string // unique key (when it writes) and event ID (when it has events)
	writes bool   // puts the unique key (and, when hot, a shared key)
	hot    bool   // reads and writes a shared key, so some of these conflict
	events bool
	mode   commitMode
}

// loadOutcome is what the committing goroutine learnt about one commit.
type loadOutcome struct {
	err       error
	pos       uint64 // from CommitPosition; 0 when committed with CommitInline
	lastAfter uint64 // LastPosition right after the commit returned
}

// TestLogDenseUnderLoad: 8 writers over 4 lanes, mixing Commit and CommitInline, commits
// with writes, with events only, and with a contended key (some conflict), under both
// policies. A reader polling ReadLog and LastPosition during the load never sees a
// gap, a position beyond what is published, a filler, or an entry whose writes are not
// yet readable. At the end the log is exactly positions 1..N, N the number of
// successful commits, each successful commit appears once at its own position (the
// one CommitPosition returned, published before the commit returned), and no failed
// commit left anything.
func TestLogDenseUnderLoad(t *testing.T) {
	const writers, perWriter = 8, 150
	for _, pol := range policies {
		t.Run(pol, func(t *testing.T) {
			db, _ := openDB(t, pipeline.Config{Validation: pol, Lanes: 4})
			cf := db.Default()

			plan := make([][]loadCommit, writers)
			for w := range writers {
				for i := range perWriter {
					c := loadCommit{id: fmt.Sprintf("u/%d/%03d", w, i), mode: commitModes[i%2]}
					switch (w + i) % 4 {
					case 0:
						c.writes = true
					case 1:
						c.events = true
					case 2:
						c.writes, c.events = true, true
					case 3:
						c.writes, c.hot = true, true
					}
					plan[w] = append(plan[w], c)
				}
			}

			readerDone := make(chan readerReport, 1)
			stop := make(chan struct{})
			go func() { readerDone <- pollLog(db, stop) }()

			outcomes := make([][]loadOutcome, writers)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for w := range writers {
				outcomes[w] = make([]loadOutcome, perWriter)
				wg.Go(func() {
					<-start
					for i, c := range plan[w] {
						outcomes[w][i] = runLoadCommit(db, cf, c)
					}
				})
			}
			close(start)
			wait(t, wg.Wait, "writers")
			close(stop)
			rep := recv(t, readerDone, "log reader")
			if rep.err != nil {
				t.Fatalf("reader: %v", rep.err)
			}

			byID := make(map[string]loadOutcome)
			succeeded, conflicts := 0, 0
			for w := range writers {
				for i, c := range plan[w] {
					o := outcomes[w][i]
					switch {
					case o.err == nil:
						succeeded++
					case errors.Is(o.err, pipeline.ErrConflict):
						conflicts++
					default:
						t.Fatalf("commit %s: %v", c.id, o.err)
					}
					byID[c.id] = o
				}
			}
			t.Logf("%d commits succeeded, %d conflicted; reader polled %d times", succeeded, conflicts, rep.polls)

			n := db.LastPosition()
			if n != uint64(succeeded) {
				t.Fatalf("LastPosition = %d, want %d (the successful commits; no fillers expected)", n, succeeded)
			}
			if rep.seen != n {
				t.Errorf("the reader saw positions 1..%d, want 1..%d", rep.seen, n)
			}
			entries := wholeLog(t, db)
			if len(entries) != int(n) {
				t.Fatalf("ReadLog returned %d entries, want %d", len(entries), n)
			}
			seen := make(map[string]uint64)
			for i, e := range entries {
				if e.Position != uint64(i+1) {
					t.Fatalf("entry %d has position %d", i, e.Position)
				}
				if e.Filler {
					t.Fatalf("position %d is a filler", e.Position)
				}
				id, err := entryID(e)
				if err != nil {
					t.Fatalf("position %d: %v", e.Position, err)
				}
				if p, dup := seen[id]; dup {
					t.Fatalf("commit %s at positions %d and %d", id, p, e.Position)
				}
				seen[id] = e.Position
			}
			for w := range writers {
				for _, c := range plan[w] {
					o, pos := byID[c.id], seen[c.id]
					if o.err != nil {
						if pos != 0 {
							t.Errorf("failed commit %s is in the log at position %d", c.id, pos)
						}
						if c.writes {
							mustAbsent(t, db, cf, c.id)
						}
						continue
					}
					switch {
					case pos == 0:
						t.Errorf("successful commit %s is not in the log", c.id)
					case o.pos != 0 && o.pos != pos:
						t.Errorf("commit %s: CommitPosition returned %d, log has it at %d", c.id, o.pos, pos)
					case pos > o.lastAfter:
						t.Errorf("commit %s at position %d returned when LastPosition was %d", c.id, pos, o.lastAfter)
					}
				}
			}
		})
	}
}

// runLoadCommit runs one commit of the load.
func runLoadCommit(db *pipeline.DB, cf *pipeline.ColumnFamily, c loadCommit) loadOutcome {
	tx := db.Begin()
	fail := func(err error) loadOutcome {
		tx.Discard()
		return loadOutcome{err: fmt.Errorf("building %s: %w", c.id, err)}
	}
	if c.hot {
		hot := []byte("hot")
		if _, err := tx.Get(cf, hot); err != nil && !errors.Is(err, pipeline.ErrNotFound) {
			return fail(err)
		}
		if err := tx.Put(cf, hot, []byte(c.id)); err != nil {
			return fail(err)
		}
	}
	if c.writes {
		if err := tx.Put(cf, []byte(c.id), []byte("v")); err != nil {
			return fail(err)
		}
	}
	if c.events {
		if err := tx.AddEvents(pipeline.Event{ID: c.id, Type: "load", Data: []byte(c.id)}); err != nil {
			return fail(err)
		}
	}
	var o loadOutcome
	if c.mode == viaCommitInline {
		o.err = tx.CommitInline()
	} else {
		o.pos, o.err = tx.CommitPosition(context.Background())
	}
	o.lastAfter = db.LastPosition()
	return o
}

// entryID returns the commit id an entry of the load carries: its unique key or its
// event ID (both when it has both, and they must agree).
func entryID(e pipeline.LogEntry) (string, error) {
	var ids []string
	for _, w := range e.Writes {
		if w.Family == "default" && len(w.Key) > 2 && string(w.Key[:2]) == "u/" {
			ids = append(ids, string(w.Key))
		}
	}
	for _, ev := range e.Events {
		ids = append(ids, ev.ID)
	}
	if len(ids) == 0 {
		return "", fmt.Errorf("entry carries no commit id: %+v", e)
	}
	for _, id := range ids[1:] {
		if id != ids[0] {
			return "", fmt.Errorf("entry carries ids %q", ids)
		}
	}
	return ids[0], nil
}

type readerReport struct {
	seen  uint64 // the reader checked positions 1..seen
	polls int
	err   error
}

// pollLog reads the log while it grows, until stop is closed and it has read
// everything published by then. Per page it checks: positions are consecutive from
// where the previous page ended; a page covers every position published before the
// read (up to the page size) and none beyond what is published after it; no entry is
// a filler; and the unique key of every entry that wrote one is readable in a
// transaction begun after the read (the load never deletes those keys).
func pollLog(db *pipeline.DB, stop <-chan struct{}) readerReport {
	const page = 64
	var rep readerReport
	next, lastSeen := uint64(1), uint64(0)
	stopping := false
	for {
		if !stopping {
			select {
			case <-stop:
				stopping = true
			default:
			}
		}
		rep.polls++
		before := db.LastPosition()
		if before < lastSeen {
			rep.err = fmt.Errorf("LastPosition went back from %d to %d", lastSeen, before)
			return rep
		}
		lastSeen = before
		entries, err := db.ReadLog(next, page)
		after := db.LastPosition()
		if err != nil {
			rep.err = fmt.Errorf("ReadLog(%d): %w", next, err)
			return rep
		}
		if before >= next {
			if want := min(before-next+1, page); uint64(len(entries)) < want {
				rep.err = fmt.Errorf("ReadLog(%d) returned %d entries with %d published", next, len(entries), before)
				return rep
			}
		}
		var keys []string
		for _, e := range entries {
			switch {
			case e.Position != next:
				return readerReport{err: fmt.Errorf("gap: got position %d, want %d", e.Position, next)}
			case e.Position > after:
				return readerReport{err: fmt.Errorf("position %d returned while LastPosition was %d", e.Position, after)}
			case e.Filler:
				return readerReport{err: fmt.Errorf("position %d is a filler", e.Position)}
			}
			for _, w := range e.Writes {
				if w.Family == "default" && len(w.Key) > 2 && string(w.Key[:2]) == "u/" {
					keys = append(keys, string(w.Key))
				}
			}
			next++
		}
		if len(keys) > 0 {
			err := db.View(func(tx *pipeline.Txn) error {
				for _, k := range keys {
					if _, err := tx.Get(db.Default(), []byte(k)); err != nil {
						return fmt.Errorf("key %s of a returned entry: %w", k, err)
					}
				}
				return nil
			})
			if err != nil {
				rep.err = err
				return rep
			}
		}
		rep.seen = next - 1
		if stopping && next > db.LastPosition() {
			return rep
		}
		if len(entries) == 0 {
			runtime.Gosched()
		}
	}
}

// TestLogEventsOnlyAndReadOnlyCommits: a commit that carries events but writes nothing
// gets the next position and an entry holding exactly its events; a read-only or empty
// commit gets position 0 and adds no entry.
func TestLogEventsOnlyAndReadOnlyCommits(t *testing.T) {
	events := []pipeline.Event{
		{ID: "e1", Type: "created", Data: []byte("one"), Metadata: []byte("m")},
		{Type: "noted"},
	}
	cases := []struct {
		name       string
		build      func(t *testing.T, db *pipeline.DB, tx *pipeline.Txn)
		wantEntry  bool
		wantEvents []pipeline.Event
	}{
		{
			name: "events only",
			build: func(t *testing.T, _ *pipeline.DB, tx *pipeline.Txn) {
				if err := tx.AddEvents(events...); err != nil {
					t.Fatal(err)
				}
			},
			wantEntry:  true,
			wantEvents: events,
		},
		{
			name: "read only",
			build: func(t *testing.T, db *pipeline.DB, tx *pipeline.Txn) {
				if v, err := tx.Get(db.Default(), []byte("seed")); err != nil || string(v) != "s" {
					t.Fatalf("Get(seed) = %q, %v", v, err)
				}
				if _, err := tx.Get(db.Default(), []byte("missing")); !errors.Is(err, pipeline.ErrNotFound) {
					t.Fatalf("Get(missing): %v", err)
				}
			},
		},
		{
			name:  "empty",
			build: func(*testing.T, *pipeline.DB, *pipeline.Txn) {},
		},
	}
	for _, pol := range policies {
		for _, mode := range commitModes {
			for _, tc := range cases {
				t.Run(fmt.Sprintf("%s/%s/%s", pol, mode, tc.name), func(t *testing.T) {
					db, _ := openDB(t, pipeline.Config{Validation: pol})
					put(t, db, db.Default(), "seed", "s")
					last := db.LastPosition()
					tx := db.Begin()
					tc.build(t, db, tx)
					var pos uint64
					var err error
					if mode == viaCommitInline {
						err = tx.CommitInline()
						if tc.wantEntry {
							pos = last + 1
						}
					} else {
						pos, err = tx.CommitPosition(context.Background())
					}
					if err != nil {
						t.Fatalf("commit: %v", err)
					}
					if !tc.wantEntry {
						if pos != 0 {
							t.Errorf("position %d, want 0", pos)
						}
						if got := db.LastPosition(); got != last {
							t.Errorf("LastPosition %d -> %d, want unchanged", last, got)
						}
						if es, err := db.ReadLog(last+1, 10); err != nil || len(es) != 0 {
							t.Errorf("ReadLog after the commit = %v, %v; want nothing", es, err)
						}
						return
					}
					if pos != last+1 || db.LastPosition() != last+1 {
						t.Fatalf("position %d, LastPosition %d; want both %d", pos, db.LastPosition(), last+1)
					}
					e, err := db.Entry(pos)
					if err != nil {
						t.Fatal(err)
					}
					if e.Time.IsZero() {
						t.Error("entry time is zero")
					}
					want := pipeline.LogEntry{Position: pos, Time: e.Time, Events: recorded(pos, e.Time, tc.wantEvents)}
					if diff := cmp.Diff(want, e); diff != "" {
						t.Errorf("entry (-want +got):\n%s", diff)
					}
				})
			}
		}
	}
}

// recorded is events as the log entry at pos, committed at tm, hands them out.
func recorded(pos uint64, tm time.Time, events []pipeline.Event) []pipeline.RecordedEvent {
	var out []pipeline.RecordedEvent
	for i, e := range events {
		out = append(out, pipeline.RecordedEvent{Position: pos, Index: i, Time: tm, Event: e})
	}
	return out
}

// TestRecordedEvents: events added with AddStreamEvents come back from every log
// reader with their stream and revision, beside events of no stream in the same
// commit, each with its commit's position and time and its index; a replay keeps them.
func TestRecordedEvents(t *testing.T) {
	db, _ := openDB(t, pipeline.Config{})
	tx := db.Begin()
	if err := tx.AddEvents(pipeline.Event{ID: "a", Type: "noted"}); err != nil {
		t.Fatal(err)
	}
	if err := tx.AddStreamEvents("order-1", 4, pipeline.Event{ID: "b", Type: "paid"}, pipeline.Event{ID: "c", Type: "shipped", Data: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	wantArgumentError(t, "AddStreamEvents without a stream", tx.AddStreamEvents("", 0, pipeline.Event{Type: "t"}), "stream")
	wantArgumentError(t, "AddStreamEvents with a bad event", tx.AddStreamEvents("s", 0, pipeline.Event{}), "events[0].Type")
	pos, err := tx.CommitPosition(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	e, err := db.Entry(pos)
	if err != nil {
		t.Fatal(err)
	}
	want := []pipeline.RecordedEvent{
		{Position: pos, Index: 0, Time: e.Time, Event: pipeline.Event{ID: "a", Type: "noted"}},
		{Stream: "order-1", Revision: 4, Position: pos, Index: 1, Time: e.Time, Event: pipeline.Event{ID: "b", Type: "paid"}},
		{Stream: "order-1", Revision: 5, Position: pos, Index: 2, Time: e.Time, Event: pipeline.Event{ID: "c", Type: "shipped", Data: []byte("x")}},
	}
	if diff := cmp.Diff(want, e.Events); diff != "" {
		t.Errorf("Entry events (-want +got):\n%s", diff)
	}
	var delivered []pipeline.RecordedEvent
	sub, err := db.Subscribe(context.Background(), 0, func(le pipeline.LogEntry) error {
		delivered = append(delivered, le.Events...)
		if le.Position == pos {
			return errStopSubscription
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Wait(); !errors.Is(err, errStopSubscription) {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, delivered); diff != "" {
		t.Errorf("subscription events (-want +got):\n%s", diff)
	}
	rebuilt, err := db.Rebuild(context.Background(), filepath.Join(t.TempDir(), "rebuilt"), pipeline.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer rebuilt.Close()
	re, err := rebuilt.Entry(pos)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(e, re); diff != "" {
		t.Errorf("rebuilt entry (-want +got):\n%s", diff)
	}
}

var errStopSubscription = errors.New("seen the last entry")
