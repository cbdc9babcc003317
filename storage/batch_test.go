package storage_test

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rockline/rockline/storage"
)

func TestKeyLimit(t *testing.T) {
	db := openDB(t, storage.Options{})
	f := db.Default()
	b := storage.NewBatch()
	mustPut(t, b, f, "k", "v")
	count, size := b.Count(), b.Size()

	big := bytes.Repeat([]byte("k"), storage.MaxKeySize+1)
	want := &storage.LimitError{What: "key", Size: storage.MaxKeySize + 1, Limit: storage.MaxKeySize}
	check := func(op string, err error) {
		t.Helper()
		var le *storage.LimitError
		if !errors.As(err, &le) || !errors.Is(err, storage.ErrTooLarge) {
			t.Fatalf("%s: %v, want *LimitError matching ErrTooLarge", op, err)
		}
		if diff := cmp.Diff(want, le); diff != "" {
			t.Errorf("%s: LimitError (-want +got):\n%s", op, diff)
		}
	}
	check("Put", b.Put(f, big, []byte("v")))
	check("Delete", b.Delete(f, big))
	if b.Count() != count || b.Size() != size {
		t.Errorf("batch changed by refused writes: count %d size %d, want %d %d", b.Count(), b.Size(), count, size)
	}
	_, err := db.Get(f, big, nil)
	check("Get", err)

	// The limit itself is accepted.
	edge := big[:storage.MaxKeySize]
	if err := b.Put(f, edge, []byte("edge")); err != nil {
		t.Fatalf("Put of a MaxKeySize key: %v", err)
	}
	mustWrite(t, db, b)
	wantValue(t, db, f, nil, string(edge), "edge")
	wantValue(t, db, f, nil, "k", "v")
}

// TestValueLimit allocates one 1 GiB + 1 value (untouched, so the pages stay virtual).
func TestValueLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates 1 GiB")
	}
	db := openDB(t, storage.Options{})
	other := openDB(t, storage.Options{})
	f := db.Default()
	b := storage.NewBatch()
	mustPut(t, b, f, "k", "v")
	count, size := b.Count(), b.Size()

	huge := make([]byte, storage.MaxValueSize+1)
	// A refused write to another database's family must leave no trace either: the
	// batch stays writable to db.
	for _, fam := range []*storage.Family{f, other.Default()} {
		err := b.Put(fam, []byte("big"), huge)
		var le *storage.LimitError
		if !errors.As(err, &le) || !errors.Is(err, storage.ErrTooLarge) {
			t.Fatalf("Put of a MaxValueSize+1 value: %v, want *LimitError matching ErrTooLarge", err)
		}
		want := &storage.LimitError{What: "value", Size: storage.MaxValueSize + 1, Limit: storage.MaxValueSize}
		if diff := cmp.Diff(want, le); diff != "" {
			t.Errorf("LimitError (-want +got):\n%s", diff)
		}
	}
	huge = nil
	if b.Count() != count || b.Size() != size {
		t.Errorf("batch changed by refused writes: count %d size %d, want %d %d", b.Count(), b.Size(), count, size)
	}
	mustWrite(t, db, b)
	wantValue(t, db, f, nil, "k", "v")
	wantMissing(t, db, f, nil, "big")
}

func TestBatchAppend(t *testing.T) {
	db := openDB(t, storage.Options{Families: map[string]storage.FamilyOptions{"a": {}, "b": {}}})
	fa, fb := mustFamily(t, db, "a"), mustFamily(t, db, "b")
	put(t, db, fa, "old", "x")

	b1, b2 := storage.NewBatch(), storage.NewBatch()
	mustPut(t, b1, fa, "k1", "v1")
	mustPut(t, b2, fb, "k2", "v2")
	mustDelete(t, b2, fa, "old")
	mustPut(t, b2, fa, "k1", "v1b") // later writes win, also across the seam
	b1.Append(b2)
	if b1.Count() != 4 {
		t.Fatalf("Count after Append = %d, want 4", b1.Count())
	}
	if b2.Count() != 3 {
		t.Fatalf("Append changed its argument: Count = %d, want 3", b2.Count())
	}
	s, err := db.NewSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	mustWrite(t, db, b1)
	wantValue(t, db, fa, nil, "k1", "v1b")
	wantValue(t, db, fb, nil, "k2", "v2")
	wantMissing(t, db, fa, nil, "old")
	// The snapshot taken before sees none of it.
	wantValue(t, db, fa, s, "old", "x")
	wantMissing(t, db, fa, s, "k1")
	wantMissing(t, db, fb, s, "k2")

	// All or nothing: an appended part that cannot be written sinks the whole batch.
	x, err := db.CreateFamily("x", storage.FamilyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b3, b4 := storage.NewBatch(), storage.NewBatch()
	mustPut(t, b3, fa, "k3", "v3")
	mustPut(t, b4, fb, "k4", "v4")
	mustPut(t, b4, x, "k4", "v4")
	b3.Append(b4)
	if err := db.DropFamily("x"); err != nil {
		t.Fatal(err)
	}
	if err := db.Write(b3); !errors.Is(err, storage.ErrColumnFamilyNotFound) {
		t.Fatalf("Write with a dropped family appended: %v, want ErrColumnFamilyNotFound", err)
	}
	wantMissing(t, db, fa, nil, "k3")
	wantMissing(t, db, fb, nil, "k4")

	// Appending to a zero Batch and appending an empty batch both work.
	var zero storage.Batch
	zero.Append(storage.NewBatch())
	zero.Append(&storage.Batch{})
	if zero.Count() != 0 {
		t.Fatalf("Count = %d, want 0", zero.Count())
	}
	b5 := storage.NewBatch()
	mustPut(t, b5, fb, "k5", "v5")
	zero.Append(b5)
	mustWrite(t, db, &zero)
	wantValue(t, db, fb, nil, "k5", "v5")
}

func TestEmptyBatchIsNoOp(t *testing.T) {
	db := openDB(t, storage.Options{})
	put(t, db, db.Default(), "k", "v")
	before, err := db.Stats()
	if err != nil {
		t.Fatal(err)
	}
	var zero storage.Batch
	for name, b := range map[string]*storage.Batch{"nil": nil, "zero": &zero, "new": storage.NewBatch()} {
		if err := db.Write(b); err != nil {
			t.Errorf("Write(%s batch): %v", name, err)
		}
	}
	b := storage.NewBatch()
	mustPut(t, b, db.Default(), "k", "changed")
	b.Reset()
	if b.Count() != 0 {
		t.Errorf("Count after Reset = %d", b.Count())
	}
	if err := db.Write(b); err != nil {
		t.Errorf("Write(reset batch): %v", err)
	}
	after, err := db.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if before.BytesWritten == 0 || after.BytesWritten != before.BytesWritten {
		t.Errorf("BytesWritten %d -> %d, want unchanged and non-zero", before.BytesWritten, after.BytesWritten)
	}
	wantValue(t, db, db.Default(), nil, "k", "v")

	// A reset batch is reusable.
	mustPut(t, b, db.Default(), "k2", "v2")
	mustDelete(t, b, db.Default(), "k")
	mustWrite(t, db, b)
	wantValue(t, db, db.Default(), nil, "k2", "v2")
	wantMissing(t, db, db.Default(), nil, "k")
}

// TestBatchDeleteRange: a range tombstone in a batch removes exactly the keys of its
// family in [start, end), in the default family and another, atomically with the
// batch's other writes; start after end is refused and adds nothing.
func TestBatchDeleteRange(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	db, err := storage.Open(dir, storage.Options{Families: map[string]storage.FamilyOptions{"f": {}}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	f, err := db.Family("f")
	if err != nil {
		t.Fatal(err)
	}
	for _, fam := range []*storage.Family{db.Default(), f} {
		b := storage.NewBatch()
		for _, k := range []string{"a", "b", "c", "d"} {
			if err := b.Put(fam, []byte(k), []byte("v")); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.Write(b); err != nil {
			t.Fatal(err)
		}
		b = storage.NewBatch()
		if err := b.DeleteRange(fam, []byte("b"), []byte("d")); err != nil {
			t.Fatal(err)
		}
		if err := b.Put(fam, []byte("e"), []byte("v")); err != nil {
			t.Fatal(err)
		}
		if err := db.Write(b); err != nil {
			t.Fatal(err)
		}
		for k, want := range map[string]bool{"a": true, "b": false, "c": false, "d": true, "e": true} {
			_, err := db.Get(fam, []byte(k), nil)
			if got := err == nil; got != want {
				t.Errorf("%s: key %q present = %v (%v), want %v", fam.Name(), k, got, err, want)
			}
		}
	}
	b := storage.NewBatch()
	var ce *storage.ConfigError
	if err := b.DeleteRange(f, []byte("z"), []byte("a")); !errors.As(err, &ce) || ce.Field != "range start" || b.Count() != 0 {
		t.Errorf("DeleteRange(z, a) = %v with %d writes, want a *ConfigError for range start and nothing added", err, b.Count())
	}
}
