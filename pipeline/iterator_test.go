package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rockline/rockline/pipeline"
)

type kv struct{ K, V string }

// collect walks it from its current position to the end.
func collect(t *testing.T, it *pipeline.Iterator) []kv {
	t.Helper()
	var out []kv
	for ; it.Valid(); it.Next() {
		out = append(out, kv{string(it.Key()), string(it.Value())})
	}
	if err := it.Err(); err != nil {
		t.Fatalf("iterator: %v", err)
	}
	return out
}

func mustIter(t *testing.T, tx *pipeline.Txn, cf *pipeline.ColumnFamily, lower, upper string) *pipeline.Iterator {
	t.Helper()
	var o pipeline.IterOptions
	if lower != "" {
		o.Lower = []byte(lower)
	}
	if upper != "" {
		o.Upper = []byte(upper)
	}
	it, err := tx.NewIterator(cf, o)
	if err != nil {
		t.Fatalf("NewIterator: %v", err)
	}
	t.Cleanup(it.Close)
	return it
}

// TestIteratorMergedView: an iterator shows the snapshot merged with the transaction's
// own puts and deletes, within its bounds, and not writes buffered after it opened.
func TestIteratorMergedView(t *testing.T) {
	for _, pol := range policies {
		t.Run(pol, func(t *testing.T) {
			db, _ := openDB(t, pipeline.Config{Validation: pol})
			cf := db.Default()
			for _, k := range []string{"a1", "a2", "a3", "a4", "a5", "b1"} {
				put(t, db, cf, k, "base-"+k)
			}
			tx := db.Begin()
			defer tx.Discard()
			put(t, db, cf, "a45", "after-begin") // committed after the snapshot: unseen
			must := func(err error) {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
			}
			must(tx.Put(cf, []byte("a0"), []byte("own"))) // below Lower
			must(tx.Put(cf, []byte("a25"), []byte("own")))
			must(tx.Put(cf, []byte("a3"), []byte("own-old")))
			must(tx.Put(cf, []byte("a3"), []byte("own"))) // the latest write wins
			must(tx.Delete(cf, []byte("a2")))
			must(tx.Put(cf, []byte("a4"), []byte("own")))
			must(tx.Delete(cf, []byte("a4")))             // put then delete: hidden
			must(tx.Put(cf, []byte("a6"), []byte("own"))) // Upper is exclusive

			it := mustIter(t, tx, cf, "a1", "a6")
			must(tx.Put(cf, []byte("a15"), []byte("too-late"))) // after the iterator opened
			it.First()
			want := []kv{{"a1", "base-a1"}, {"a25", "own"}, {"a3", "own"}, {"a5", "base-a5"}}
			if diff := cmp.Diff(want, collect(t, it)); diff != "" {
				t.Errorf("First.. (-want +got):\n%s", diff)
			}
			it.Seek([]byte("a26"))
			if diff := cmp.Diff(want[2:], collect(t, it)); diff != "" {
				t.Errorf("Seek(a26).. (-want +got):\n%s", diff)
			}
			it.Seek([]byte("a25"))
			if diff := cmp.Diff(want[1:], collect(t, it)); diff != "" {
				t.Errorf("Seek(a25).. (-want +got):\n%s", diff)
			}
			it.Next() // past the end: stays invalid
			if it.Valid() || it.Key() != nil || it.Value() != nil {
				t.Errorf("after the end: Valid=%v Key=%q Value=%q", it.Valid(), it.Key(), it.Value())
			}

			all := mustIter(t, tx, cf, "", "")
			all.First()
			want = []kv{{"a0", "own"}, {"a1", "base-a1"}, {"a15", "too-late"}, {"a25", "own"}, {"a3", "own"}, {"a5", "base-a5"}, {"a6", "own"}, {"b1", "base-b1"}}
			if diff := cmp.Diff(want, collect(t, all)); diff != "" {
				t.Errorf("unbounded (-want +got):\n%s", diff)
			}
			all.Close()
			all.Close() // idempotent
		})
	}
}

// TestIteratorTracksKeys: keys an iterator yields are tracked like Get: a concurrent
// commit to one of them makes the transaction conflict; a commit to a key outside the
// iterated range does not.
func TestIteratorTracksKeys(t *testing.T) {
	cases := []struct {
		name     string
		rival    func(tx *pipeline.Txn, cf *pipeline.ColumnFamily) error
		conflict bool
	}{
		{"rival writes an iterated key", func(tx *pipeline.Txn, cf *pipeline.ColumnFamily) error {
			return tx.Put(cf, []byte("a3"), []byte("rival"))
		}, true},
		{"rival deletes an iterated key", func(tx *pipeline.Txn, cf *pipeline.ColumnFamily) error { return tx.Delete(cf, []byte("a1")) }, true},
		{"rival writes outside the range", func(tx *pipeline.Txn, cf *pipeline.ColumnFamily) error {
			return tx.Put(cf, []byte("c9"), []byte("rival"))
		}, false},
		{"rival writes past where iteration stopped", func(tx *pipeline.Txn, cf *pipeline.ColumnFamily) error {
			return tx.Put(cf, []byte("a5"), []byte("rival"))
		}, false},
	}
	for _, pol := range policies {
		for _, mode := range commitModes {
			for _, tc := range cases {
				t.Run(pol+"/"+string(mode)+"/"+tc.name, func(t *testing.T) {
					db, _ := openDB(t, pipeline.Config{Validation: pol})
					cf := db.Default()
					for _, k := range []string{"a1", "a3", "a5"} {
						put(t, db, cf, k, "base")
					}
					tx := db.Begin()
					it := mustIter(t, tx, cf, "a", "b")
					it.First()
					it.Next() // yields a1 and a3, stops before a5
					if !it.Valid() || string(it.Key()) != "a3" {
						t.Fatalf("iterator at %q, want a3", it.Key())
					}
					it.Close()
					if err := tx.Put(cf, []byte("z"), []byte("summary")); err != nil {
						t.Fatal(err)
					}
					rival := db.Begin()
					if err := tc.rival(rival, cf); err != nil {
						t.Fatal(err)
					}
					if err := rival.Commit(context.Background()); err != nil {
						t.Fatal(err)
					}
					err := mode.commit(tx)
					if tc.conflict && !errors.Is(err, pipeline.ErrConflict) {
						t.Fatalf("commit: %v, want ErrConflict", err)
					}
					if !tc.conflict && err != nil {
						t.Fatalf("commit: %v, want nil", err)
					}
					_, ok := get(t, db, cf, "z")
					if ok == tc.conflict {
						t.Errorf("z written = %v, want %v", ok, !tc.conflict)
					}
				})
			}
		}
	}
}

// TestIteratorBothDirections walks merged views (snapshot keys, own puts that add or
// shadow keys, own deletes that hide them, bounds) with random sequences of First,
// Last, Seek, Next and Prev, direction changes included, against a sorted model.
func TestIteratorBothDirections(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 13))
	db, _ := openDB(t, pipeline.Config{})
	cf := db.Default()
	for round := range 30 {
		prefix := fmt.Sprintf("r%02d/", round)
		model := map[string]string{}
		for i := range 12 {
			if rng.IntN(2) == 0 {
				k := fmt.Sprintf("%sk%02d", prefix, i)
				put(t, db, cf, k, "base")
				model[k] = "base"
			}
		}
		tx := db.Begin()
		for i := range 12 {
			k := fmt.Sprintf("%sk%02d", prefix, i)
			switch rng.IntN(4) {
			case 0:
				if err := tx.Put(cf, []byte(k), []byte("own")); err != nil {
					t.Fatal(err)
				}
				model[k] = "own"
			case 1:
				if err := tx.Delete(cf, []byte(k)); err != nil {
					t.Fatal(err)
				}
				delete(model, k)
			}
		}
		lo, hi := rng.IntN(6), 6+rng.IntN(7)
		lower, upper := fmt.Sprintf("%sk%02d", prefix, lo), fmt.Sprintf("%sk%02d", prefix, hi)
		var keys []string
		for k := range model {
			if k >= lower && k < upper {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		it := mustIter(t, tx, cf, lower, upper)
		at := -1 // index into keys of the model's position; -1 or len(keys) when invalid
		var trail []string
		for range 25 {
			switch op := rng.IntN(5); op {
			case 0:
				it.First()
				at, trail = 0, append(trail, "First")
			case 1:
				it.Last()
				at, trail = len(keys)-1, append(trail, "Last")
			case 2:
				k := fmt.Sprintf("%sk%02d", prefix, rng.IntN(14))
				it.Seek([]byte(k))
				at, _ = slices.BinarySearch(keys, max(k, lower))
				trail = append(trail, "Seek("+k+")")
			case 3:
				if at >= 0 && at < len(keys) {
					at++
				}
				it.Next()
				trail = append(trail, "Next")
			case 4:
				if at >= 0 && at < len(keys) {
					at--
				}
				it.Prev()
				trail = append(trail, "Prev")
			}
			valid := at >= 0 && at < len(keys)
			if it.Valid() != valid || (valid && (string(it.Key()) != keys[at] || string(it.Value()) != model[keys[at]])) {
				t.Fatalf("round %d, keys %q in [%s, %s), after %v: iterator at %q (valid %v), model at %d", round, keys, lower, upper, trail, it.Key(), it.Valid(), at)
			}
			if !valid {
				at = -1 // Next and Prev stay invalid, as the iterator does
			}
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
		it.Close()
		tx.Discard()
	}
}
