package pipeline_test

// Regression tests for lifecycle defects: each interleaving of drops, creates, close,
// reopen, truncation and replay below once deadlocked, crashed, lost data or reported a
// wrong error.

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/internal/testhooks"
	"github.com/rockline/rockline/pipeline"
)

// TestCloseDuringFamilyChurn: Close returns while drops, creates and family lookups
// run, and so do they. A drop once held the storage gate's read lock while its durable
// write took it again; a Close queued for the write side blocked that second read lock,
// and the drop, the lookups and Close waited for ever.
func TestCloseDuringFamilyChurn(t *testing.T) {
	for round := range 20 {
		db, _ := openDB(t, pipeline.Config{})
		var wg sync.WaitGroup
		started := make(chan struct{}, 3)
		errs := make(chan error, 3)
		for w := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					name := fmt.Sprintf("churn-%d-%d", w, i%4)
					var err error
					switch i % 3 {
					case 0:
						_, err = db.CreateColumnFamily(name)
					case 1:
						_, err = db.ColumnFamily(name)
					default:
						err = db.DropColumnFamily(name)
					}
					if i == 3 {
						started <- struct{}{}
					}
					switch {
					case errors.Is(err, pipeline.ErrClosed):
						return
					case err == nil, errors.Is(err, pipeline.ErrColumnFamilyNotFound), errors.Is(err, pipeline.ErrColumnFamilyExists):
					default:
						errs <- fmt.Errorf("round %d worker %d op %d: %w", round, w, i, err)
						return
					}
				}
			}()
		}
		for range 3 {
			recv(t, started, "the churn to start")
		}
		closed := make(chan error, 1)
		go func() { closed <- db.Close() }()
		if err := recv(t, closed, fmt.Sprintf("Close in round %d", round)); err != nil && !errors.Is(err, pipeline.ErrDropPending) {
			t.Fatalf("Close: %v", err)
		}
		wait(t, wg.Wait, "the churn workers to see ErrClosed")
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	}
}

// TestReopenCompletesDropOfRecreatedName: a drop left pending at Close (a commit still
// held the old generation) of a name that was re-created before Close is completed by
// the next Open, and that database closes cleanly. Close once destroyed the old
// generation's handle twice and the process died with SIGSEGV.
func TestReopenCompletesDropOfRecreatedName(t *testing.T) {
	db, dir, g := openDropDB(t, pipeline.Config{})
	old := dropCreate(t, db, "victim")
	put(t, db, old, "old", "1")
	res := g.park(t, db, old, viaCommitInline, "parked", "p")
	if err := dropWithin(t, db, "victim"); err != nil {
		t.Fatal(err)
	}
	again := dropCreate(t, db, "victim")
	put(t, db, again, "new", "2")
	err := db.Close()
	if !errors.Is(err, pipeline.ErrDropPending) {
		t.Fatalf("Close with the old generation claimed = %v, want ErrDropPending", err)
	}
	g.open()
	if err := recv(t, res, "the parked commit"); !errors.Is(err, pipeline.ErrClosed) {
		t.Fatalf("parked commit after Close = %v, want ErrClosed", err)
	}
	for i := range 2 {
		db2, err := pipeline.Open(dir, pipeline.Config{})
		if err != nil {
			t.Fatalf("reopen %d: %v", i, err)
		}
		cf, err := db2.ColumnFamily("victim")
		if err != nil {
			t.Fatalf("reopen %d: %v", i, err)
		}
		mustGet(t, db2, cf, "new")
		mustAbsent(t, db2, cf, "old")
		if s := dropStats(t, db2); s.PendingDrops != 0 {
			t.Errorf("reopen %d: PendingDrops = %d", i, s.PendingDrops)
		}
		if err := db2.Close(); err != nil {
			t.Fatalf("Close after reopen %d: %v", i, err)
		}
	}
}

// familyGenerations returns the generation of every write to family in the log.
func familyGenerations(t *testing.T, db *pipeline.DB, family string) []int {
	t.Helper()
	var gens []int
	it := db.LogIterator(1)
	for it.Next() {
		for _, w := range it.Entry().Writes {
			if w.Family == family {
				gens = append(gens, w.Generation)
			}
		}
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return gens
}

// TestGenerationsSurviveReopen: a name dropped (the drop complete, its intent gone),
// reopened and re-created is a new generation, so the log tells its writes from the
// old one's and a rebuild does not merge them. Generations once restarted at 1.
func TestGenerationsSurviveReopen(t *testing.T) {
	db, dir := openDB(t, pipeline.Config{})
	cf := dropCreate(t, db, "x")
	put(t, db, cf, "old", "1")
	if err := db.DropColumnFamily("x"); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openAt(t, dir, pipeline.Config{})
	cf = dropCreate(t, db, "x")
	put(t, db, cf, "new", "2")
	if diff := cmp.Diff([]int{1, 2}, familyGenerations(t, db, "x")); diff != "" {
		t.Fatalf("generations of the writes to x (-want +got):\n%s", diff)
	}
	re, err := db.Rebuild(context.Background(), filepath.Join(t.TempDir(), "rebuilt"), pipeline.Config{})
	if err != nil {
		t.Fatalf("Rebuild: %v", err)
	}
	defer re.Close()
	rcf, err := re.ColumnFamily("x")
	if err != nil {
		t.Fatal(err)
	}
	mustGet(t, re, rcf, "new")
	mustAbsent(t, re, rcf, "old")
}

// TestCheckpointReplayFollowsFamilyChanges: a checkpoint brought up to date with Replay
// drops what the source dropped after the checkpoint (with its data), creates what it
// created (also a family never written to), and re-creates a re-created name empty. The
// copy once kept dropped families and lacked created ones.
func TestCheckpointReplayFollowsFamilyChanges(t *testing.T) {
	ctx := context.Background()
	db, _ := openDB(t, pipeline.Config{})
	a := dropCreate(t, db, "a")
	r := dropCreate(t, db, "r")
	put(t, db, a, "ka", "1")
	put(t, db, r, "kr", "old")
	cpDir := filepath.Join(t.TempDir(), "cp")
	covered, err := db.Checkpoint(cpDir)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.DropColumnFamily("a"); err != nil {
		t.Fatal(err)
	}
	b := dropCreate(t, db, "b")
	put(t, db, b, "kb", "2")
	dropCreate(t, db, "empty")
	if err := db.DropColumnFamily("r"); err != nil {
		t.Fatal(err)
	}
	r = dropCreate(t, db, "r")
	put(t, db, r, "kr2", "new")

	cp := openAt(t, cpDir, pipeline.Config{})
	if got := cp.LastPosition(); got != covered {
		t.Fatalf("checkpoint LastPosition = %d, want %d", got, covered)
	}
	if err := cp.Replay(ctx, logFrom(t, db, covered+1)); err != nil {
		t.Fatalf("Replay: %v", err)
	}
	if diff := cmp.Diff(familyContents(t, db), familyContents(t, cp)); diff != "" {
		t.Fatalf("checkpoint + replay differs from the source (-source +copy):\n%s", diff)
	}
	if diff := cmp.Diff(logFrom(t, db, 1), logFrom(t, cp, 1)); diff != "" {
		t.Fatalf("logs differ (-source +copy):\n%s", diff)
	}
}

// TestFamilyChangesAreLogEntries: a creation and a drop are entries of their own in the
// log, naming the generation.
func TestFamilyChangesAreLogEntries(t *testing.T) {
	db, _ := openDB(t, pipeline.Config{})
	dropCreate(t, db, "f")
	if err := db.DropColumnFamily("f"); err != nil {
		t.Fatal(err)
	}
	dropCreate(t, db, "f")
	var got []pipeline.FamilyChange
	for _, e := range logFrom(t, db, 1) {
		got = append(got, e.Families...)
	}
	want := []pipeline.FamilyChange{{Family: "f", Generation: 1}, {Family: "f", Generation: 1, Dropped: true}, {Family: "f", Generation: 2}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("family changes in the log (-want +got):\n%s", diff)
	}
}

// TestReadLogRacingTruncate: a read that races TruncateLog reports ErrLogTruncated for
// the removed positions, never a gap; concurrent truncations leave the marker at the
// largest. A read once returned an untyped "log gap", and two truncations could leave
// the marker below what was deleted.
func TestReadLogRacingTruncate(t *testing.T) {
	for round := range 10 {
		db, dir := openDB(t, pipeline.Config{})
		cf := db.Default()
		for i := range 200 {
			put(t, db, cf, fmt.Sprintf("k%d", i), "v")
		}
		if _, err := db.Checkpoint(filepath.Join(t.TempDir(), "cp")); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		for _, before := range []uint64{60, 120, 180, 30} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := db.TruncateLog(before); err != nil {
					errs <- fmt.Errorf("TruncateLog(%d): %w", before, err)
				}
			}()
		}
		for r := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for from := uint64(1 + r); from < 200; from += 7 {
					_, err := db.ReadLog(from, 50)
					if err != nil && !errors.Is(err, pipeline.ErrLogTruncated) {
						errs <- fmt.Errorf("ReadLog(%d): %w", from, err)
					}
				}
			}()
		}
		wait(t, wg.Wait, "readers and truncations")
		close(errs)
		for err := range errs {
			t.Errorf("round %d: %v", round, err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		db = openAt(t, dir, pipeline.Config{})
		if _, err := db.ReadLog(179, 1); !errors.Is(err, pipeline.ErrLogTruncated) {
			t.Fatalf("round %d: ReadLog(179) after reopen = %v, want ErrLogTruncated", round, err)
		}
		if es, err := db.ReadLog(180, 1); err != nil || len(es) != 1 {
			t.Fatalf("round %d: ReadLog(180) = %d entries, %v", round, len(es), err)
		}
	}
}

// TestReadsRacingClose: reads that race Close fail with ErrClosed or succeed; they
// never report the intact log as corrupt.
func TestReadsRacingClose(t *testing.T) {
	ctx := context.Background()
	for round := range 20 {
		db, _ := openDB(t, pipeline.Config{})
		es, err := eventstore.New(db)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 50 {
			if _, err := es.Append(ctx, fmt.Sprintf("s%d", i%3), eventstore.Any, pipeline.Event{ID: fmt.Sprintf("e%d", i), Type: "t"}); err != nil {
				t.Fatal(err)
			}
		}
		reads := map[string]func() error{
			"ReadLog":    func() error { _, err := db.ReadLog(1, 100); return err },
			"Entry":      func() error { _, err := db.Entry(7); return err },
			"ReadStream": func() error { _, err := es.ReadStream(ctx, "s1", 0, 100); return err },
			"LogIterator": func() error {
				it := db.LogIterator(1)
				for it.Next() {
				}
				return it.Err()
			},
		}
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		started := make(chan struct{}, len(reads))
		for name, read := range reads {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					err := read()
					if i == 0 {
						started <- struct{}{}
					}
					if errors.Is(err, pipeline.ErrClosed) {
						return
					}
					if err != nil {
						errs <- fmt.Errorf("round %d: %s: %w", round, name, err)
						return
					}
				}
			}()
		}
		for range reads {
			recv(t, started, "the readers to start")
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		wait(t, wg.Wait, "the readers")
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	}
}

// TestEntryZero: position 0 holds no entry and is refused with a typed error naming the
// argument. Entry(0) once returned the entry at position 1.
func TestEntryZero(t *testing.T) {
	db, _ := openDB(t, pipeline.Config{})
	put(t, db, db.Default(), "k", "v")
	_, err := db.Entry(0)
	var ae *pipeline.ArgumentError
	if !errors.As(err, &ae) || ae.Arg != "pos" || !errors.Is(err, pipeline.ErrInvalidArgument) {
		t.Fatalf("Entry(0) = %v, want an *ArgumentError for pos", err)
	}
	if e, err := db.Entry(1); err != nil || e.Position != 1 {
		t.Fatalf("Entry(1) = %+v, %v", e, err)
	}
}

// TestReplayIsExclusive: Replay takes the database alone before it changes anything.
// A transaction open when it starts makes it fail with ErrNotExclusive, with nothing
// replayed and no family touched; transactions that begin while it runs fail with
// ErrReplaying; racing commits and replays never overwrite a position or leave one
// unpublished. Replay once checked for open transactions without keeping them out.
func TestReplayIsExclusive(t *testing.T) {
	ctx := context.Background()
	src, _ := openDB(t, pipeline.Config{})
	fam := dropCreate(t, src, "f")
	for i := range 300 {
		put(t, src, fam, fmt.Sprintf("k%d", i), "v")
	}
	entries := logFrom(t, src, 1)

	dst, _ := openDB(t, pipeline.Config{})
	open := dst.Begin()
	if err := dst.Replay(ctx, entries); !errors.Is(err, pipeline.ErrNotExclusive) {
		t.Fatalf("Replay with a transaction open = %v, want ErrNotExclusive", err)
	}
	if got := dst.LastPosition(); got != 0 {
		t.Fatalf("LastPosition after a refused Replay = %d", got)
	}
	if names, _ := dst.ColumnFamilies(); slices.Contains(names, "f") {
		t.Fatalf("a refused Replay created family f: %v", names)
	}
	open.Discard()

	// Race commits against a replay. Either a commit gets in first (the replay then
	// fails: position 1 is taken, or a transaction is open) or the replay holds the
	// database alone and every commit that tries meanwhile is refused; the log stays
	// dense and a successful replay's entries are the source's, untouched.
	var wg sync.WaitGroup
	replayErr := make(chan error, 1)
	wg.Add(2)
	go func() {
		defer wg.Done()
		replayErr <- dst.Replay(ctx, entries)
	}()
	var committed []uint64
	go func() {
		defer wg.Done()
		for range 200 {
			tx := dst.Begin()
			err := tx.Put(dst.Default(), []byte("racer"), []byte("x"))
			if err != nil {
				if !errors.Is(err, pipeline.ErrReplaying) {
					t.Errorf("Put during Replay: %v, want ErrReplaying", err)
				}
				tx.Discard()
				continue
			}
			pos, err := tx.CommitPosition(ctx)
			if err != nil {
				t.Errorf("commit: %v", err)
				continue
			}
			committed = append(committed, pos)
		}
	}()
	wait(t, wg.Wait, "the replay and the racing commits")
	rerr := <-replayErr
	if rerr != nil && !errors.Is(rerr, pipeline.ErrNotExclusive) && !errors.Is(rerr, pipeline.ErrInvalidArgument) {
		t.Fatalf("Replay racing commits = %v, want nil, ErrNotExclusive or a position not next", rerr)
	}
	got := logFrom(t, dst, 1)
	if len(got) != int(dst.LastPosition()) {
		t.Fatalf("log has %d entries, LastPosition %d", len(got), dst.LastPosition())
	}
	if rerr == nil {
		if diff := cmp.Diff(entries, got[:len(entries)]); diff != "" {
			t.Fatalf("replayed entries differ (-source +replayed):\n%s", diff)
		}
		for _, p := range committed {
			if p <= uint64(len(entries)) {
				t.Fatalf("a commit took position %d, which the replay handed out", p)
			}
		}
	}
	t.Logf("replay: %v; %d racing commits landed", rerr, len(committed))
	put(t, dst, dst.Default(), "after", "1") // nothing waits for a position never published
}

// TestTrackedReadOfDroppedFamily: a transaction that read a family with tracking and
// commits after that family was dropped fails with ErrColumnFamilyDropped naming it,
// as one that wrote it would; an untracked read does not.
func TestTrackedReadOfDroppedFamily(t *testing.T) {
	for _, mode := range commitModes {
		t.Run(string(mode), func(t *testing.T) {
			db, _ := openDB(t, pipeline.Config{})
			src := dropCreate(t, db, "src")
			dst := dropCreate(t, db, "dst")
			put(t, db, src, "k", "v")

			tracked, untracked := db.Begin(), db.Begin()
			if _, err := tracked.Get(src, []byte("k")); err != nil {
				t.Fatal(err)
			}
			if _, err := untracked.GetUntracked(src, []byte("k")); err != nil {
				t.Fatal(err)
			}
			for _, tx := range []*pipeline.Txn{tracked, untracked} {
				if err := tx.Put(dst, []byte("copy"), []byte("v")); err != nil {
					t.Fatal(err)
				}
			}
			if err := db.DropColumnFamily("src"); err != nil {
				t.Fatal(err)
			}
			dropCheckDropped(t, mode.commit(tracked), "src")
			if err := mode.commit(untracked); err != nil {
				t.Fatalf("commit with an untracked read of the dropped family: %v", err)
			}
		})
	}
}

// TestOpenHeldFolder: a second Open of a folder an open database holds fails with
// ErrLocked naming the folder, not RocksDB's lock text alone.
func TestOpenHeldFolder(t *testing.T) {
	_, dir := openDB(t, pipeline.Config{})
	_, err := pipeline.Open(dir, pipeline.Config{})
	if !errors.Is(err, pipeline.ErrLocked) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("second Open = %v, want ErrLocked naming %s", err, dir)
	}
}

// TestReplayDropWithWritesToNewFamily: an entry (hand-made: rockline never writes one)
// that drops a family and writes to a generation of another not seen yet replays
// without waiting on itself: the new family is created before the drop takes storage's
// family lock.
func TestReplayDropWithWritesToNewFamily(t *testing.T) {
	db, _ := openDB(t, pipeline.Config{})
	dropCreate(t, db, "a")
	entry := pipeline.LogEntry{
		Position: db.LastPosition() + 1,
		Families: []pipeline.FamilyChange{{Family: "a", Generation: 1, Dropped: true}},
		Writes:   []pipeline.LogWrite{{Family: "b", Generation: 3, Key: []byte("k"), Value: []byte("v")}},
	}
	done := make(chan error, 1)
	go func() { done <- db.Replay(context.Background(), []pipeline.LogEntry{entry}) }()
	if err := recv(t, done, "Replay of a drop with a write to a new family"); err != nil {
		t.Fatalf("Replay: %v", err)
	}
	names, err := db.ColumnFamilies()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"b", "default"}, names); diff != "" {
		t.Fatalf("families after the replay (-want +got):\n%s", diff)
	}
	mustGet(t, db, mustFamily(t, db, "b"), "k")
}

func mustFamily(t testing.TB, db *pipeline.DB, name string) *pipeline.ColumnFamily {
	t.Helper()
	cf, err := db.ColumnFamily(name)
	if err != nil {
		t.Fatal(err)
	}
	return cf
}

// TestCheckpointDuringReplay: a Checkpoint while a Replay holds the database fails with
// ErrReplaying instead of copying a family the Replay created ahead of its entry (the
// copy's next Open would record that creation again, and its log would part from the
// source's); once the Replay is done the Checkpoint succeeds.
func TestCheckpointDuringReplay(t *testing.T) {
	src, _ := openDB(t, pipeline.Config{})
	f := dropCreate(t, src, "f")
	put(t, src, f, "k", "v")
	entries := wholeLog(t, src)

	inReplay, resume := make(chan struct{}), make(chan struct{})
	var once sync.Once
	hooks := &testhooks.Hooks{BeforeReplayEntry: func(pos uint64) {
		if pos == 2 { // after the entry creating f, before the write to it
			once.Do(func() { close(inReplay) })
			<-resume
		}
	}}
	dst, _ := openDB(t, testhooks.With(pipeline.Config{}, hooks))
	replayed := make(chan error, 1)
	go func() { replayed <- dst.Replay(context.Background(), entries) }()
	recv(t, inReplay, "the replay to reach position 2")
	_, err := dst.Checkpoint(filepath.Join(t.TempDir(), "during"))
	close(resume)
	if !errors.Is(err, pipeline.ErrReplaying) {
		t.Errorf("Checkpoint during a Replay = %v, want ErrReplaying", err)
	}
	if err := recv(t, replayed, "the replay"); err != nil {
		t.Fatal(err)
	}
	if covered, err := dst.Checkpoint(filepath.Join(t.TempDir(), "after")); err != nil || covered != src.LastPosition() {
		t.Errorf("Checkpoint after the Replay = %d, %v; want %d", covered, err, src.LastPosition())
	}
}
