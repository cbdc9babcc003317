package pipeline

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"

	"github.com/rockline/rockline/storage"
)

// TestRecordedSettings: the folder keeps the settings it was created with and those
// of its latest writable open; read-only opens read them and change nothing; a record
// that does not decode is ErrCorrupt.
func TestRecordedSettings(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	db, err := Open(dir, Config{Validation: Serial, Lanes: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = Open(dir, Config{Validation: Parallel, Lanes: 3, Sync: true, BloomBitsPerKey: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	ro, err := OpenReadOnly(dir, Config{Validation: Serial})
	if err != nil {
		t.Fatal(err)
	}
	created, opened, err := ro.RecordedSettings()
	if err != nil {
		t.Fatal(err)
	}
	if created.Validation != Serial || created.Lanes != 1 || created.BloomBitsPerKey != storage.DefaultBloomBitsPerKey || created.At.IsZero() {
		t.Errorf("created with %+v, want serial, 1 lane, the default bloom filter", created)
	}
	if opened.Validation != Parallel || opened.Lanes != 3 || !opened.Sync || opened.BloomBitsPerKey != 0 || opened.At.Before(created.At) {
		t.Errorf("last opened with %+v, want parallel, 3 lanes, sync, no bloom filter, after the creation", opened)
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}

	db, err = Open(dir, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	b := storage.NewBatch()
	if err := b.Put(db.local().sys, metaCreatedWith, []byte(`{"validation":"parallel","surprise":1}`)); err != nil {
		t.Fatal(err)
	}
	if err := db.local().store.Write(b); err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.RecordedSettings(); !errors.Is(err, ErrCorrupt) {
		t.Errorf("RecordedSettings of a record with an unknown field = %v, want ErrCorrupt", err)
	}
	if pos, err := db.CheckpointedPosition(); err != nil || pos != 0 {
		t.Errorf("CheckpointedPosition before any checkpoint = %d, %v", pos, err)
	}
	if _, err := db.Checkpoint(filepath.Join(t.TempDir(), "cp")); err != nil {
		t.Fatal(err)
	}
	if pos, err := db.CheckpointedPosition(); err != nil || pos != db.LastPosition() {
		t.Errorf("CheckpointedPosition after a checkpoint = %d, %v; want %d", pos, err, db.LastPosition())
	}
}

// FuzzDecodeSettings: the settings decoder never panics, and what it accepts
// re-encodes to a record it accepts again with the same value.
func FuzzDecodeSettings(f *testing.F) {
	f.Add([]byte(`{"validation":"parallel","lanes":2,"buckets":65536,"sync":false,"disable_wal":false,"bloom_bits_per_key":10,"at":"2026-12-01T15:12:30Z"}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"lanes":-1} {}`))
	f.Fuzz(func(t *testing.T, v []byte) {
		var fs FolderSettings
		if decodeSettings(v, &fs) != nil {
			return
		}
		var again FolderSettings
		b, err := json.Marshal(fs)
		if err != nil {
			return // a time outside what JSON can hold
		}
		if err := decodeSettings(b, &again); err != nil || !again.At.Equal(fs.At) || again.Validation != fs.Validation || again.Lanes != fs.Lanes {
			t.Errorf("%q decoded to %+v, re-encoded to %q, decoded to %+v (%v)", v, fs, b, again, err)
		}
	})
}
