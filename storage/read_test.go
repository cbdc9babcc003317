package storage_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rockline/rockline/storage"
)

func TestSnapshotIsolation(t *testing.T) {
	db := openDB(t, storage.Options{Families: map[string]storage.FamilyOptions{"a": {}}})
	f := mustFamily(t, db, "a")
	put(t, db, f, "k", "v1")
	put(t, db, f, "gone", "x")

	s, err := db.NewSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	b := storage.NewBatch()
	mustPut(t, b, f, "k", "v2")
	mustPut(t, b, f, "new", "n")
	mustDelete(t, b, f, "gone")
	mustWrite(t, db, b)

	wantValue(t, db, f, s, "k", "v1")
	wantValue(t, db, f, s, "gone", "x")
	wantMissing(t, db, f, s, "new")
	wantValue(t, db, f, nil, "k", "v2")
	wantMissing(t, db, f, nil, "gone")

	if diff := cmp.Diff([]string{"gone=x", "k=v1"}, scan(t, db, f, storage.IterOptions{Snapshot: s})); diff != "" {
		t.Errorf("scan at snapshot (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"k=v2", "new=n"}, scan(t, db, f, storage.IterOptions{})); diff != "" {
		t.Errorf("scan at latest (-want +got):\n%s", diff)
	}

	// An iterator without a snapshot sees the state at its creation.
	it, err := db.NewIterator(f, storage.IterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	put(t, db, f, "later", "l")
	var keys []string
	for it.First(); it.Valid(); it.Next() {
		keys = append(keys, string(it.Key()))
	}
	it.Close()
	if diff := cmp.Diff([]string{"k", "new"}, keys); diff != "" {
		t.Errorf("iterator saw a later write (-want +got):\n%s", diff)
	}

	var vals [][]byte
	for _, k := range []string{"k", "new", "gone"} {
		v, err := db.Get(f, []byte(k), s)
		if err != nil && !errors.Is(err, storage.ErrNotFound) {
			t.Fatal(err)
		}
		vals = append(vals, v)
	}
	if diff := cmp.Diff([][]byte{[]byte("v1"), nil, []byte("x")}, vals); diff != "" {
		t.Errorf("Gets at snapshot (-want +got):\n%s", diff)
	}

	s.Release()
	s.Release() // idempotent
	if _, err := db.Get(f, []byte("k"), s); !errors.Is(err, storage.ErrReleased) {
		t.Errorf("Get at released snapshot: %v, want ErrReleased", err)
	}
	if _, err := db.NewIterator(f, storage.IterOptions{Snapshot: s}); !errors.Is(err, storage.ErrReleased) {
		t.Errorf("NewIterator at released snapshot: %v, want ErrReleased", err)
	}
}

func TestIteratorBounds(t *testing.T) {
	db := openDB(t, storage.Options{})
	f := db.Default()
	b := storage.NewBatch()
	for _, k := range []string{"a", "b", "c", "d", "e"} {
		mustPut(t, b, f, k, k+k)
	}
	mustWrite(t, db, b)

	cases := []struct {
		name         string
		lower, upper string
		want         []string
	}{
		{"both", "b", "d", []string{"b=bb", "c=cc"}},
		{"lower only", "c", "", []string{"c=cc", "d=dd", "e=ee"}},
		{"upper only", "", "c", []string{"a=aa", "b=bb"}},
		{"between keys", "bb", "dd", []string{"c=cc", "d=dd"}},
		{"empty range", "c", "c", nil},
		{"unbounded", "", "", []string{"a=aa", "b=bb", "c=cc", "d=dd", "e=ee"}},
	}
	bound := func(s string) []byte {
		if s == "" {
			return nil
		}
		return []byte(s)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := storage.IterOptions{Lower: bound(tc.lower), Upper: bound(tc.upper)}
			if diff := cmp.Diff(tc.want, scan(t, db, f, o)); diff != "" {
				t.Errorf("scan (-want +got):\n%s", diff)
			}
		})
	}

	// Bounds are copied, and Seek is clamped to them.
	lower, upper := []byte("b"), []byte("d")
	it, err := db.NewIterator(f, storage.IterOptions{Lower: lower, Upper: upper})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	lower[0], upper[0] = 'a', 'z'
	it.Seek([]byte("a"))
	if got := string(it.Key()); got != "b" {
		t.Errorf("Seek(a) with Lower b: at %q, want b", got)
	}
	it.Seek([]byte("c"))
	if got := string(it.Value()); got != "cc" {
		t.Errorf("Seek(c): value %q, want cc", got)
	}
	it.Seek([]byte("d"))
	if it.Valid() || it.Key() != nil || it.Value() != nil {
		t.Errorf("Seek(d) with Upper d: valid %v key %q", it.Valid(), it.Key())
	}
	if err := it.Err(); err != nil {
		t.Errorf("Err: %v", err)
	}
	it.Close()
	it.Close() // idempotent
	if it.Valid() {
		t.Error("Valid after Close")
	}
	if err := it.Err(); !errors.Is(err, storage.ErrReleased) {
		t.Errorf("Err after Close: %v, want ErrReleased", err)
	}
}

func TestGetAcrossFamilies(t *testing.T) {
	db := openDB(t, storage.Options{Families: map[string]storage.FamilyOptions{"a": {}, "b": {}}})
	fa, fb := mustFamily(t, db, "a"), mustFamily(t, db, "b")
	b := storage.NewBatch()
	mustPut(t, b, fa, "k", "from a")
	mustPut(t, b, fb, "k", "from b")
	mustPut(t, b, fa, "empty", "")
	if err := b.Put(fb, []byte("nilvalue"), nil); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, db, b)

	check := func(stage string) {
		t.Helper()
		fams := []*storage.Family{fa, fb, fa, fb, fb, fa}
		keys := [][]byte{[]byte("k"), []byte("k"), []byte("empty"), []byte("empty"), []byte("nilvalue"), []byte("missing")}
		var got [][]byte
		for i, f := range fams {
			v, err := db.Get(f, keys[i], nil)
			if err != nil && !errors.Is(err, storage.ErrNotFound) {
				t.Fatalf("%s: Get: %v", stage, err)
			}
			got = append(got, v)
		}
		want := [][]byte{[]byte("from a"), []byte("from b"), {}, nil, {}, nil}
		if diff := cmp.Diff(want, got); diff != "" { // cmp tells nil from empty
			t.Errorf("%s: Gets (-want +got):\n%s", stage, diff)
		}
		v, err := db.Get(fa, []byte("empty"), nil)
		if err != nil || v == nil || len(v) != 0 {
			t.Errorf("%s: Get(empty) = %#v, %v; want non-nil empty", stage, v, err)
		}
		if diff := cmp.Diff([]string{"empty=", "k=from a"}, scan(t, db, fa, storage.IterOptions{})); diff != "" {
			t.Errorf("%s: scan a (-want +got):\n%s", stage, diff)
		}
	}
	check("memtable")
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	check("flushed")

	if _, err := db.Get(nil, []byte("k"), nil); !errors.Is(err, storage.ErrColumnFamilyNotFound) {
		t.Errorf("Get with a nil family: %v, want ErrColumnFamilyNotFound", err)
	}
}

// TestSnapshotReleaseRacesReaders releases snapshots while other goroutines read and
// open iterators at them: every read either sees the snapshot's view or ErrReleased.
func TestSnapshotReleaseRacesReaders(t *testing.T) {
	db := openDB(t, storage.Options{})
	f := db.Default()
	put(t, db, f, "k", "old")
	for range 20 {
		s, err := db.NewSnapshot()
		if err != nil {
			t.Fatal(err)
		}
		put(t, db, f, "k", "new")
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range 4 {
			wg.Go(func() {
				<-start
				for range 20 {
					v, err := db.Get(f, []byte("k"), s)
					if err == nil && string(v) != "old" {
						t.Errorf("Get at snapshot = %q", v)
					} else if err != nil && !errors.Is(err, storage.ErrReleased) {
						t.Errorf("Get at snapshot: %v", err)
					}
					it, err := db.NewIterator(f, storage.IterOptions{Snapshot: s})
					if errors.Is(err, storage.ErrReleased) {
						continue
					}
					if err != nil {
						t.Errorf("NewIterator: %v", err)
						return
					}
					if it.First(); it.Valid() && string(it.Value()) != "old" {
						t.Errorf("iterator at snapshot sees %q", it.Value())
					}
					it.Close()
				}
			})
		}
		close(start)
		s.Release()
		wg.Wait()
		put(t, db, f, "k", "old")
	}
}
