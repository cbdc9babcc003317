package pipeline_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rockline/rockline/pipeline"
)

// TestDeleteRange: a range delete removes exactly the keys of its family in
// [start, end) at commit, is in the log entry after the other writes, and a rebuild
// from the log reproduces it; a transaction cannot both write a key and delete a range
// holding it, in either order; bad ranges are refused.
func TestDeleteRange(t *testing.T) {
	for _, mode := range commitModes {
		t.Run(string(mode), func(t *testing.T) {
			db, _ := openDB(t, pipeline.Config{})
			cf := dropCreate(t, db, "f")
			for i := range 6 {
				put(t, db, cf, fmt.Sprintf("k%d", i), "v")
				put(t, db, db.Default(), fmt.Sprintf("k%d", i), "v") // another family: untouched
			}
			tx := db.Begin()
			if err := tx.Put(cf, []byte("k9"), []byte("new")); err != nil {
				t.Fatal(err)
			}
			if err := tx.DeleteRange(cf, []byte("k1"), []byte("k4")); err != nil {
				t.Fatal(err)
			}
			wantArgumentError(t, "Put inside a deleted range", tx.Put(cf, []byte("k2"), []byte("x")), "key")
			wantArgumentError(t, "range over a written key", tx.DeleteRange(cf, []byte("k8"), []byte("k99")), "start")
			wantArgumentError(t, "start after end", tx.DeleteRange(cf, []byte("k5"), []byte("k4")), "start")
			if v, _ := tx.Get(cf, []byte("k2")); string(v) != "v" {
				t.Errorf("own read of a key in the deleted range = %q, want the snapshot's v (reads do not see range deletes)", v)
			}
			if err := mode.commit(tx); err != nil {
				t.Fatal(err)
			}
			for i, want := range []bool{true, false, false, false, true, true} {
				_, ok := get(t, db, cf, fmt.Sprintf("k%d", i))
				if ok != want {
					t.Errorf("k%d present = %v, want %v", i, ok, want)
				}
				if _, ok := get(t, db, db.Default(), fmt.Sprintf("k%d", i)); !ok {
					t.Errorf("default family's k%d deleted", i)
				}
			}
			e, err := db.Entry(db.LastPosition())
			if err != nil {
				t.Fatal(err)
			}
			want := []pipeline.LogWrite{
				{Family: "f", Generation: 1, Key: []byte("k9"), Value: []byte("new")},
				{Family: "f", Generation: 1, Key: []byte("k1"), Value: []byte("k4"), Range: true},
			}
			if diff := cmp.Diff(want, e.Writes); diff != "" {
				t.Errorf("log entry writes (-want +got):\n%s", diff)
			}
			rebuilt, err := db.Rebuild(ctx, filepath.Join(t.TempDir(), "rebuilt"), pipeline.Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer rebuilt.Close()
			if diff := cmp.Diff(familyContents(t, db), familyContents(t, rebuilt)); diff != "" {
				t.Errorf("rebuilt contents (-want +got):\n%s", diff)
			}

			only := db.Begin()
			if err := only.DeleteRange(cf, []byte("a"), []byte("z")); err != nil {
				t.Fatal(err)
			}
			pos, err := only.CommitPosition(ctx)
			if err != nil || pos == 0 {
				t.Fatalf("a commit of only a range delete = %d, %v; want a position", pos, err)
			}
			if got := familyContents(t, db)["f"]; len(got) != 0 {
				t.Errorf("family after deleting [a, z) = %v", got)
			}
		})
	}
}
