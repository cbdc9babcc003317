package storage_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rockline/rockline/storage"
)

func TestReopenKeepsDataAndFamilies(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	db := openAt(t, dir, storage.Options{Families: map[string]storage.FamilyOptions{"a": {}, "b": {}}})
	fa, fb := mustFamily(t, db, "a"), mustFamily(t, db, "b")
	put(t, db, fa, "gone", "soon deleted")

	b := storage.NewBatch()
	mustPut(t, b, fa, "k1", "v1")
	mustPut(t, b, fb, "k2", "v2")
	mustPut(t, b, db.Default(), "k0", "v0")
	mustDelete(t, b, fa, "gone")
	if got := b.Count(); got != 4 {
		t.Fatalf("Count = %d, want 4", got)
	}
	mustWrite(t, db, b)
	if err := db.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	db = openAt(t, dir, storage.Options{})
	names, err := db.Families()
	if err != nil {
		t.Fatalf("Families: %v", err)
	}
	if diff := cmp.Diff([]string{"a", "b", "default"}, names); diff != "" {
		t.Fatalf("Families() after reopen (-want +got):\n%s", diff)
	}
	fa, fb = mustFamily(t, db, "a"), mustFamily(t, db, "b")
	wantValue(t, db, fa, nil, "k1", "v1")
	wantValue(t, db, fb, nil, "k2", "v2")
	wantValue(t, db, db.Default(), nil, "k0", "v0")
	wantMissing(t, db, fa, nil, "gone")
	wantMissing(t, db, fb, nil, "k1") // families are separate key spaces
	if diff := cmp.Diff([]string{"k1=v1"}, scan(t, db, fa, storage.IterOptions{})); diff != "" {
		t.Fatalf("scan a (-want +got):\n%s", diff)
	}
}

func TestReopenWithSubsetOfFamilies(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	big := storage.FamilyOptions{WriteBufferSize: 8 << 20, MaxWriteBufferNumber: 4}
	db := openAt(t, dir, storage.Options{Families: map[string]storage.FamilyOptions{"A": big, "B": big}})
	put(t, db, mustFamily(t, db, "A"), "a", "1")
	put(t, db, mustFamily(t, db, "B"), "b", "2")
	if err := db.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	db = openAt(t, dir, storage.Options{Families: map[string]storage.FamilyOptions{"A": big}})
	names, err := db.Families()
	if err != nil {
		t.Fatalf("Families: %v", err)
	}
	if diff := cmp.Diff([]string{"A", "B", "default"}, names); diff != "" {
		t.Fatalf("Families() (-want +got):\n%s", diff)
	}
	fa, fb := mustFamily(t, db, "A"), mustFamily(t, db, "B")
	withCompression := big
	withCompression.Compression, withCompression.BottommostCompression = storage.DefaultCompression, storage.DefaultBottommostCompression
	if diff := cmp.Diff(withCompression, fa.Options()); diff != "" {
		t.Errorf("A options (-want +got):\n%s", diff)
	}
	// B was not named, so it runs with the defaults.
	def := storage.FamilyOptions{WriteBufferSize: storage.DefaultWriteBufferSize, MaxWriteBufferNumber: storage.DefaultMaxWriteBufferNumber,
		Compression: storage.DefaultCompression, BottommostCompression: storage.DefaultBottommostCompression}
	if diff := cmp.Diff(def, fb.Options()); diff != "" {
		t.Errorf("B options (-want +got):\n%s", diff)
	}
	wantValue(t, db, fa, nil, "a", "1")
	wantValue(t, db, fb, nil, "b", "2")
	put(t, db, fb, "b2", "3")
	wantValue(t, db, fb, nil, "b2", "3")
}

func TestErrorIfExists(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	db := openAt(t, dir, storage.Options{})
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if db2, err := storage.Open(dir, storage.Options{ErrorIfExists: true}); err == nil {
		db2.Close()
		t.Fatal("Open with ErrorIfExists on an existing database succeeded")
	}
}

func TestCreateFamily(t *testing.T) {
	db := openDB(t, storage.Options{})
	f, err := db.CreateFamily("x", storage.FamilyOptions{WriteBufferSize: 2 << 20})
	if err != nil {
		t.Fatalf("CreateFamily: %v", err)
	}
	want := storage.FamilyOptions{WriteBufferSize: 2 << 20, MaxWriteBufferNumber: storage.DefaultMaxWriteBufferNumber,
		Compression: storage.DefaultCompression, BottommostCompression: storage.DefaultBottommostCompression}
	if diff := cmp.Diff(want, f.Options()); diff != "" {
		t.Errorf("options (-want +got):\n%s", diff)
	}
	if f.Name() != "x" || f.DB() != db || f.Dropped() {
		t.Errorf("family = %q, db %p (want %p), dropped %v", f.Name(), f.DB(), db, f.Dropped())
	}
	for _, name := range []string{"x", storage.DefaultFamily} {
		if _, err := db.CreateFamily(name, storage.FamilyOptions{}); !errors.Is(err, storage.ErrColumnFamilyExists) {
			t.Errorf("CreateFamily(%q) again: %v, want ErrColumnFamilyExists", name, err)
		}
	}
	if _, err := db.Family("nope"); !errors.Is(err, storage.ErrColumnFamilyNotFound) {
		t.Errorf("Family(nope): %v, want ErrColumnFamilyNotFound", err)
	}
}

func TestDropFamily(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	db := openAt(t, dir, storage.Options{Families: map[string]storage.FamilyOptions{"X": {}}})

	err := db.DropFamily(storage.DefaultFamily)
	var ce *storage.ConfigError
	if !errors.As(err, &ce) || !errors.Is(err, storage.ErrInvalidConfig) {
		t.Fatalf("DropFamily(default) = %v, want *ConfigError", err)
	}

	old := mustFamily(t, db, "X")
	put(t, db, old, "old", "1")
	pending := storage.NewBatch() // built before the drop, written after
	mustPut(t, pending, old, "late", "2")
	mustPut(t, pending, db.Default(), "late", "2")
	snap, err := db.NewSnapshot() // taken before the drop: keeps the old handle readable
	if err != nil {
		t.Fatal(err)
	}

	if err := db.DropFamily("X"); err != nil {
		t.Fatalf("DropFamily(X): %v", err)
	}
	if !old.Dropped() {
		t.Error("Dropped() = false after DropFamily")
	}
	if _, err := db.Family("X"); !errors.Is(err, storage.ErrColumnFamilyNotFound) {
		t.Errorf("Family(X) after drop: %v, want ErrColumnFamilyNotFound", err)
	}
	if err := db.DropFamily("X"); !errors.Is(err, storage.ErrColumnFamilyNotFound) {
		t.Errorf("DropFamily(X) twice: %v, want ErrColumnFamilyNotFound", err)
	}
	names, err := db.Families()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"default"}, names); diff != "" {
		t.Errorf("Families() after drop (-want +got):\n%s", diff)
	}

	// While the snapshot taken before the drop is open, reads through the old handle
	// still see the data as it was.
	wantValue(t, db, old, nil, "old", "1")
	wantValue(t, db, old, snap, "old", "1")
	if diff := cmp.Diff([]string{"old=1"}, scan(t, db, old, storage.IterOptions{})); diff != "" {
		t.Errorf("scan dropped family (-want +got):\n%s", diff)
	}

	// Writes through it fail, and the batch is left as it was.
	b := storage.NewBatch()
	if err := b.Put(old, []byte("k"), []byte("v")); !errors.Is(err, storage.ErrColumnFamilyNotFound) {
		t.Errorf("Batch.Put to dropped family: %v, want ErrColumnFamilyNotFound", err)
	}
	if err := b.Delete(old, []byte("k")); !errors.Is(err, storage.ErrColumnFamilyNotFound) {
		t.Errorf("Batch.Delete to dropped family: %v, want ErrColumnFamilyNotFound", err)
	}
	if b.Count() != 0 {
		t.Errorf("Count after refused writes = %d, want 0", b.Count())
	}
	if err := db.Write(pending); !errors.Is(err, storage.ErrColumnFamilyNotFound) {
		t.Errorf("Write of a batch naming the dropped family: %v, want ErrColumnFamilyNotFound", err)
	}
	wantMissing(t, db, db.Default(), nil, "late") // nothing of the refused batch landed

	// Re-create at once: a new, empty, writable family.
	fresh, err := db.CreateFamily("X", storage.FamilyOptions{})
	if err != nil {
		t.Fatalf("re-create X: %v", err)
	}
	if fresh.ID() == old.ID() {
		t.Errorf("re-created family reuses id %d", fresh.ID())
	}
	if got := mustFamily(t, db, "X"); got != fresh {
		t.Error("Family(X) does not return the re-created family")
	}
	wantMissing(t, db, fresh, nil, "old")
	if got := scan(t, db, fresh, storage.IterOptions{}); len(got) != 0 {
		t.Errorf("re-created family holds %q", got)
	}
	put(t, db, fresh, "new", "2")
	wantValue(t, db, fresh, nil, "new", "2")
	wantMissing(t, db, old, nil, "new") // the old handle still reads the old family
	wantValue(t, db, old, nil, "old", "1")

	// Its release frees the old handle: reads through it are refused.
	snap.Release()
	if _, err := db.Get(old, []byte("old"), nil); !errors.Is(err, storage.ErrFamilyRetired) {
		t.Errorf("Get through the freed handle: %v, want ErrFamilyRetired", err)
	}

	if err := db.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	db = openAt(t, dir, storage.Options{})
	x := mustFamily(t, db, "X")
	if diff := cmp.Diff([]string{"new=2"}, scan(t, db, x, storage.IterOptions{})); diff != "" {
		t.Errorf("X after reopen (-want +got):\n%s", diff)
	}
	names, err = db.Families()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"X", "default"}, names); diff != "" {
		t.Errorf("Families() after reopen (-want +got):\n%s", diff)
	}
}

func TestForeignFamily(t *testing.T) {
	db1 := openDB(t, storage.Options{Families: map[string]storage.FamilyOptions{"a": {}}})
	db2 := openDB(t, storage.Options{Families: map[string]storage.FamilyOptions{"a": {}}})
	f1 := mustFamily(t, db1, "a")
	put(t, db1, f1, "k", "v")

	if _, err := db2.Get(f1, []byte("k"), nil); !errors.Is(err, storage.ErrForeignFamily) {
		t.Errorf("db2.Get(db1 family): %v, want ErrForeignFamily", err)
	}
	if _, err := db2.Get(db1.Default(), []byte("k"), nil); !errors.Is(err, storage.ErrForeignFamily) {
		t.Errorf("db2.Get(db1 default): %v, want ErrForeignFamily", err)
	}
	b := storage.NewBatch()
	mustPut(t, b, mustFamily(t, db2, "a"), "k2", "v2")
	mustPut(t, b, f1, "k2", "v2")
	if err := db2.Write(b); !errors.Is(err, storage.ErrForeignFamily) {
		t.Errorf("db2.Write(batch with db1 family): %v, want ErrForeignFamily", err)
	}
	wantMissing(t, db2, mustFamily(t, db2, "a"), nil, "k2") // nothing landed
	if _, err := db2.NewIterator(f1, storage.IterOptions{}); !errors.Is(err, storage.ErrForeignFamily) {
		t.Errorf("db2.NewIterator(db1 family): %v, want ErrForeignFamily", err)
	}

	// A snapshot of another database is refused too.
	s1, err := db1.NewSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Release()
	if v, err := db2.Get(mustFamily(t, db2, "a"), []byte("k"), s1); err == nil {
		t.Errorf("db2.Get at db1 snapshot = %q, nil; want an error", v)
	}
}

func TestDefaultAfterClose(t *testing.T) {
	db := openDB(t, storage.Options{})
	if db.Default() == nil || db.Default().Name() != storage.DefaultFamily {
		t.Fatalf("Default() = %v", db.Default())
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if f := db.Default(); f != nil {
		t.Errorf("Default() after Close = %v, want nil", f.Name())
	}
}

// A second Open of a folder an open database holds fails with a *LockedError naming
// the folder, and the first database is unharmed.
func TestOpenLockedFolder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	db, err := storage.Open(dir, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, err = storage.Open(dir, storage.Options{})
	var le *storage.LockedError
	if !errors.As(err, &le) || le.Dir != dir || !errors.Is(err, storage.ErrLocked) {
		t.Fatalf("second Open = %v, want a *LockedError for %s", err, dir)
	}
	f := db.Default()
	b := storage.NewBatch()
	if err := b.Put(f, []byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := db.Write(b); err != nil {
		t.Fatalf("write after the refused Open: %v", err)
	}
}
