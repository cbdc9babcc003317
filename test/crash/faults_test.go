package crash

// Fault injection through the storage seam (testhooks.Hooks.StorageFaults). Which behaviour
// applies to each fault:
//
//   - A batch write that fails after validation (Faults.Write fails the commit's
//     write, and only that one): the commit's position is already assigned, so the
//     validator writes a filler entry there with a second Write call, which succeeds.
//     The commit fails with the storage error, which wraps the injected error; nothing
//     of it is visible; ReadLog shows Filler at its position; the log has no gap and
//     the database keeps committing (TestFaultWriteFilled).
//   - A physical drop that fails (Faults.Drop): DropColumnFamily still succeeds, since
//     the drop is recorded durably first and the family is retired at once. The
//     physical drop is counted as failed and stays pending; it is retried at the next
//     DropColumnFamily, and at Close (which reports it as still pending if it fails
//     again), and completed by the next Open (TestFaultDropRetried).
//   - A failed write and a failed filler (two Write failures in a row): the position
//     can be neither written nor filled, so the database stops. The commit gets the
//     write's error; every later commit fails with ErrStopped, and subscriptions end
//     with it. A concurrent commit that got a higher position and wrote successfully
//     fails with ErrStopped too (it waited for the unfillable position), yet its data
//     is durable: after reopen the gap is filled and that commit is in the log. The
//     reopened database is dense and commits again (TestFaultWriteAndFillerStop).

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/internal/storagefaults"
	"github.com/rockline/rockline/internal/testhooks"
	"github.com/rockline/rockline/pipeline"
)

// injectedError is the error the fault hooks return.
type injectedError struct{ what string }

func (e *injectedError) Error() string { return "injected fault: " + e.what }

// faultHooks lets a test swap the storage fault hooks of an open database.
type faultHooks struct {
	write atomic.Pointer[func() error]
	drop  atomic.Pointer[func(string) error]
}

func (h *faultHooks) faults() *storagefaults.Faults {
	return &storagefaults.Faults{
		Write: func() error {
			if f := h.write.Load(); f != nil {
				return (*f)()
			}
			return nil
		},
		Drop: func(name string) error {
			if f := h.drop.Load(); f != nil {
				return (*f)(name)
			}
			return nil
		},
	}
}

func (h *faultHooks) setWrite(f func() error)      { h.write.Store(&f) }
func (h *faultHooks) setDrop(f func(string) error) { h.drop.Store(&f) }

// failWrites returns a Write hook that fails the next len(errs) writes with errs, in
// order, and lets every later one through.
func failWrites(errs ...error) func() error {
	var mu sync.Mutex
	return func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(errs) == 0 {
			return nil
		}
		err := errs[0]
		errs = errs[1:]
		return err
	}
}

// openFaulty opens dir with the fault hooks and closes it at cleanup.
func openFaulty(t *testing.T, dir string, cfg pipeline.Config) *pipeline.DB {
	t.Helper()
	db, err := pipeline.Open(dir, cfg)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// putKey commits key=value in cf through the given path and returns the position.
func putKey(db *pipeline.DB, cf *pipeline.ColumnFamily, key, value string, sync bool) (uint64, error) {
	tx := db.Begin()
	if err := tx.Put(cf, []byte(key), []byte(value)); err != nil {
		tx.Discard()
		return 0, err
	}
	if sync {
		return 0, tx.CommitInline()
	}
	return tx.CommitPosition(context.Background())
}

// absent fails the test if key exists in cf.
func absent(t *testing.T, db *pipeline.DB, cf *pipeline.ColumnFamily, key string) {
	t.Helper()
	err := db.View(func(tx *pipeline.Txn) error {
		v, err := tx.Get(cf, []byte(key))
		if err == nil {
			return fmt.Errorf("key %q = %q, want it absent", key, v)
		}
		if !errors.Is(err, pipeline.ErrNotFound) {
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// value returns key's value in cf, failing the test when it is missing.
func value(t *testing.T, db *pipeline.DB, cf *pipeline.ColumnFamily, key string) string {
	t.Helper()
	var out string
	err := db.View(func(tx *pipeline.Txn) error {
		v, err := tx.Get(cf, []byte(key))
		out = string(v)
		return err
	})
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	return out
}

// TestFaultWriteFilled fails exactly one commit's batch write after validation, under
// both policies and both commit paths: the commit fails with an error wrapping the
// injected one, its position holds a filler, and the database goes on.
func TestFaultWriteFilled(t *testing.T) {
	for _, policy := range []string{pipeline.Parallel, pipeline.Serial} {
		for _, sync := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/sync=%v", policy, sync), func(t *testing.T) {
				var hooks faultHooks
				dir := filepath.Join(t.TempDir(), "db")
				db := openFaulty(t, dir, testhooks.With(pipeline.Config{Validation: policy}, &testhooks.Hooks{StorageFaults: hooks.faults()}))
				if err := initBank(context.Background(), db); err != nil {
					t.Fatal(err)
				}
				cf := db.Default()
				if _, err := putKey(db, cf, "before", "1", false); err != nil {
					t.Fatal(err)
				}
				before := db.LastPosition()

				injected := &injectedError{what: "write of the chosen commit"}
				hooks.setWrite(failWrites(injected))
				_, err := putKey(db, cf, "doomed", "x", sync)
				var ie *injectedError
				if !errors.As(err, &ie) || ie != injected {
					t.Fatalf("commit with a failed write: %v, want an error wrapping %q", err, injected)
				}
				if errors.Is(err, pipeline.ErrStopped) || !strings.Contains(err.Error(), "write batch") || !strings.Contains(err.Error(), injected.Error()) {
					t.Fatalf("commit with a failed write: %q: want the storage write error naming the injected fault, not ErrStopped", err)
				}
				t.Logf("failed commit: %v", err)

				if got := db.LastPosition(); got != before+1 {
					t.Fatalf("LastPosition = %d after the failed commit, want %d (its position, filled)", got, before+1)
				}
				es, err := db.ReadLog(before+1, 10)
				if err != nil || len(es) != 1 || !es[0].Filler || es[0].Position != before+1 || len(es[0].Writes) != 0 {
					t.Fatalf("ReadLog(%d) = %+v, %v: want one filler entry", before+1, es, err)
				}
				absent(t, db, cf, "doomed")

				// The database keeps working, densely.
				pos, err := putKey(db, cf, "after", "2", false)
				if err != nil || pos != before+2 {
					t.Fatalf("commit after the fault: position %d, %v; want %d, nil", pos, err, before+2)
				}
				if err := db.Update(context.Background(), func(tx *pipeline.Txn) error {
					return tx.Put(cf, []byte("update"), []byte("3"))
				}); err != nil {
					t.Fatalf("Update after the fault: %v", err)
				}
				if _, err := readLog(db); err != nil {
					t.Fatal(err)
				}
				if err := checkBank(db); err != nil {
					t.Fatal(err)
				}
				if err := checkReplay(context.Background(), db, filepath.Join(t.TempDir(), "rebuild"), nil); err != nil {
					t.Fatal(err)
				}

				// The filler survives a reopen.
				if err := db.Close(); err != nil {
					t.Fatalf("Close: %v", err)
				}
				db = openFaulty(t, dir, pipeline.Config{Validation: policy})
				if e, err := db.Entry(before + 1); err != nil || !e.Filler {
					t.Fatalf("after reopen, Entry(%d) = %+v, %v: want the filler", before+1, e, err)
				}
				absent(t, db, db.Default(), "doomed")
				if got := value(t, db, db.Default(), "after"); got != "2" {
					t.Fatalf("after reopen, after = %q", got)
				}
			})
		}
	}
}

// TestFaultDropRetried fails physical drops: the drop itself succeeds (it is durable
// and the family is gone at once), the physical drop stays pending, is retried by the
// next drop, and one still failing at Close is completed by the next Open.
func TestFaultDropRetried(t *testing.T) {
	ctx := context.Background()
	var hooks faultHooks
	var attempts sync.Map // family name -> *atomic.Int32
	count := func(name string) int {
		n, _ := attempts.LoadOrStore(name, new(atomic.Int32))
		return int(n.(*atomic.Int32).Add(1))
	}
	injected := &injectedError{what: "physical drop"}
	// Every attempt on "doomed" fails; "once" fails only its first attempt.
	hooks.setDrop(func(name string) error {
		n := count(name)
		if name == "doomed" || (name == "once" && n == 1) {
			return injected
		}
		return nil
	})
	dir := filepath.Join(t.TempDir(), "db")
	db, err := pipeline.Open(dir, testhooks.With(pipeline.Config{}, &testhooks.Hooks{StorageFaults: hooks.faults()}))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"doomed", "once", "other"} {
		cf, err := db.CreateColumnFamily(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := putKey(db, cf, "k", name, false); err != nil {
			t.Fatal(err)
		}
	}
	doomed, err := db.ColumnFamily("doomed")
	if err != nil {
		t.Fatal(err)
	}

	if err := db.DropColumnFamily("doomed"); err != nil {
		t.Fatalf("DropColumnFamily with a failing physical drop: %v, want nil (the drop is recorded)", err)
	}
	if _, err := db.ColumnFamily("doomed"); !errors.Is(err, pipeline.ErrColumnFamilyNotFound) {
		t.Fatalf("ColumnFamily(doomed) after the drop: %v", err)
	}
	if _, err := putKey(db, doomed, "k2", "v", false); !errors.Is(err, pipeline.ErrColumnFamilyDropped) {
		t.Fatalf("write to the dropped family: %v, want ErrColumnFamilyDropped", err)
	}
	st, err := db.StorageStats()
	if err != nil {
		t.Fatal(err)
	}
	if st.PendingDrops != 1 || st.FailedDrops != 1 || !strings.Contains(st.LastDropError, injected.Error()) {
		t.Fatalf("after a failed physical drop: pending %d, failed %d, last error %q; want 1, 1, the injected error", st.PendingDrops, st.FailedDrops, st.LastDropError)
	}

	// "once" fails its first attempt and succeeds when the next drop retries it.
	if err := db.DropColumnFamily("once"); err != nil {
		t.Fatal(err)
	}
	if err := db.DropColumnFamily("other"); err != nil {
		t.Fatal(err)
	}
	st, err = db.StorageStats()
	if err != nil {
		t.Fatal(err)
	}
	if st.PendingDrops != 1 || st.CompletedDrops != 2 {
		t.Fatalf("after the retry by the next drop: pending %d, completed %d; want 1 (doomed), 2 (once, other)", st.PendingDrops, st.CompletedDrops)
	}
	if _, err := putKey(db, db.Default(), "still", "works", false); err != nil {
		t.Fatalf("commit while a drop is pending: %v", err)
	}

	// Close retries "doomed" once more, fails, and says so.
	err = db.Close()
	if err == nil || !strings.Contains(err.Error(), `"doomed"`) {
		t.Fatalf("Close with a drop that keeps failing: %v, want an error naming the pending drop", err)
	}
	t.Logf("Close: %v", err)
	before := count("doomed") - 1

	// The next Open completes it.
	var opened []string
	var mu sync.Mutex
	hooks.setDrop(func(name string) error {
		mu.Lock()
		defer mu.Unlock()
		opened = append(opened, name)
		return nil
	})
	db = openFaulty(t, dir, testhooks.With(pipeline.Config{}, &testhooks.Hooks{StorageFaults: hooks.faults()}))
	mu.Lock()
	if len(opened) != 1 || opened[0] != "doomed" {
		t.Fatalf("physical drops run by Open: %q, want [doomed]", opened)
	}
	mu.Unlock()
	st, err = db.StorageStats()
	if err != nil {
		t.Fatal(err)
	}
	if st.PendingDrops != 0 || st.CompletedDrops != 1 {
		t.Fatalf("after reopen: pending %d, completed %d; want 0, 1", st.PendingDrops, st.CompletedDrops)
	}
	names, err := db.ColumnFamilies()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if n == "doomed" || n == "once" || n == "other" {
			t.Fatalf("family %q is back after reopen: %v", n, names)
		}
	}
	again, err := db.CreateColumnFamily("doomed")
	if err != nil {
		t.Fatal(err)
	}
	absent(t, db, again, "k")
	if _, err := putKey(db, again, "k", "new", false); err != nil {
		t.Fatal(err)
	}
	if _, err := readLog(db); err != nil {
		t.Fatal(err)
	}
	if err := checkReplay(ctx, db, filepath.Join(t.TempDir(), "rebuild"), nil); err != nil {
		t.Fatal(err)
	}
	t.Logf("doomed: %d failed physical drop attempts before the reopen completed it", before)
}

// TestFaultWriteAndFillerStop fails a commit's write and then its filler: the
// database stops, and a reopen fills the gap and commits again.
func TestFaultWriteAndFillerStop(t *testing.T) {
	for _, policy := range []string{pipeline.Parallel, pipeline.Serial} {
		t.Run(policy, func(t *testing.T) {
			ctx := context.Background()
			var hooks faultHooks
			dir := filepath.Join(t.TempDir(), "db")
			// Many buckets: A and B must not share one (B would wait for A's locks
			// instead of writing); with 2^20 the chance is one in a million.
			db, err := pipeline.Open(dir, testhooks.With(pipeline.Config{Validation: policy, Buckets: 1 << 20}, &testhooks.Hooks{StorageFaults: hooks.faults()}))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			es, err := eventstore.New(db)
			if err != nil {
				t.Fatal(err)
			}
			if err := initBank(ctx, db); err != nil {
				t.Fatal(err)
			}
			cf := db.Default()
			before := db.LastPosition()
			sub, err := db.Subscribe(ctx, 0, func(pipeline.LogEntry) error { return nil })
			if err != nil {
				t.Fatal(err)
			}

			writeErr := &injectedError{what: "write"}
			fillErr := &injectedError{what: "filler"}
			// Both policies assign positions only in the writer's leader, one group at a
			// time, and fill a failed group before the next gets positions: the failing
			// commit is always the last position, and nothing is written above it.
			hooks.setWrite(failWrites(writeErr, fillErr))
			_, errA := putKey(db, cf, "a", "A", true)
			var ie *injectedError
			if !errors.As(errA, &ie) || ie != writeErr {
				t.Fatalf("commit A: %v, want an error wrapping %q", errA, writeErr)
			}
			hooks.setWrite(nil)

			// Stopped: later commits, by every path, fail with ErrStopped.
			_, err = putKey(db, cf, "later", "x", false)
			if !errors.Is(err, pipeline.ErrStopped) || !strings.Contains(err.Error(), "could not be written or filled") {
				t.Fatalf("commit after the stop: %v, want ErrStopped naming the position", err)
			}
			t.Logf("later commit: %v", err)
			if _, err := putKey(db, cf, "later", "x", true); !errors.Is(err, pipeline.ErrStopped) {
				t.Fatalf("CommitInline after the stop: %v, want ErrStopped", err)
			}
			if err := db.Update(ctx, func(tx *pipeline.Txn) error { return tx.Put(cf, []byte("later"), []byte("x")) }); !errors.Is(err, pipeline.ErrStopped) {
				t.Fatalf("Update after the stop: %v, want ErrStopped", err)
			}
			if _, err := es.Append(ctx, "s", eventstore.Any, pipeline.Event{Type: "t"}); !errors.Is(err, pipeline.ErrStopped) {
				t.Fatalf("Append after the stop: %v, want ErrStopped", err)
			}
			select {
			case <-sub.Done():
			case <-time.After(deadline):
				t.Fatal("subscription did not end after the stop")
			}
			if err := sub.Wait(); !errors.Is(err, pipeline.ErrStopped) {
				t.Fatalf("subscription after the stop: %v, want ErrStopped", err)
			}
			if got := db.LastPosition(); got != before {
				t.Fatalf("LastPosition = %d after the stop, want %d", got, before)
			}
			if err := db.Close(); err != nil {
				t.Fatalf("Close of a stopped database: %v", err)
			}

			// Reopen: the gap is filled, the log is dense, and it commits again.
			db = openFaulty(t, dir, pipeline.Config{Validation: policy})
			cf = db.Default()
			log, err := readLog(db)
			if err != nil {
				t.Fatal(err)
			}
			next := before + 1
			if len(log) != int(before) {
				t.Fatalf("after reopen: log of %d entries, want %d", len(log), before)
			}
			absent(t, db, cf, "a")
			absent(t, db, cf, "later")
			pos, err := putKey(db, cf, "again", "y", false)
			if err != nil || pos != next {
				t.Fatalf("commit after reopen: position %d, %v; want %d", pos, err, next)
			}
			if err := checkBank(db); err != nil {
				t.Fatal(err)
			}
			if err := checkReplay(ctx, db, filepath.Join(t.TempDir(), "rebuild"), nil); err != nil {
				t.Fatal(err)
			}
		})
	}
}
