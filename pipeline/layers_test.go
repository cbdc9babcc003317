package pipeline_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/rockline/rockline/pipeline"
	"github.com/rockline/rockline/storage"
)

// settingsIn lists the keys of fam that start with 'm' (rockline's settings and family
// markers), read with the storage layer directly.
func settingsIn(t testing.TB, st *storage.DB, fam string) map[string]string {
	t.Helper()
	f, err := st.Family(fam)
	if err != nil {
		t.Fatalf("family %s: %v", fam, err)
	}
	it, err := st.NewIterator(f, storage.IterOptions{Lower: []byte("m"), Upper: []byte("n")})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	out := map[string]string{}
	for it.First(); it.Valid(); it.Next() {
		k, v, err := it.Item()
		if err != nil {
			t.Fatal(err)
		}
		out[string(k)] = string(v)
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestUpgradeLegacyLayout: a folder written before rockline.system existed kept the
// settings (truncation, checkpoint mark) and family markers in rockline.streams. Open
// moves them into rockline.system, once: the truncation still holds, no family is
// recorded again (the log does not grow), and the old family keeps no settings.
func TestUpgradeLegacyLayout(t *testing.T) {
	db, dir := openDB(t, pipeline.Config{})
	a := dropCreate(t, db, "a")
	for i := range 5 {
		put(t, db, a, string(key("k%d", i)), "v")
	}
	covered, err := db.Checkpoint(filepath.Join(t.TempDir(), "cp"))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.TruncateLog(covered); err != nil {
		t.Fatal(err)
	}
	last := db.LastPosition()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// Lay the folder out as the old version did.
	st, err := storage.Open(dir, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	settings := settingsIn(t, st, "rockline.system")
	if settings["mformat"] == "" || settings["mtruncated"] == "" || settings["mfamily/a"] == "" {
		t.Fatalf("the new layout lacks a setting the test moves: %q", settings)
	}
	legacy, err := st.CreateFamily("rockline.streams", storage.FamilyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sys, err := st.Family("rockline.system")
	if err != nil {
		t.Fatal(err)
	}
	b := storage.NewBatch()
	for k, v := range settings {
		if err := errors.Join(b.Delete(sys, []byte(k)), b.Put(legacy, []byte(k), []byte(v))); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Delete(legacy, []byte("mformat")); err != nil {
		t.Fatal(err)
	}
	if err := st.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	db = openAt(t, dir, pipeline.Config{})
	if got := db.LastPosition(); got != last {
		t.Errorf("LastPosition %d after the upgrade, want %d (no family recorded again)", got, last)
	}
	if _, err := db.ReadLog(1, 1); !errors.Is(err, pipeline.ErrLogTruncated) {
		t.Errorf("ReadLog(1) after the upgrade = %v, want ErrLogTruncated (the truncation kept)", err)
	}
	if err := db.TruncateLog(covered + 1); err != nil { // the checkpoint mark kept
		t.Errorf("TruncateLog(%d) after the upgrade: %v", covered+1, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	st, err = storage.Open(dir, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if got := settingsIn(t, st, "rockline.streams"); len(got) != 0 {
		t.Errorf("rockline.streams still holds settings after the upgrade: %q", got)
	}
	if got := settingsIn(t, st, "rockline.system"); got["mfamily/a"] == "" || got["mformat"] == "" {
		t.Errorf("rockline.system after the upgrade: %q", got)
	}
}
