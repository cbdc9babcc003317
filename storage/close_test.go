package storage_test

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rockline/rockline/storage"
)

// worker runs a mix of every kind of call until one returns ErrClosed. It keeps a
// snapshot and an iterator open across the Close.
func closeWorker(db *storage.DB, id int, fams []*storage.Family, ops *atomic.Int64, ready func()) error {
	snap, err := db.NewSnapshot()
	if err != nil {
		ready()
		return fmt.Errorf("worker %d: NewSnapshot: %w", id, err)
	}
	defer snap.Release()
	it, err := db.NewIterator(fams[id%len(fams)], storage.IterOptions{Snapshot: snap})
	if err != nil {
		ready()
		return fmt.Errorf("worker %d: NewIterator: %w", id, err)
	}
	defer it.Close()
	it.First()

	for i := 0; ; i++ {
		err := closeStep(db, id, i, fams, snap, it)
		if i == 0 {
			ready()
		}
		ops.Add(1)
		if errors.Is(err, storage.ErrClosed) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("worker %d step %d: %w", id, i, err)
		}
	}
}

func closeStep(db *storage.DB, id, i int, fams []*storage.Family, snap *storage.Snapshot, it *storage.Iterator) error {
	f := fams[(id+i)%len(fams)]
	key := []byte(fmt.Sprintf("k%03d", (id*131+i)%200))
	switch (id + i) % 9 {
	case 0:
		b := storage.NewBatch()
		for j, g := range fams {
			if err := b.Put(g, key, []byte(fmt.Sprintf("w%d-%d-%d", id, i, j))); err != nil {
				return err
			}
		}
		if err := b.Delete(f, []byte("k000")); err != nil {
			return err
		}
		return db.Write(b)
	case 1:
		_, err := db.Get(f, key, nil)
		if errors.Is(err, storage.ErrNotFound) {
			return nil
		}
		return err
	case 2:
		_, err := db.Get(f, key, snap)
		if errors.Is(err, storage.ErrNotFound) {
			return nil
		}
		return err
	case 3:
		s, err := db.NewSnapshot()
		if err != nil {
			return err
		}
		defer s.Release()
		_, err = db.Get(fams[len(fams)-1], key, s)
		if errors.Is(err, storage.ErrNotFound) {
			return nil
		}
		return err
	case 4:
		short, err := db.NewIterator(f, storage.IterOptions{Lower: []byte("k050"), Upper: []byte("k150")})
		if err != nil {
			return err
		}
		defer short.Close()
		n := 0
		for short.First(); short.Valid() && n < 10; short.Next() {
			_, _ = short.Key(), short.Value()
			n++
		}
		return short.Err()
	case 5:
		// The long-lived iterator: walk it, restart at the end.
		if !it.Valid() {
			it.First()
		}
		_, _ = it.Key(), it.Value()
		it.Next()
		return it.Err()
	case 6:
		_, err := db.Get(fams[0], key, nil)
		if errors.Is(err, storage.ErrNotFound) {
			return nil
		}
		return err
	case 7:
		_, err := db.Stats()
		return err
	default:
		if _, err := db.Families(); err != nil {
			return err
		}
		_, err := db.Family("a")
		return err
	}
}

func TestCloseWithCallsInFlight(t *testing.T) {
	db := openDB(t, storage.Options{Families: map[string]storage.FamilyOptions{"a": {}}})
	fa := mustFamily(t, db, "a")
	fams := []*storage.Family{db.Default(), fa}
	b := storage.NewBatch()
	for i := range 200 {
		mustPut(t, b, fams[i%2], fmt.Sprintf("k%03d", i), "seed")
	}
	mustWrite(t, db, b)
	pendingSnap, err := db.NewSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	pendingIt, err := db.NewIterator(fa, storage.IterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pendingIt.First()

	const workers = 8
	var ops atomic.Int64
	var ready, done sync.WaitGroup
	ready.Add(workers)
	errs := make(chan error, workers)
	for id := range workers {
		done.Go(func() {
			if err := closeWorker(db, id, fams, &ops, ready.Done); err != nil {
				errs <- err
			}
		})
	}
	ready.Wait()
	// Let the workers get well into their mix before closing.
	deadline := time.Now().Add(10 * time.Second)
	for ops.Load() < 50*workers && time.Now().Before(deadline) {
		runtime.Gosched()
	}

	const closers = 4
	var closeWG sync.WaitGroup
	start := make(chan struct{})
	closeErrs := make([]error, closers)
	for i := range closers {
		closeWG.Go(func() {
			<-start
			closeErrs[i] = db.Close()
		})
	}
	close(start)
	closeWG.Wait()
	done.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for i, err := range closeErrs {
		if err != nil {
			t.Errorf("concurrent Close #%d: %v", i, err)
		}
	}
	if err := db.Close(); err != nil {
		t.Errorf("Close again: %v", err)
	}

	batch := storage.NewBatch()
	mustPut(t, batch, fa, "k", "v")
	calls := map[string]func() error{
		"Get": func() error { _, err := db.Get(fa, []byte("k000"), nil); return err },
		"Get at snapshot": func() error {
			_, err := db.Get(fa, []byte("k000"), pendingSnap)
			return err
		},
		"Write":       func() error { return db.Write(batch) },
		"NewSnapshot": func() error { _, err := db.NewSnapshot(); return err },
		"NewIterator": func() error { _, err := db.NewIterator(fa, storage.IterOptions{}); return err },
		"CreateFamily": func() error {
			_, err := db.CreateFamily("new", storage.FamilyOptions{})
			return err
		},
		"DropFamily":   func() error { return db.DropFamily("a") },
		"Family":       func() error { _, err := db.Family("a"); return err },
		"Families":     func() error { _, err := db.Families(); return err },
		"Stats":        func() error { _, err := db.Stats(); return err },
		"Flush":        func() error { return db.Flush() },
		"Iterator.Err": pendingIt.Err,
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, storage.ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
	// Handles still held are inert, and releasing them is a no-op.
	pendingIt.First()
	pendingIt.Seek([]byte("k"))
	pendingIt.Next()
	if pendingIt.Valid() || pendingIt.Key() != nil || pendingIt.Value() != nil {
		t.Error("iterator still positioned after Close")
	}
	pendingIt.Close()
	pendingIt.Close()
	pendingSnap.Release()
	pendingSnap.Release()
	if batch.Count() != 1 {
		t.Errorf("refused Write changed the batch: Count %d", batch.Count())
	}
}

// TestReleaseBeforeClose frees handles explicitly, then closes.
func TestReleaseBeforeClose(t *testing.T) {
	db := openDB(t, storage.Options{})
	put(t, db, db.Default(), "k", "v")
	var snaps []*storage.Snapshot
	var its []*storage.Iterator
	for range 10 {
		s, err := db.NewSnapshot()
		if err != nil {
			t.Fatal(err)
		}
		it, err := db.NewIterator(db.Default(), storage.IterOptions{Snapshot: s})
		if err != nil {
			t.Fatal(err)
		}
		snaps, its = append(snaps, s), append(its, it)
	}
	for i := range snaps {
		if i%2 == 0 { // release the snapshot before its iterator on every other pair
			snaps[i].Release()
			its[i].Close()
		} else {
			its[i].Close()
			snaps[i].Release()
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	for i := range snaps {
		snaps[i].Release()
		its[i].Close()
	}
}
