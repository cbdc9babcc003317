package storage_test

import (
	"errors"
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
			"Checkpoint":  db.Checkpoint(filepath.Join(t.TempDir(), "cp")),
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
