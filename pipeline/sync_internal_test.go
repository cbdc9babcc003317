package pipeline

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rockline/rockline/internal/storagefaults"
	"github.com/rockline/rockline/internal/testhooks"
)

// syncGate is a Faults.Sync hook that holds every WAL sync until the test lets it go:
// entered receives once per sync as it starts, and each value sent on release ends one
// sync with that error (nil: the real fsync runs). It holds nothing until armed (Open
// writes and syncs records of its own).
type syncGate struct {
	armed   atomic.Bool
	entered chan struct{}
	release chan error
	writes  chan struct{} // one per batch write, before it reaches RocksDB
}

func newSyncGate() *syncGate {
	return &syncGate{entered: make(chan struct{}, 16), release: make(chan error), writes: make(chan struct{}, 64)}
}

func (g *syncGate) faults() *storagefaults.Faults {
	return &storagefaults.Faults{
		Sync: func() error {
			if !g.armed.Load() {
				return nil
			}
			g.entered <- struct{}{}
			return <-g.release
		},
		Write: func() error {
			if !g.armed.Load() {
				return nil
			}
			g.writes <- struct{}{}
			return nil
		},
	}
}

// syncDB opens a database with Sync whose WAL syncs g holds.
func syncDB(t *testing.T, pol string, g *syncGate) *DB {
	t.Helper()
	cfg := testhooks.With(Config{Validation: pol, Sync: true, Lanes: 2}, &testhooks.Hooks{StorageFaults: g.faults()})
	db, err := Open(filepath.Join(t.TempDir(), "db"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	g.armed.Store(true)
	t.Cleanup(func() {
		// A test that failed may leave a sync held: let every one go until Close is done.
		g.armed.Store(false)
		stop := make(chan struct{})
		served := make(chan struct{})
		go func() {
			defer close(served)
			for {
				select {
				case g.release <- nil:
				case <-stop:
					return
				}
			}
		}()
		db.Close()
		close(stop)
		<-served
	})
	return db
}

// commitAsync commits key=value in a goroutine, inline or through a lane, and reports
// the outcome on the returned channel.
func commitAsync(db *DB, inline bool, key string) <-chan error {
	done := make(chan error, 1)
	go func() {
		tx := db.Begin()
		if err := tx.Put(db.Default(), []byte(key), []byte("v")); err != nil {
			done <- err
			return
		}
		if inline {
			done <- tx.CommitInline()
		} else {
			done <- tx.Commit(context.Background())
		}
	}()
	return done
}

func await[V any](t *testing.T, ch <-chan V, what string) V {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
	var zero V
	return zero
}

// readKey reads key in the default family in a fresh transaction.
func readKey(t *testing.T, db *DB, key string) (string, bool) {
	t.Helper()
	tx := db.Begin()
	defer tx.Discard()
	v, err := tx.Get(db.Default(), []byte(key))
	switch {
	case errors.Is(err, ErrNotFound):
		return "", false
	case err != nil:
		t.Fatal(err)
	}
	return string(v), true
}

func pending(ch <-chan error) bool {
	select {
	case err := <-ch:
		panic(fmt.Sprintf("returned early: %v", err))
	default:
		return true
	}
}

// TestSyncPublishesAfterFsync: with Sync, a commit is written without an fsync and
// published (and its caller answered) only after an fsync that began after its write;
// while that fsync runs the next commit is written (the pipeline does not wait for the
// disk), and it waits for a later fsync of its own. No transaction reads a commit
// before the fsync that covers it.
func TestSyncPublishesAfterFsync(t *testing.T) {
	for _, pol := range []string{Parallel, Serial} {
		for _, inline := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/inline=%v", pol, inline), func(t *testing.T) {
				g := newSyncGate()
				db := syncDB(t, pol, g)
				base := db.LastPosition()

				first := commitAsync(db, inline, "a")
				await(t, g.writes, "the first commit's write")
				await(t, g.entered, "the first commit's fsync")
				if got := db.LastPosition(); got != base || !pending(first) {
					t.Fatalf("published %d (from %d) before the fsync returned", got, base)
				}
				if v, ok := readKey(t, db, "a"); ok {
					t.Fatalf("a transaction read %q, written but not yet synced", v)
				}

				second := commitAsync(db, !inline, "b")
				await(t, g.writes, "the second commit's write while the first fsync runs")
				if got := db.LastPosition(); got != base || !pending(first) || !pending(second) {
					t.Fatalf("published %d (from %d) before any fsync returned", got, base)
				}

				g.release <- nil // the first fsync: it covers the first commit only
				if err := await(t, first, "the first commit"); err != nil {
					t.Fatal(err)
				}
				if got := db.LastPosition(); got != base+1 {
					t.Fatalf("after the first fsync LastPosition = %d; want %d", got, base+1)
				}
				if _, ok := readKey(t, db, "a"); !ok {
					t.Fatal("a transaction begun after the commit returned does not see it")
				}
				if v, ok := readKey(t, db, "b"); ok {
					t.Fatalf("a transaction read %q, written during the first fsync, not covered by it", v)
				}
				await(t, g.entered, "the second commit's own fsync")
				if got := db.LastPosition(); got != base+1 || !pending(second) {
					t.Fatalf("the second commit was published (%d) by an fsync that began before its write", got)
				}
				g.release <- nil
				if err := await(t, second, "the second commit"); err != nil {
					t.Fatal(err)
				}
				if got := db.LastPosition(); got != base+2 {
					t.Fatalf("LastPosition = %d; want %d", got, base+2)
				}
				st, err := db.StorageStats()
				if err != nil {
					t.Fatal(err)
				}
				if st.WALSyncs < 2 {
					t.Errorf("WALSyncs = %d; want at least the two fsyncs run", st.WALSyncs)
				}
			})
		}
	}
}

// TestSyncFailureStops: a failed fsync stops the database with a *SyncError. Neither
// the commit it was to make durable nor one written while it ran is acknowledged or
// published, and every later commit fails with ErrStopped.
func TestSyncFailureStops(t *testing.T) {
	for _, pol := range []string{Parallel, Serial} {
		t.Run(pol, func(t *testing.T) {
			g := newSyncGate()
			db := syncDB(t, pol, g)
			base := db.LastPosition()

			first := commitAsync(db, false, "a")
			await(t, g.writes, "the first commit's write")
			await(t, g.entered, "the first fsync")
			second := commitAsync(db, true, "b")
			await(t, g.writes, "the second commit's write")
			injected := errors.New("injected: fsync failed")
			g.release <- injected

			for i, ch := range []<-chan error{first, second} {
				err := await(t, ch, "a commit's outcome")
				var se *SyncError
				if !errors.As(err, &se) || !errors.Is(err, ErrStopped) || !errors.Is(err, injected) {
					t.Fatalf("commit %d: err = %v; want a *SyncError matching ErrStopped and wrapping the cause", i+1, err)
				}
				if i == 0 && (se.First != base+1 || se.Last != base+1) {
					t.Errorf("SyncError positions %d..%d; want %d..%d", se.First, se.Last, base+1, base+1)
				}
			}
			if got := db.LastPosition(); got != base {
				t.Fatalf("LastPosition = %d after a failed fsync; want %d", got, base)
			}
			if err := <-commitAsync(db, false, "c"); !errors.Is(err, ErrStopped) {
				t.Fatalf("a commit after the failed fsync: err = %v; want ErrStopped", err)
			}
			if got := db.LastPosition(); got != base {
				t.Fatalf("LastPosition = %d; want %d", got, base)
			}
			if err := db.Close(); err != nil {
				t.Fatalf("Close after a failed fsync: %v", err)
			}
		})
	}
}

// TestSyncCloseDrains: Close waits for an fsync in flight (its commit then succeeds)
// and makes durable what no caller waits for, the fillers of a failed write, before
// storage closes.
func TestSyncCloseDrains(t *testing.T) {
	g := newSyncGate()
	var failWrite atomic.Bool
	f := g.faults()
	write := f.Write
	f.Write = func() error {
		if failWrite.Load() {
			failWrite.Store(false) // the commit's write fails; its fillers' write does not
			return errors.New("injected: write failed")
		}
		return write()
	}
	dir := filepath.Join(t.TempDir(), "db")
	db, err := Open(dir, testhooks.With(Config{Sync: true}, &testhooks.Hooks{StorageFaults: f}))
	if err != nil {
		t.Fatal(err)
	}
	g.armed.Store(true)
	base := db.LastPosition()

	failWrite.Store(true)
	if err := <-commitAsync(db, false, "lost"); err == nil {
		t.Fatal("a commit whose write failed succeeded")
	}
	await(t, g.writes, "the fillers' write")
	if got := db.LastPosition(); got != base {
		t.Fatalf("fillers published (%d) before an fsync", got)
	}

	done := commitAsync(db, false, "kept")
	await(t, g.writes, "the commit's write")
	await(t, g.entered, "its fsync")
	closed := make(chan error, 1)
	go func() { closed <- db.Close() }()
	if !pending(done) || !pending(closed) {
		t.Fatal("unreachable")
	}
	g.release <- nil
	if err := await(t, done, "the commit"); err != nil {
		t.Fatalf("a commit whose fsync was in flight at Close: %v", err)
	}
	// Close's drain has nothing left (the fsync covered the fillers too), or syncs once more.
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-g.entered:
		g.release <- nil
		if err := await(t, closed, "Close"); err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Close did not return")
	}
	if got := db.LastPosition(); got != base+2 {
		t.Fatalf("LastPosition at Close = %d; want %d (the filler and the commit)", got, base+2)
	}

	re, err := Open(dir, Config{Sync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer re.Close()
	if got := re.LastPosition(); got != base+2 {
		t.Fatalf("reopened LastPosition = %d; want %d", got, base+2)
	}
}
