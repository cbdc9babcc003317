package storage_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/rockline/rockline/storage"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// openDB opens a database in a fresh folder under t.TempDir and closes it at cleanup
// (Close is idempotent, so tests may close it themselves first).
func openDB(t testing.TB, opts storage.Options) *storage.DB {
	t.Helper()
	return openAt(t, filepath.Join(t.TempDir(), "db"), opts)
}

// openAt opens (or reopens) the database in dir and closes it at cleanup.
func openAt(t testing.TB, dir string, opts storage.Options) *storage.DB {
	t.Helper()
	db, err := storage.Open(dir, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("Close at cleanup: %v", err)
		}
	})
	return db
}

func mustFamily(t testing.TB, db *storage.DB, name string) *storage.Family {
	t.Helper()
	f, err := db.Family(name)
	if err != nil {
		t.Fatalf("Family(%q): %v", name, err)
	}
	return f
}

func mustPut(t testing.TB, b *storage.Batch, f *storage.Family, key, value string) {
	t.Helper()
	if err := b.Put(f, []byte(key), []byte(value)); err != nil {
		t.Fatalf("Put(%s, %q): %v", f.Name(), key, err)
	}
}

func mustDelete(t testing.TB, b *storage.Batch, f *storage.Family, key string) {
	t.Helper()
	if err := b.Delete(f, []byte(key)); err != nil {
		t.Fatalf("Delete(%s, %q): %v", f.Name(), key, err)
	}
}

func mustWrite(t testing.TB, db *storage.DB, b *storage.Batch) {
	t.Helper()
	if err := db.Write(b); err != nil {
		t.Fatalf("Write: %v", err)
	}
}

// put writes one key in its own batch.
func put(t testing.TB, db *storage.DB, f *storage.Family, key, value string) {
	t.Helper()
	b := storage.NewBatch()
	mustPut(t, b, f, key, value)
	mustWrite(t, db, b)
}

// wantValue checks that key in f reads as value at s (nil: latest).
func wantValue(t testing.TB, db *storage.DB, f *storage.Family, s *storage.Snapshot, key, value string) {
	t.Helper()
	got, err := db.Get(f, []byte(key), s)
	if err != nil {
		t.Fatalf("Get(%s, %q): %v", f.Name(), key, err)
	}
	if string(got) != value {
		t.Fatalf("Get(%s, %q) = %q, want %q", f.Name(), key, got, value)
	}
}

// wantMissing checks that key in f is absent at s (nil: latest).
func wantMissing(t testing.TB, db *storage.DB, f *storage.Family, s *storage.Snapshot, key string) {
	t.Helper()
	got, err := db.Get(f, []byte(key), s)
	if !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("Get(%s, %q) = %q, %v; want ErrNotFound", f.Name(), key, got, err)
	}
}

// scan returns every key=value of f within o, in order.
func scan(t testing.TB, db *storage.DB, f *storage.Family, o storage.IterOptions) []string {
	t.Helper()
	it, err := db.NewIterator(f, o)
	if err != nil {
		t.Fatalf("NewIterator(%s): %v", f.Name(), err)
	}
	defer it.Close()
	var out []string
	for it.First(); it.Valid(); it.Next() {
		out = append(out, string(it.Key())+"="+string(it.Value()))
	}
	if err := it.Err(); err != nil {
		t.Fatalf("iterate %s: %v", f.Name(), err)
	}
	return out
}
