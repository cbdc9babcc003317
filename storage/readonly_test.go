package storage_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/rockline/rockline/storage"
)

// TestReadOnlyAndSecondary: while a writer holds the folder, a read-only open and a
// secondary open both succeed without its lock; they read, refuse every write with
// ErrReadOnly, and the secondary sees the writer's later writes after CatchUp only.
func TestReadOnlyAndSecondary(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	w := openAt(t, dir, storage.Options{Families: map[string]storage.FamilyOptions{"f": {}}})
	put(t, w, mustFamily(t, w, "f"), "k", "v1")

	ro := openAt(t, dir, storage.Options{ReadOnly: true})
	sec := openAt(t, dir, storage.Options{ReadOnly: true, Secondary: filepath.Join(t.TempDir(), "secondary")})
	for name, db := range map[string]*storage.DB{"read-only": ro, "secondary": sec} {
		f := mustFamily(t, db, "f")
		wantValue(t, db, f, nil, "k", "v1")
		if !db.ReadOnly() {
			t.Errorf("%s: ReadOnly() = false", name)
		}
		b := storage.NewBatch()
		if err := b.Put(f, []byte("x"), []byte("y")); err != nil {
			t.Fatal(err)
		}
		writes := map[string]error{
			"Write":       db.Write(b),
			"DeleteRange": db.DeleteRange(f, []byte("a"), []byte("z")),
			"DropFamily":  db.DropFamily("f"),
		}
		if !db.Secondary() { // a secondary can take a checkpoint (TestSecondaryCheckpoint in pipeline)
			writes["Checkpoint"] = db.Checkpoint(filepath.Join(t.TempDir(), "cp"))
		}
		_, writes["CreateFamily"] = db.CreateFamily("g", storage.FamilyOptions{})
		for call, err := range writes {
			if !errors.Is(err, storage.ErrReadOnly) {
				t.Errorf("%s: %s = %v, want ErrReadOnly", name, call, err)
			}
		}
	}
	if err := ro.CatchUp(); !errors.Is(err, storage.ErrNotSecondary) {
		t.Errorf("CatchUp of a read-only database = %v, want ErrNotSecondary", err)
	}

	put(t, w, mustFamily(t, w, "f"), "k", "v2")
	wantValue(t, sec, mustFamily(t, sec, "f"), nil, "k", "v1")
	if err := sec.CatchUp(); err != nil {
		t.Fatal(err)
	}
	wantValue(t, sec, mustFamily(t, sec, "f"), nil, "k", "v2")
	wantValue(t, ro, mustFamily(t, ro, "f"), nil, "k", "v1") // a read-only open does not move
}

// TestReadOnlyOpenRefused: a read-only open of a missing folder or of one that is not
// a rockline database fails and creates nothing; Secondary without ReadOnly is a
// *ConfigError.
func TestReadOnlyOpenRefused(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	if _, err := storage.Open(missing, storage.Options{ReadOnly: true}); err == nil {
		t.Error("read-only open of a missing folder succeeded")
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("the refused open created %s", missing)
	}
	empty := t.TempDir()
	if _, err := storage.Open(empty, storage.Options{ReadOnly: true}); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("read-only open of an empty folder = %v, want ErrNotFound", err)
	}
	var ce *storage.ConfigError
	if _, err := storage.Open(t.TempDir(), storage.Options{Secondary: "x"}); !errors.As(err, &ce) || ce.Field != "Secondary" {
		t.Errorf("Secondary without ReadOnly = %v, want a *ConfigError for Secondary", err)
	}
}

// TestCompactRangeReclaimsSpace: compacting a family whose keys were range-deleted
// brings its SST size back to zero; the block cache's use is reported; a read-only
// database refuses to compact.
func TestCompactRangeReclaimsSpace(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	db := openAt(t, dir, storage.Options{Families: map[string]storage.FamilyOptions{"f": {}}})
	f := mustFamily(t, db, "f")
	value := make([]byte, 1024)
	b := storage.NewBatch()
	for i := range 2000 {
		if err := b.Put(f, fmt.Appendf(nil, "k%05d", i), value); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Write(b); err != nil {
		t.Fatal(err)
	}
	sst := func() uint64 {
		t.Helper()
		st, err := db.Stats()
		if err != nil {
			t.Fatal(err)
		}
		for _, fs := range st.Families {
			if fs.Name == "f" {
				return fs.SSTBytes
			}
		}
		t.Fatal("no stats for f")
		return 0
	}
	if err := db.CompactRange(f, nil, nil); err != nil {
		t.Fatal(err)
	}
	full := sst()
	if full == 0 {
		t.Fatal("no SST bytes after compacting 2 MiB of writes")
	}
	wantValue(t, db, f, nil, "k00007", string(value)) // a read through the block cache
	if st, err := db.Stats(); err != nil || st.BlockCacheBytes == 0 {
		t.Errorf("block cache use = %d, %v; want some after a read", st.BlockCacheBytes, err)
	}
	del := storage.NewBatch()
	if err := del.DeleteRange(f, []byte("k"), []byte("l")); err != nil {
		t.Fatal(err)
	}
	if err := db.Write(del); err != nil {
		t.Fatal(err)
	}
	if err := db.CompactRange(f, []byte("k"), []byte("l")); err != nil {
		t.Fatal(err)
	}
	if after := sst(); after != 0 {
		t.Errorf("SST bytes %d -> %d after deleting everything and compacting, want 0", full, after)
	}
	var ce *storage.ConfigError
	if err := db.CompactRange(f, []byte("z"), []byte("a")); !errors.As(err, &ce) {
		t.Errorf("CompactRange(z, a) = %v, want a *ConfigError", err)
	}
	ro := openAt(t, dir, storage.Options{ReadOnly: true})
	if err := ro.CompactRange(mustFamily(t, ro, "f"), nil, nil); !errors.Is(err, storage.ErrReadOnly) {
		t.Errorf("CompactRange on a read-only database = %v, want ErrReadOnly", err)
	}
}
