package storage_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rockline/rockline/storage"
)

// TestPaddingFamilies: after a drop, a family created later does not have its options
// logged by RocksDB (which its size-capped LOG would keep in memory until Close); the
// padding families that make it so are hidden, cannot be dropped or created by name,
// and survive a reopen.
func TestPaddingFamilies(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	db := openAt(t, dir, storage.Options{})
	if _, err := db.CreateFamily("first", storage.FamilyOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := db.DropFamily("first"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreateFamily("second", storage.FamilyOptions{}); err != nil {
		t.Fatal(err)
	}
	names, err := db.Families()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"default", "second"}, names); diff != "" {
		t.Errorf("Families() (-want +got):\n%s", diff)
	}
	st, err := db.Stats()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range st.Families {
		if strings.HasPrefix(f.Name, storage.PadFamilyPrefix) {
			t.Errorf("Stats lists the padding family %q", f.Name)
		}
	}
	pad := storage.PadFamilyPrefix + "1"
	var ce *storage.ConfigError
	if err := db.DropFamily(pad); !errors.As(err, &ce) || ce.Field != "family name" {
		t.Errorf("DropFamily(%q) = %v, want a *ConfigError naming the family name", pad, err)
	}
	if _, err := db.CreateFamily(storage.PadFamilyPrefix+"99", storage.FamilyOptions{}); !errors.As(err, &ce) || ce.Field != "family name" {
		t.Errorf("CreateFamily of a padding name = %v, want a *ConfigError naming the family name", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// RocksDB logged the options of the family created before the drop, not of the
	// one created after it.
	log, err := os.ReadFile(filepath.Join(dir, "LOG"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), "Options for column family [first]") {
		t.Fatal("the LOG has no options of the family created before the drop: RocksDB's logging changed, this test no longer tells")
	}
	if strings.Contains(string(log), "Options for column family [second]") {
		t.Error("RocksDB logged the options of a family created after a drop: its capped LOG keeps them in memory")
	}

	db = openAt(t, dir, storage.Options{})
	names, err = db.Families()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"default", "second"}, names); diff != "" {
		t.Errorf("Families() after reopen (-want +got):\n%s", diff)
	}
	if err := db.DropFamily(pad); !errors.As(err, &ce) {
		t.Errorf("DropFamily(%q) after reopen = %v, want a *ConfigError", pad, err)
	}
}
