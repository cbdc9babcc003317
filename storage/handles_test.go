package storage_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rockline/rockline/storage"
)

// heldFreed returns the counters of dropped families' handles.
func heldFreed(t testing.TB, db *storage.DB) (held, freed int64) {
	t.Helper()
	st, err := db.Stats()
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	return st.HeldDropped, st.FreedDropped
}

func wantHeldFreed(t testing.TB, db *storage.DB, held, freed int64) {
	t.Helper()
	if h, f := heldFreed(t, db); h != held || f != freed {
		t.Fatalf("dropped handles held %d, freed %d; want %d, %d", h, f, held, freed)
	}
}

// filledFamily creates name with keys k0..k(n-1) = v0..v(n-1).
func filledFamily(t testing.TB, db *storage.DB, name string, n int) *storage.Family {
	t.Helper()
	f, err := db.CreateFamily(name, storage.FamilyOptions{})
	if err != nil {
		t.Fatalf("CreateFamily(%q): %v", name, err)
	}
	b := storage.NewBatch()
	for i := range n {
		mustPut(t, b, f, fmt.Sprintf("k%d", i), fmt.Sprintf("v%d", i))
	}
	mustWrite(t, db, b)
	return f
}

// TestFreedHandleRefusesReads: once a family is dropped physically and no snapshot
// pins it, its handle is freed, and every call through the old *Family fails with
// ErrFamilyRetired, naming the family.
func TestFreedHandleRefusesReads(t *testing.T) {
	db := openDB(t, storage.Options{})
	f := filledFamily(t, db, "gone", 3)
	if err := db.DropFamily("gone"); err != nil {
		t.Fatal(err)
	}
	wantHeldFreed(t, db, 0, 1)
	calls := map[string]func() error{
		"Get":          func() error { _, err := db.Get(f, []byte("k1"), nil); return err },
		"NewIterator":  func() error { _, err := db.NewIterator(f, storage.IterOptions{}); return err },
		"DeleteRange":  func() error { return db.DeleteRange(f, []byte("a"), []byte("z")) },
		"CompactRange": func() error { return db.CompactRange(f, nil, nil) },
		"IngestExternalFiles": func() error {
			return db.IngestExternalFiles(f, []string{"/nonexistent.sst"}, storage.IngestOptions{})
		},
	}
	for name, call := range calls {
		err := call()
		if !errors.Is(err, storage.ErrFamilyRetired) {
			t.Errorf("%s through the freed family: %v, want ErrFamilyRetired", name, err)
		} else if want := `"gone"`; !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %q does not name the family %s", name, err, want)
		}
	}
	if err := db.Flush(); err != nil {
		t.Errorf("Flush with a freed family: %v", err)
	}
}

// TestSnapshotPinsDroppedFamily: a snapshot taken before a drop keeps the family
// readable, through it and at the latest state, until it is released; a snapshot taken
// after the drop pins nothing. Snapshots of different epochs free each family when
// the last one taken before its drop goes.
func TestSnapshotPinsDroppedFamily(t *testing.T) {
	db := openDB(t, storage.Options{})
	a := filledFamily(t, db, "a", 2)
	b := filledFamily(t, db, "b", 2)
	s1, err := db.NewSnapshot() // before both drops: pins a and b
	if err != nil {
		t.Fatal(err)
	}
	if err := db.DropFamily("a"); err != nil {
		t.Fatal(err)
	}
	s2, err := db.NewSnapshot() // after a's drop, before b's: pins b only
	if err != nil {
		t.Fatal(err)
	}
	if err := db.DropFamily("b"); err != nil {
		t.Fatal(err)
	}
	s3, err := db.NewSnapshot() // after both: pins nothing
	if err != nil {
		t.Fatal(err)
	}
	wantHeldFreed(t, db, 2, 0)
	wantValue(t, db, a, s1, "k0", "v0")
	wantValue(t, db, a, nil, "k1", "v1")
	wantValue(t, db, b, s2, "k0", "v0")

	s3.Release()
	wantHeldFreed(t, db, 2, 0)
	s1.Release() // a is free; s2 still pins b
	wantHeldFreed(t, db, 1, 1)
	if _, err := db.Get(a, []byte("k0"), nil); !errors.Is(err, storage.ErrFamilyRetired) {
		t.Fatalf("Get(a) after its last pin went: %v, want ErrFamilyRetired", err)
	}
	if _, err := db.Get(a, []byte("k0"), s2); !errors.Is(err, storage.ErrFamilyRetired) {
		t.Fatalf("Get(a) at a snapshot taken after its drop: %v, want ErrFamilyRetired", err)
	}
	wantValue(t, db, b, s2, "k1", "v1")
	s2.Release()
	wantHeldFreed(t, db, 0, 2)
	if _, err := db.Get(b, []byte("k0"), nil); !errors.Is(err, storage.ErrFamilyRetired) {
		t.Fatalf("Get(b) after its last pin went: %v, want ErrFamilyRetired", err)
	}
}

// TestIteratorOutlivesFreedHandle: an iterator opened before the drop reads the whole
// family after the handle was freed.
func TestIteratorOutlivesFreedHandle(t *testing.T) {
	db := openDB(t, storage.Options{})
	f := filledFamily(t, db, "gone", 5)
	if err := db.Flush(); err != nil { // part of the data in an SST file, part in the memtable
		t.Fatal(err)
	}
	put(t, db, f, "k5", "v5")
	it, err := db.NewIterator(f, storage.IterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	if err := db.DropFamily("gone"); err != nil {
		t.Fatal(err)
	}
	wantHeldFreed(t, db, 0, 1)
	var got []string
	for it.First(); it.Valid(); it.Next() {
		k, v, err := it.Item()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(k)+"="+string(v))
	}
	if err := it.Err(); err != nil {
		t.Fatalf("iterator after the handle was freed: %v", err)
	}
	if diff := cmp.Diff([]string{"k0=v0", "k1=v1", "k2=v2", "k3=v3", "k4=v4", "k5=v5"}, got); diff != "" {
		t.Fatalf("iterator after the handle was freed (-want +got):\n%s", diff)
	}
}

// readThrough reads f once in the way that kind names; it returns nil or the read's
// error after checking what it read.
func readThrough(db *storage.DB, f *storage.Family, kind int) error {
	switch kind % 5 {
	case 0:
		v, err := db.Get(f, []byte("k1"), nil)
		if err == nil && string(v) != "v1" {
			return fmt.Errorf("Get = %q, want v1", v)
		}
		return err
	case 1:
		v, err := db.Get(f, []byte("k0"), nil)
		if err == nil && string(v) != "v0" {
			return fmt.Errorf("Get = %q, want v0", v)
		}
		return err
	case 2:
		it, err := db.NewIterator(f, storage.IterOptions{})
		if err != nil {
			return err
		}
		defer it.Close()
		n := 0
		for it.First(); it.Valid(); it.Next() {
			n++
		}
		if err := it.Err(); err != nil {
			return err
		}
		if n != 3 {
			return fmt.Errorf("iterator saw %d keys, want 3", n)
		}
		return nil
	case 3:
		s, err := db.NewSnapshot()
		if err != nil {
			return err
		}
		defer s.Release()
		v, err := db.Get(f, []byte("k2"), s)
		if err == nil && string(v) != "v2" {
			return fmt.Errorf("Get at a snapshot = %q, want v2", v)
		}
		return err
	default:
		_, err := db.Stats()
		if err == nil {
			err = db.Flush()
		}
		return err
	}
}

// hammer runs readers on f until each has seen stop's error, or any other error.
// Each reader signals started after its first read.
func hammer(db *storage.DB, f *storage.Family, readers int, stop error, started *sync.WaitGroup) <-chan error {
	errs := make(chan error, readers)
	var wg sync.WaitGroup
	started.Add(readers)
	for r := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				err := readThrough(db, f, r+i)
				if i == 0 {
					started.Done()
				}
				if errors.Is(err, stop) {
					return
				}
				if err != nil {
					errs <- fmt.Errorf("reader %d, read %d: %w", r, i, err)
					return
				}
			}
		}()
	}
	go func() { wg.Wait(); close(errs) }()
	return errs
}

// TestDropRacesReads: reads of every kind through a family race its drop; each one
// either reads the right data or fails with ErrFamilyRetired, never touches a freed
// handle (run with -race, and RocksDB would crash or return garbage), and once the
// handle is freed every reader sees the refusal.
func TestDropRacesReads(t *testing.T) {
	db := openDB(t, storage.Options{})
	for round := range 20 {
		name := fmt.Sprintf("f%d", round)
		f := filledFamily(t, db, name, 3)
		var started sync.WaitGroup
		errs := hammer(db, f, 5, storage.ErrFamilyRetired, &started)
		started.Wait()
		if err := db.DropFamily(name); err != nil {
			t.Fatal(err)
		}
		for err := range errs {
			t.Errorf("round %d: %v", round, err)
		}
	}
	wantHeldFreed(t, db, 0, 20)
}

// TestCloseRacesDroppedReads: reads through dropped families still pinned by a
// snapshot, and through live ones, race Close; each either succeeds or fails with
// ErrClosed, and Close frees every handle once.
func TestCloseRacesDroppedReads(t *testing.T) {
	for round := range 5 {
		db := openDB(t, storage.Options{})
		live := filledFamily(t, db, "live", 3)
		dropped := filledFamily(t, db, "dropped", 3)
		pin, err := db.NewSnapshot()
		if err != nil {
			t.Fatal(err)
		}
		if err := db.DropFamily("dropped"); err != nil {
			t.Fatal(err)
		}
		var started sync.WaitGroup
		e1 := hammer(db, live, 3, storage.ErrClosed, &started)
		e2 := hammer(db, dropped, 3, storage.ErrClosed, &started)
		started.Wait()
		if err := db.Close(); err != nil {
			t.Fatalf("round %d: Close: %v", round, err)
		}
		pin.Release() // after Close: does nothing
		for _, errs := range []<-chan error{e1, e2} {
			for err := range errs {
				t.Errorf("round %d: %v", round, err)
			}
		}
	}
}
