package storage_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/rockline/rockline/storage"
)

// writeSST writes keys k<from>..k<to-1> (zero-padded, so sorted) with values
// "v<i>-<tag>" into a new SST file at path.
func writeSST(t *testing.T, path string, opts storage.Options, from, to int, tag string) {
	t.Helper()
	w, err := storage.NewSSTWriter(path, opts, storage.FamilyOptions{})
	if err != nil {
		t.Fatalf("NewSSTWriter(%s): %v", path, err)
	}
	defer w.Close()
	for i := from; i < to; i++ {
		if err := w.Put(fmt.Appendf(nil, "k%06d", i), fmt.Appendf(nil, "v%d-%s", i, tag)); err != nil {
			t.Fatalf("Put %d: %v", i, err)
		}
	}
	if err := w.Finish(); err != nil {
		t.Fatalf("Finish(%s): %v", path, err)
	}
}

// TestIngestExternalFiles bulk-loads two SST files into a family that already holds
// keys: the ingested keys read back, win over older writes of the same key, survive a
// reopen, leave the other family alone, and Move consumes the source names.
func TestIngestExternalFiles(t *testing.T) {
	for _, bloom := range []float64{0, -1} {
		t.Run(fmt.Sprintf("bloom=%v", bloom), func(t *testing.T) {
			opts := storage.Options{BloomBitsPerKey: bloom, Families: map[string]storage.FamilyOptions{"bulk": {}, "other": {}}}
			dir := filepath.Join(t.TempDir(), "db")
			src := t.TempDir()
			db, err := storage.Open(dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			bulk, other := mustFamily(t, db, "bulk"), mustFamily(t, db, "other")
			b := storage.NewBatch()
			mustPut(t, b, bulk, "k000005", "old")
			mustPut(t, b, bulk, "z", "kept")
			mustPut(t, b, other, "k000005", "other")
			if err := db.Write(b); err != nil {
				t.Fatal(err)
			}
			files := []string{filepath.Join(src, "1.sst"), filepath.Join(src, "2.sst")}
			writeSST(t, files[0], opts, 0, 500, "a")
			writeSST(t, files[1], opts, 500, 1000, "b")
			if err := db.IngestExternalFiles(bulk, files, storage.IngestOptions{Move: true}); err != nil {
				t.Fatalf("IngestExternalFiles: %v", err)
			}
			for _, f := range files {
				if _, err := os.Stat(f); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s after a Move ingestion: %v, want it gone", f, err)
				}
			}
			check := func(db *storage.DB) {
				t.Helper()
				bulk, other := mustFamily(t, db, "bulk"), mustFamily(t, db, "other")
				for key, want := range map[string]string{"k000000": "v0-a", "k000005": "v5-a", "k000499": "v499-a", "k000500": "v500-b", "k000999": "v999-b", "z": "kept"} {
					got, err := db.Get(bulk, []byte(key), nil)
					if err != nil || string(got) != want {
						t.Errorf("bulk %s = %q, %v; want %q", key, got, err, want)
					}
				}
				if _, err := db.Get(bulk, []byte("k001000"), nil); !errors.Is(err, storage.ErrNotFound) {
					t.Errorf("bulk k001000: %v, want ErrNotFound", err)
				}
				if got, err := db.Get(other, []byte("k000005"), nil); err != nil || string(got) != "other" {
					t.Errorf("other k000005 = %q, %v; want the family untouched", got, err)
				}
			}
			check(db)
			st, err := db.Stats()
			if err != nil {
				t.Fatal(err)
			}
			if st.Tickers == nil || familyStats(t, st, "bulk").SSTBytes == 0 {
				t.Errorf("Stats after ingestion: tickers %d, bulk SST bytes %d; want both", len(st.Tickers), familyStats(t, st, "bulk").SSTBytes)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			check(openAt(t, dir, opts))
		})
	}
}

// TestIngestRefusals: a writer refuses keys out of order and an empty file; the
// database refuses no files, a foreign family and, read-only, any ingestion.
func TestIngestRefusals(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	db := openAt(t, dir, storage.Options{Families: map[string]storage.FamilyOptions{"bulk": {}}})
	bulk := mustFamily(t, db, "bulk")

	w, err := storage.NewSSTWriter(filepath.Join(t.TempDir(), "x.sst"), storage.Options{}, storage.FamilyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Put([]byte("b"), nil); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"b", "a"} {
		if err := w.Put([]byte(k), nil); !errors.Is(err, storage.ErrInvalidConfig) {
			t.Errorf("Put(%q) after \"b\": %v, want a *ConfigError", k, err)
		}
	}
	w.Close()
	w.Close() // idempotent

	empty, err := storage.NewSSTWriter(filepath.Join(t.TempDir(), "empty.sst"), storage.Options{}, storage.FamilyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := empty.Finish(); !errors.Is(err, storage.ErrInvalidConfig) {
		t.Errorf("Finish of an empty file: %v, want ErrInvalidConfig", err)
	}
	empty.Close()
	if _, err := storage.NewSSTWriter(filepath.Join(t.TempDir(), "bad.sst"), storage.Options{}, storage.FamilyOptions{Compression: "gzip"}); !errors.Is(err, storage.ErrInvalidConfig) {
		t.Errorf("NewSSTWriter with compression gzip: %v, want a *ConfigError", err)
	}

	if err := db.IngestExternalFiles(bulk, nil, storage.IngestOptions{}); !errors.Is(err, storage.ErrInvalidConfig) {
		t.Errorf("IngestExternalFiles with no file: %v, want a *ConfigError", err)
	}
	if err := db.IngestExternalFiles(bulk, []string{filepath.Join(t.TempDir(), "missing.sst")}, storage.IngestOptions{}); err == nil {
		t.Error("IngestExternalFiles of a missing file succeeded")
	}
	foreign := openDB(t, storage.Options{Families: map[string]storage.FamilyOptions{"bulk": {}}})
	if err := foreign.IngestExternalFiles(bulk, []string{"x"}, storage.IngestOptions{}); !errors.Is(err, storage.ErrForeignFamily) {
		t.Errorf("IngestExternalFiles with another database's family: %v, want ErrForeignFamily", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	ro := openAt(t, dir, storage.Options{ReadOnly: true})
	if err := ro.IngestExternalFiles(mustFamily(t, ro, "bulk"), []string{"x"}, storage.IngestOptions{}); !errors.Is(err, storage.ErrReadOnly) {
		t.Errorf("IngestExternalFiles read-only: %v, want ErrReadOnly", err)
	}
}
