package storage_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rockline/rockline/storage"
)

func TestInvalidOptions(t *testing.T) {
	fam := func(name string, f storage.FamilyOptions) storage.Options {
		return storage.Options{Families: map[string]storage.FamilyOptions{name: f}}
	}
	long := strings.Repeat("n", storage.MaxFamilyNameLen+1)
	cases := []struct {
		name      string
		opts      storage.Options
		field     string
		wantValue any
	}{
		{"BlockCacheSize=-1", storage.Options{BlockCacheSize: -1}, "BlockCacheSize", int64(-1)},
		{"BlockCacheSize=64GiB+1", storage.Options{BlockCacheSize: 64<<30 + 1}, "BlockCacheSize", int64(64<<30 + 1)},
		{"WriteBufferSize=1", fam("x", storage.FamilyOptions{WriteBufferSize: 1}), "Families[x].WriteBufferSize", int64(1)},
		{"WriteBufferSize=1MiB-1", fam("x", storage.FamilyOptions{WriteBufferSize: 1<<20 - 1}), "Families[x].WriteBufferSize", int64(1<<20 - 1)},
		{"WriteBufferSize=4GiB+1", fam("x", storage.FamilyOptions{WriteBufferSize: 4<<30 + 1}), "Families[x].WriteBufferSize", int64(4<<30 + 1)},
		{"WriteBufferSize=-5", fam("x", storage.FamilyOptions{WriteBufferSize: -5}), "Families[x].WriteBufferSize", int64(-5)},
		{"MaxWriteBufferNumber=1", fam("x", storage.FamilyOptions{MaxWriteBufferNumber: 1}), "Families[x].MaxWriteBufferNumber", 1},
		{"MaxWriteBufferNumber=65", fam("x", storage.FamilyOptions{MaxWriteBufferNumber: 65}), "Families[x].MaxWriteBufferNumber", 65},
		{"MaxWriteBufferNumber=-1", fam("x", storage.FamilyOptions{MaxWriteBufferNumber: -1}), "Families[x].MaxWriteBufferNumber", -1},
		{"default family WriteBufferSize", fam("default", storage.FamilyOptions{WriteBufferSize: 1}), "Families[default].WriteBufferSize", int64(1)},
		{"empty family name", fam("", storage.FamilyOptions{}), "family name", ""},
		{"256-byte family name", fam(long, storage.FamilyOptions{}), "family name", long},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			check := func(op string, err error) {
				t.Helper()
				var ce *storage.ConfigError
				if !errors.As(err, &ce) {
					t.Fatalf("%s: %v, want *ConfigError", op, err)
				}
				if !errors.Is(err, storage.ErrInvalidConfig) {
					t.Errorf("%s: %v does not match ErrInvalidConfig", op, err)
				}
				if ce.Field != tc.field {
					t.Errorf("%s: Field = %q, want %q", op, ce.Field, tc.field)
				}
				if diff := cmp.Diff(tc.wantValue, ce.Value); diff != "" {
					t.Errorf("%s: Value (-want +got):\n%s", op, diff)
				}
				if ce.Expected == "" || !strings.Contains(err.Error(), tc.field) || !strings.Contains(err.Error(), "expected "+ce.Expected) {
					t.Errorf("%s: message %q lacks the field or what was expected", op, err)
				}
			}
			check("Validate", tc.opts.Validate())

			dir := filepath.Join(t.TempDir(), "db")
			db, err := storage.Open(dir, tc.opts)
			if db != nil {
				db.Close()
				t.Fatal("Open returned a database")
			}
			check("Open", err)
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("Open with bad options touched the disk: Stat(%s) = %v", dir, err)
			}
		})
	}
}

func TestInvalidFamilyOptionsOnCreate(t *testing.T) {
	db := openDB(t, storage.Options{})
	cases := []struct {
		name  string
		fname string
		opts  storage.FamilyOptions
		field string
	}{
		{"WriteBufferSize", "x", storage.FamilyOptions{WriteBufferSize: 1<<20 - 1}, "WriteBufferSize"},
		{"MaxWriteBufferNumber", "x", storage.FamilyOptions{MaxWriteBufferNumber: 65}, "MaxWriteBufferNumber"},
		{"empty name", "", storage.FamilyOptions{}, "family name"},
		{"long name", strings.Repeat("n", 256), storage.FamilyOptions{}, "family name"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := db.CreateFamily(tc.fname, tc.opts)
			var ce *storage.ConfigError
			if !errors.As(err, &ce) || !errors.Is(err, storage.ErrInvalidConfig) {
				t.Fatalf("CreateFamily: %v, want *ConfigError", err)
			}
			if ce.Field != tc.field {
				t.Errorf("Field = %q, want %q", ce.Field, tc.field)
			}
		})
	}
	names, err := db.Families()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"default"}, names); diff != "" {
		t.Errorf("Families() after refused creates (-want +got):\n%s", diff)
	}
}

func TestOpenEmptyDir(t *testing.T) {
	_, err := storage.Open("", storage.Options{})
	var ce *storage.ConfigError
	if !errors.As(err, &ce) || ce.Field != "dir" {
		t.Fatalf("Open(\"\"): %v, want *ConfigError for dir", err)
	}
}

func TestValidOptionEdges(t *testing.T) {
	// Validated only: opening would reserve these for real.
	for name, o := range map[string]storage.Options{
		"WriteBufferSize=4GiB": {Families: map[string]storage.FamilyOptions{"x": {WriteBufferSize: 4 << 30}}},
		"BlockCacheSize=64GiB": {BlockCacheSize: 64 << 30},
	} {
		if err := o.Validate(); err != nil {
			t.Errorf("%s: Validate: %v", name, err)
		}
	}
	if err := (storage.FamilyOptions{WriteBufferSize: 4 << 30, MaxWriteBufferNumber: 64}).Validate(); err != nil {
		t.Errorf("FamilyOptions.Validate at the upper edges: %v", err)
	}

	name255 := strings.Repeat("n", storage.MaxFamilyNameLen)
	cases := []struct {
		name string
		fam  string
		opts storage.FamilyOptions
		want storage.FamilyOptions
	}{
		{"WriteBufferSize=1MiB", "x", storage.FamilyOptions{WriteBufferSize: 1 << 20}, storage.FamilyOptions{WriteBufferSize: 1 << 20, MaxWriteBufferNumber: 2}},
		{"MaxWriteBufferNumber=2", "x", storage.FamilyOptions{MaxWriteBufferNumber: 2}, storage.FamilyOptions{WriteBufferSize: 64 << 20, MaxWriteBufferNumber: 2}},
		{"MaxWriteBufferNumber=64", "x", storage.FamilyOptions{MaxWriteBufferNumber: 64}, storage.FamilyOptions{WriteBufferSize: 64 << 20, MaxWriteBufferNumber: 64}},
		{"zeros", "x", storage.FamilyOptions{}, storage.FamilyOptions{WriteBufferSize: 64 << 20, MaxWriteBufferNumber: 2}},
		{"default family", "default", storage.FamilyOptions{WriteBufferSize: 1 << 20, MaxWriteBufferNumber: 3}, storage.FamilyOptions{WriteBufferSize: 1 << 20, MaxWriteBufferNumber: 3}},
		{"255-byte name", name255, storage.FamilyOptions{}, storage.FamilyOptions{WriteBufferSize: 64 << 20, MaxWriteBufferNumber: 2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opts := storage.Options{Families: map[string]storage.FamilyOptions{tc.fam: tc.opts}}
			if err := opts.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			db := openDB(t, opts)
			f := mustFamily(t, db, tc.fam)
			want := tc.want // compression defaults are filled in too
			want.Compression, want.BottommostCompression = storage.DefaultCompression, storage.DefaultBottommostCompression
			if diff := cmp.Diff(want, f.Options()); diff != "" {
				t.Errorf("Options() (-want +got):\n%s", diff)
			}
			put(t, db, f, "k", "v")
			wantValue(t, db, f, nil, "k", "v")
		})
	}
	t.Run("BlockCacheSize=0", func(t *testing.T) {
		db := openDB(t, storage.Options{BlockCacheSize: 0})
		put(t, db, db.Default(), "k", "v")
	})
}

// TestStorageSettingsApplied: the defaults (and explicit settings) reach RocksDB, as
// the OPTIONS file it writes into the folder records them: a bloom filter, lz4 above
// zstd at the bottom, dynamic level bytes, two background jobs, capped LOG files.
func TestStorageSettingsApplied(t *testing.T) {
	cases := []struct {
		name string
		opts storage.Options
		want []string
	}{
		{"defaults", storage.Options{}, []string{"filter_policy=bloomfilter", "compression=kLZ4Compression", "bottommost_compression=kZSTD",
			"level_compaction_dynamic_level_bytes=true", "max_background_jobs=2", "keep_log_file_num=4", "max_log_file_size=16777216"}},
		{"explicit", storage.Options{BloomBitsPerKey: 16, BackgroundJobs: 3, KeepLogFiles: 2, MaxLogFileSize: 1 << 20,
			FamilyDefaults: storage.FamilyOptions{Compression: "zstd", BottommostCompression: "none", StaticLevelBytes: true},
			Families:       map[string]storage.FamilyOptions{"default": {Compression: "snappy", BottommostCompression: "zstd"}, "x": {Compression: "none", StaticLevelBytes: true}}},
			[]string{"filter_policy=bloomfilter", "compression=kSnappyCompression", "compression=kNoCompression", "level_compaction_dynamic_level_bytes=false",
				"max_background_jobs=3", "keep_log_file_num=2", "max_log_file_size=1048576"}},
		{"no filter", storage.Options{BloomBitsPerKey: -1}, []string{"filter_policy=nullptr"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "db")
			db := openAt(t, dir, tc.opts)
			put(t, db, db.Default(), "k", "v")
			files, err := filepath.Glob(filepath.Join(dir, "OPTIONS-*"))
			if err != nil || len(files) == 0 {
				t.Fatalf("no OPTIONS file in %s: %v", dir, err)
			}
			slices.Sort(files)
			text, err := os.ReadFile(files[len(files)-1])
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(text), w) {
					t.Errorf("OPTIONS lacks %q", w)
				}
			}
		})
	}
}

// TestStorageSettingsRefused: a bad database-wide setting or compression name is a
// *ConfigError naming the field, and nothing is created.
func TestStorageSettingsRefused(t *testing.T) {
	cases := map[string]storage.Options{
		"BloomBitsPerKey":                   {BloomBitsPerKey: 65},
		"BackgroundJobs":                    {BackgroundJobs: 65},
		"MaxLogFileSize":                    {MaxLogFileSize: 1000},
		"KeepLogFiles":                      {KeepLogFiles: -1},
		"FamilyDefaults.Compression":        {FamilyDefaults: storage.FamilyOptions{Compression: "gzip"}},
		"Families[x].BottommostCompression": {Families: map[string]storage.FamilyOptions{"x": {BottommostCompression: "LZ4"}}},
	}
	for field, opts := range cases {
		dir := filepath.Join(t.TempDir(), "db")
		_, err := storage.Open(dir, opts)
		var ce *storage.ConfigError
		if !errors.As(err, &ce) || ce.Field != field {
			t.Errorf("%s: Open = %v, want a *ConfigError for %s", field, err, field)
		}
		if _, statErr := os.Stat(dir); !os.IsNotExist(statErr) {
			t.Errorf("%s: the refused Open created %s", field, dir)
		}
	}
}
