package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/internal/testhooks"
	"github.com/rockline/rockline/pipeline"
)

// familyContents dumps every key and value of every live column family (as listed by
// ColumnFamilies), read through a View iterator.
func familyContents(t testing.TB, db *pipeline.DB) map[string]map[string]string {
	t.Helper()
	names, err := db.ColumnFamilies()
	if err != nil {
		t.Fatalf("ColumnFamilies: %v", err)
	}
	out := make(map[string]map[string]string, len(names))
	for _, n := range names {
		cf, err := db.ColumnFamily(n)
		if err != nil {
			t.Fatalf("ColumnFamily(%s): %v", n, err)
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
			t.Fatalf("dump %s: %v", n, err)
		}
		out[n] = kv
	}
	return out
}

// sameState fails unless got has the same families, family contents, log and streams
// as want.
func sameState(t *testing.T, want, got *pipeline.DB, streams []string) {
	t.Helper()
	wantNames, err := want.ColumnFamilies()
	if err != nil {
		t.Fatal(err)
	}
	gotNames, err := got.ColumnFamilies()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantNames, gotNames); diff != "" {
		t.Errorf("ColumnFamilies (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(familyContents(t, want), familyContents(t, got)); diff != "" {
		t.Errorf("family contents (-want +got):\n%s", diff)
	}
	if w, g := want.LastPosition(), got.LastPosition(); w != g {
		t.Errorf("LastPosition: want %d, got %d", w, g)
	}
	if diff := cmp.Diff(wholeLog(t, want), wholeLog(t, got)); diff != "" {
		t.Errorf("log (-want +got):\n%s", diff)
	}
	for _, s := range streams {
		if diff := cmp.Diff(streamEvents(t, want, s), streamEvents(t, got, s)); diff != "" {
			t.Errorf("stream %s (-want +got):\n%s", s, diff)
		}
	}
}

// store returns db's event store.
func store(t testing.TB, db *pipeline.DB) *eventstore.Store {
	t.Helper()
	es, err := eventstore.New(db)
	if err != nil {
		t.Fatalf("eventstore.New: %v", err)
	}
	return es
}

// streamEvents reads the whole stream forward.
func streamEvents(t testing.TB, db *pipeline.DB, stream string) []eventstore.RecordedEvent {
	t.Helper()
	evs, err := store(t, db).ReadStream(context.Background(), stream, 0, 1<<20)
	if err != nil {
		t.Fatalf("ReadStream(%s): %v", stream, err)
	}
	return evs
}

// ignorable reports whether a workload operation failed for a reason the workload
// provokes on purpose: contention beyond Update's retries, or the family it wrote being
// dropped (or not yet re-created) under it.
func ignorable(err error) bool {
	return errors.Is(err, pipeline.ErrConflict) || errors.Is(err, pipeline.ErrColumnFamilyDropped) ||
		errors.Is(err, pipeline.ErrColumnFamilyNotFound)
}

// workloadOp runs one random operation: puts, deletes, overwrites and read-modify-writes
// over families, stream appends, events-only commits, and mixes of them.
func workloadOp(ctx context.Context, db *pipeline.DB, rng *rand.Rand, tag string, families, streams []string) error {
	fam := families[rng.IntN(len(families))]
	k := key("k%02d", rng.IntN(16))
	stream := streams[rng.IntN(len(streams))]
	ev := pipeline.Event{ID: tag, Type: "happened", Data: []byte(tag)}
	withCF := func(fn func(tx *pipeline.Txn, cf *pipeline.ColumnFamily) error) error {
		return db.Update(ctx, func(tx *pipeline.Txn) error {
			cf, err := db.ColumnFamily(fam)
			if err != nil {
				return err
			}
			return fn(tx, cf)
		})
	}
	switch op := rng.IntN(10); op {
	case 0, 1, 2:
		return withCF(func(tx *pipeline.Txn, cf *pipeline.ColumnFamily) error { return tx.Put(cf, k, []byte(tag)) })
	case 3:
		return withCF(func(tx *pipeline.Txn, cf *pipeline.ColumnFamily) error { return tx.Delete(cf, k) })
	case 4:
		return withCF(func(tx *pipeline.Txn, cf *pipeline.ColumnFamily) error {
			v, err := tx.Get(cf, k)
			if err != nil && !errors.Is(err, pipeline.ErrNotFound) {
				return err
			}
			return tx.Put(cf, k, append(v, '+'))
		})
	case 5:
		return withCF(func(tx *pipeline.Txn, cf *pipeline.ColumnFamily) error {
			for i := range 3 { // overwrites within one commit; the last one wins
				if err := tx.Put(cf, k, []byte(fmt.Sprintf("%s/%d", tag, i))); err != nil {
					return err
				}
			}
			return tx.Delete(cf, key("k%02d", rng.IntN(16)))
		})
	case 6:
		es, err := eventstore.New(db)
		if err == nil {
			_, err = es.Append(ctx, stream, eventstore.Any, ev)
		}
		return err
	case 7:
		return db.Update(ctx, func(tx *pipeline.Txn) error { return tx.AddEvents(ev) })
	default:
		es, err := eventstore.New(db)
		if err != nil {
			return err
		}
		return withCF(func(tx *pipeline.Txn, cf *pipeline.ColumnFamily) error {
			if err := tx.Put(cf, k, []byte(tag)); err != nil {
				return err
			}
			if err := tx.Put(db.Default(), k, []byte(tag)); err != nil {
				return err
			}
			if err := es.AppendTxn(tx, stream, eventstore.Any, ev); err != nil {
				return err
			}
			return tx.AddEvents(pipeline.Event{Type: "side-effect"})
		})
	}
}

// TestRebuildEqualsLiveState: after a random concurrent workload (4 goroutines, both
// policies) over three families, the default family and three streams, during which one
// family is dropped and re-created with new data, Rebuild produces a database with the
// same families, contents, streams and an identical log.
func TestRebuildEqualsLiveState(t *testing.T) {
	const workers, ops = 4, 120
	families := []string{"a", "b", "c"}
	streams := []string{"s0", "s1", "s2"}
	for pi, pol := range policies {
		t.Run(pol, func(t *testing.T) {
			ctx := context.Background()
			db, _ := openDB(t, pipeline.Config{Validation: pol, Lanes: 4})
			for _, f := range families {
				if _, err := db.CreateColumnFamily(f); err != nil {
					t.Fatal(err)
				}
			}
			var succeeded, skipped atomic.Int64
			start := make(chan struct{})
			var wg sync.WaitGroup
			for w := range workers {
				wg.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(pi), uint64(w)))
					<-start
					for i := range ops {
						if w == 0 && i == ops/2 {
							if err := db.DropColumnFamily("b"); err != nil {
								t.Errorf("drop b: %v", err)
								return
							}
							cf, err := db.CreateColumnFamily("b")
							if err != nil {
								t.Errorf("re-create b: %v", err)
								return
							}
							for j := range 4 {
								tx := db.Begin()
								if err := tx.Put(cf, key("new%d", j), []byte("after the drop")); err != nil {
									t.Errorf("put into the new b: %v", err)
									tx.Discard()
									return
								}
								if err := tx.Commit(ctx); err != nil && !errors.Is(err, pipeline.ErrConflict) {
									t.Errorf("commit into the new b: %v", err)
									return
								}
							}
						}
						err := workloadOp(ctx, db, rng, fmt.Sprintf("w%d/%d", w, i), families, streams)
						switch {
						case err == nil:
							succeeded.Add(1)
						case ignorable(err):
							skipped.Add(1)
						default:
							t.Errorf("worker %d op %d: %v", w, i, err)
							return
						}
					}
				})
			}
			close(start)
			wait(t, wg.Wait, "workload")
			if t.Failed() {
				t.FailNow()
			}
			t.Logf("%d operations succeeded, %d skipped, log at %d", succeeded.Load(), skipped.Load(), db.LastPosition())

			// The workload must have reached the second generation of b through the log.
			gen2 := false
			for _, e := range wholeLog(t, db) {
				for _, w := range e.Writes {
					gen2 = gen2 || (w.Family == "b" && w.Generation == 2)
				}
			}
			if !gen2 {
				t.Fatal("no write to the re-created family b in the log")
			}

			rebuilt, err := db.Rebuild(ctx, filepath.Join(t.TempDir(), "rebuilt"), pipeline.Config{})
			if err != nil {
				t.Fatalf("Rebuild: %v", err)
			}
			t.Cleanup(func() {
				if err := rebuilt.Close(); err != nil {
					t.Errorf("close rebuilt: %v", err)
				}
			})
			sameState(t, db, rebuilt, streams)
		})
	}
}

// TestRebuildWriteToDroppedGeneration pins the race a live workload only hits by
// chance: a commit admitted on generation 1 of a family completes after the family was
// dropped, re-created and written, so the log holds a generation-1 write after
// generation-2 writes. That write is invisible in the live database (its family is
// gone); Rebuild and checkpoint-plus-replay must not let it disturb generation 2.
func TestRebuildWriteToDroppedGeneration(t *testing.T) {
	for _, pol := range policies {
		t.Run(pol, func(t *testing.T) {
			ctx := context.Background()
			var armed atomic.Bool
			admitted, proceed := make(chan struct{}), make(chan struct{})
			var once sync.Once
			hooks := &testhooks.Hooks{AfterAdmit: func() {
				if armed.CompareAndSwap(true, false) {
					close(admitted)
					<-proceed
				}
			}}
			db, _ := openDB(t, testhooks.With(pipeline.Config{Validation: pol}, hooks))
			t.Cleanup(func() { once.Do(func() { close(proceed) }) })

			f1, err := db.CreateColumnFamily("f")
			if err != nil {
				t.Fatal(err)
			}
			put(t, db, f1, "old", "gen1")
			cpDir := filepath.Join(t.TempDir(), "cp")
			cpPos, err := db.Checkpoint(cpDir)
			if err != nil {
				t.Fatal(err)
			}

			tx := db.Begin()
			if err := tx.Put(f1, []byte("stale"), []byte("gen1, committed late")); err != nil {
				t.Fatal(err)
			}
			armed.Store(true)
			done := make(chan error, 1)
			go func() { done <- tx.Commit(ctx) }()
			recv(t, admitted, "the generation-1 commit to be admitted")

			if err := db.DropColumnFamily("f"); err != nil {
				t.Fatal(err)
			}
			f2, err := db.CreateColumnFamily("f")
			if err != nil {
				t.Fatal(err)
			}
			newPos := put(t, db, f2, "new", "gen2")
			once.Do(func() { close(proceed) })
			if err := recv(t, done, "the generation-1 commit"); err != nil {
				t.Fatalf("admitted commit on the dropped family: %v (admitted commits complete normally)", err)
			}
			late, err := db.Entry(db.LastPosition())
			if err != nil {
				t.Fatal(err)
			}
			if late.Position <= newPos || len(late.Writes) != 1 || late.Writes[0].Family != "f" || late.Writes[0].Generation != 1 {
				t.Fatalf("last entry %+v: want the generation-1 write after position %d", late, newPos)
			}
			put(t, db, f2, "newer", "gen2")
			if diff := cmp.Diff(map[string]string{"new": "gen2", "newer": "gen2"}, familyContents(t, db)["f"]); diff != "" {
				t.Fatalf("live f (-want +got):\n%s", diff)
			}

			t.Run("Rebuild", func(t *testing.T) {
				rebuilt, err := db.Rebuild(ctx, filepath.Join(t.TempDir(), "rebuilt"), pipeline.Config{})
				if err != nil {
					t.Fatalf("Rebuild: %v", err)
				}
				defer rebuilt.Close()
				sameState(t, db, rebuilt, nil)
			})
			t.Run("checkpoint plus replay", func(t *testing.T) {
				cp := openAt(t, cpDir, pipeline.Config{})
				if err := cp.Replay(ctx, logFrom(t, db, cpPos+1)); err != nil {
					t.Fatalf("Replay: %v", err)
				}
				sameState(t, db, cp, nil)
			})
		})
	}
}

// TestCheckpointPlusTail: a checkpoint taken at position P, opened as a database and
// given the log after P with Replay, equals the live database (families, contents,
// streams, log), including a family created after P and one dropped and re-created
// after P. The log can then be truncated below P+1 but not beyond; truncated positions
// read as ErrLogTruncated, also after reopening, while LastPosition is unchanged and
// commits continue at the next position.
func TestCheckpointPlusTail(t *testing.T) {
	streams := []string{"orders", "payments"}
	for _, pol := range policies {
		t.Run(pol, func(t *testing.T) {
			ctx := context.Background()
			db, dir := openDB(t, pipeline.Config{Validation: pol})
			a, err := db.CreateColumnFamily("a")
			if err != nil {
				t.Fatal(err)
			}
			b, err := db.CreateColumnFamily("b")
			if err != nil {
				t.Fatal(err)
			}
			appendTo := func(stream string, n int) {
				t.Helper()
				for i := range n {
					if _, err := store(t, db).Append(ctx, stream, eventstore.Any, pipeline.Event{Type: "t", Data: []byte(fmt.Sprint(i))}); err != nil {
						t.Fatal(err)
					}
				}
			}
			for i := range 5 {
				put(t, db, db.Default(), fmt.Sprintf("d%d", i), "before")
				put(t, db, a, fmt.Sprintf("a%d", i), "before")
				put(t, db, b, fmt.Sprintf("b%d", i), "before")
			}
			appendTo("orders", 3)

			cpDir := filepath.Join(t.TempDir(), "checkpoint")
			p, err := db.Checkpoint(cpDir)
			if err != nil {
				t.Fatal(err)
			}
			if p != db.LastPosition() {
				t.Fatalf("Checkpoint covers %d, LastPosition is %d", p, db.LastPosition())
			}

			put(t, db, db.Default(), "d0", "after")
			put(t, db, a, "a1", "after")
			if err := db.Update(ctx, func(tx *pipeline.Txn) error { return tx.Delete(a, []byte("a2")) }); err != nil {
				t.Fatal(err)
			}
			c, err := db.CreateColumnFamily("c")
			if err != nil {
				t.Fatal(err)
			}
			put(t, db, c, "c0", "new family")
			if err := db.DropColumnFamily("b"); err != nil {
				t.Fatal(err)
			}
			b2, err := db.CreateColumnFamily("b")
			if err != nil {
				t.Fatal(err)
			}
			put(t, db, b2, "b9", "second generation")
			appendTo("orders", 2)
			appendTo("payments", 2)
			if err := db.Update(ctx, func(tx *pipeline.Txn) error { return tx.AddEvents(pipeline.Event{Type: "tick"}) }); err != nil {
				t.Fatal(err)
			}
			last := db.LastPosition()
			tail := logFrom(t, db, p+1)
			if len(tail) == 0 || tail[0].Position != p+1 || tail[len(tail)-1].Position != last {
				t.Fatalf("tail after %d: %d entries, last position %d", p, len(tail), last)
			}

			cp := openAt(t, cpDir, pipeline.Config{})
			if got := cp.LastPosition(); got != p {
				t.Fatalf("checkpoint LastPosition = %d, want %d", got, p)
			}
			if err := cp.Replay(ctx, tail); err != nil {
				t.Fatalf("Replay: %v", err)
			}
			sameState(t, db, cp, streams)
			if err := cp.Close(); err != nil {
				t.Fatal(err)
			}

			for _, before := range []uint64{0, p + 2, last + 1} {
				if err := db.TruncateLog(before); !errors.Is(err, pipeline.ErrNotCheckpointed) {
					t.Errorf("TruncateLog(%d) with a checkpoint at %d = %v, want ErrNotCheckpointed", before, p, err)
				}
			}
			if _, err := db.ReadLog(1, 1); err != nil {
				t.Fatalf("a refused TruncateLog removed entries: %v", err)
			}
			if err := db.TruncateLog(p + 1); err != nil {
				t.Fatalf("TruncateLog(%d): %v", p+1, err)
			}
			checkTruncated := func(db *pipeline.DB) {
				t.Helper()
				for _, from := range []uint64{0, 1, p} {
					if _, err := db.ReadLog(from, 10); !errors.Is(err, pipeline.ErrLogTruncated) {
						t.Errorf("ReadLog(%d) after truncation = %v, want ErrLogTruncated", from, err)
					}
				}
				if diff := cmp.Diff(tail, logFrom(t, db, p+1)[:len(tail)]); diff != "" {
					t.Errorf("entries kept by the truncation changed (-want +got):\n%s", diff)
				}
			}
			checkTruncated(db)
			if _, err := db.Rebuild(ctx, filepath.Join(t.TempDir(), "rebuilt"), pipeline.Config{}); !errors.Is(err, pipeline.ErrLogTruncated) {
				t.Errorf("Rebuild of a truncated log = %v, want ErrLogTruncated", err)
			}

			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			db = openAt(t, dir, pipeline.Config{Validation: pol})
			if got := db.LastPosition(); got != last {
				t.Fatalf("LastPosition after reopening = %d, want %d", got, last)
			}
			checkTruncated(db)
			if pos := put(t, db, db.Default(), "next", "v"); pos != last+1 {
				t.Errorf("first commit after reopening at %d, want %d", pos, last+1)
			}
			if got := len(logFrom(t, db, p+1)); got != len(tail)+1 {
				t.Errorf("%d entries from %d, want %d", got, p+1, len(tail)+1)
			}
		})
	}
}
