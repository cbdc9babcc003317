package crash

import (
	"path/filepath"
	"testing"

	"github.com/rockline/rockline/pipeline"
	"github.com/rockline/rockline/storage"
)

// TestFamilyOptionsSurviveReopen: a family created with Config.FamilyDefaults keeps
// those options when the database is reopened with the same Config, like a family
// named in Config.Families does. (They used to fall back to RocksDB's 64 MiB
// memtables at the next Open, silently undoing a memory bound after every restart.)
func TestFamilyOptionsSurviveReopen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	cfg := pipeline.Config{
		FamilyDefaults: storage.FamilyOptions{WriteBufferSize: 4 << 20, MaxWriteBufferNumber: 3},
		Families:       map[string]storage.FamilyOptions{"named": {WriteBufferSize: 2 << 20}},
	}
	want := map[string]storage.FamilyOptions{
		"named":   {WriteBufferSize: 2 << 20, MaxWriteBufferNumber: storage.DefaultMaxWriteBufferNumber},
		"created": {WriteBufferSize: 4 << 20, MaxWriteBufferNumber: 3},
		"default": {WriteBufferSize: storage.DefaultWriteBufferSize, MaxWriteBufferNumber: storage.DefaultMaxWriteBufferNumber},
	}
	for name, w := range want { // the compression defaults are filled in too
		w.Compression, w.BottommostCompression = storage.DefaultCompression, storage.DefaultBottommostCompression
		want[name] = w
	}
	check := func(db *pipeline.DB, when string) {
		t.Helper()
		for name, w := range want {
			cf, err := db.ColumnFamily(name)
			if err != nil {
				t.Fatalf("%s: %v", when, err)
			}
			if got := cf.Options(); got != w {
				t.Errorf("%s: family %q has options %+v, want %+v", when, name, got, w)
			}
		}
		st, err := db.StorageStats()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range st.Families {
			if w, ok := want[f.Name]; ok && (f.WriteBufferSize != w.WriteBufferSize || f.MaxWriteBufferNumber != w.MaxWriteBufferNumber) {
				t.Errorf("%s: StorageStats for %q: buffer %d x %d, want %d x %d", when, f.Name, f.WriteBufferSize, f.MaxWriteBufferNumber, w.WriteBufferSize, w.MaxWriteBufferNumber)
			}
		}
	}
	db, err := pipeline.Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreateColumnFamily("created"); err != nil {
		t.Fatal(err)
	}
	check(db, "after create")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = pipeline.Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	check(db, "after reopen")
}
