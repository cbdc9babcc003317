package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/rockline/rockline/pipeline"
)

// TestTrueConflict: two transactions that both touch one key, begun before either
// commits; the second to commit fails with ErrConflict and writes nothing, whichever
// way it commits.
func TestTrueConflict(t *testing.T) {
	cases := []struct {
		name string
		read bool // read the key before writing it
	}{
		{"read-write", true},
		{"blind-write", false},
	}
	for _, pol := range policies {
		for _, mode := range commitModes {
			for _, tc := range cases {
				t.Run(fmt.Sprintf("%s/%s/%s", pol, mode, tc.name), func(t *testing.T) {
					db, _ := openDB(t, pipeline.Config{Validation: pol})
					cf := db.Default()
					put(t, db, cf, "k", "0")
					t1, t2 := db.Begin(), db.Begin()
					for i, tx := range []*pipeline.Txn{t1, t2} {
						if tc.read {
							if v, err := tx.Get(cf, []byte("k")); err != nil || string(v) != "0" {
								t.Fatalf("t%d: Get = %q, %v", i+1, v, err)
							}
						}
						if err := tx.Put(cf, []byte("k"), []byte(strconv.Itoa(i+1))); err != nil {
							t.Fatal(err)
						}
					}
					if err := t1.Commit(context.Background()); err != nil {
						t.Fatalf("first commit: %v", err)
					}
					if err := mode.commit(t2); !errors.Is(err, pipeline.ErrConflict) {
						t.Fatalf("second commit: %v, want ErrConflict", err)
					}
					if v := mustGet(t, db, cf, "k"); v != "1" {
						t.Errorf("k = %q, want the first commit's 1", v)
					}
					if got := db.LastPosition(); got != 2 {
						t.Errorf("LastPosition = %d, want 2", got)
					}
				})
			}
		}
	}
}

// TestNoConflictAcrossFamiliesAndDatabases increments the same key concurrently in two
// column families of one database, and in two databases, with the smallest bucket pool.
// Equal keys in different families or databases are different keys: no commit may
// conflict, and every increment must land.
func TestNoConflictAcrossFamiliesAndDatabases(t *testing.T) {
	const rounds = 20
	for _, pol := range policies {
		cfg := pipeline.Config{Validation: pol, Buckets: 16}
		t.Run(pol+"/families", func(t *testing.T) {
			db, _ := openDB(t, cfg)
			other, err := db.CreateColumnFamily("other")
			if err != nil {
				t.Fatal(err)
			}
			incrementConcurrently(t, rounds, []*pipeline.DB{db, db}, []*pipeline.ColumnFamily{db.Default(), other})
		})
		t.Run(pol+"/databases", func(t *testing.T) {
			db1, _ := openDB(t, cfg)
			db2, _ := openDB(t, cfg)
			incrementConcurrently(t, rounds, []*pipeline.DB{db1, db2}, []*pipeline.ColumnFamily{db1.Default(), db2.Default()})
		})
	}
}

// incrementConcurrently runs one goroutine per (dbs[i], cfs[i]) that increments key
// "k" rounds times, each transaction begun together with the others' (a barrier per
// round), alternating Commit and CommitInline, and fails on any error.
func incrementConcurrently(t *testing.T, rounds int, dbs []*pipeline.DB, cfs []*pipeline.ColumnFamily) {
	t.Helper()
	n := len(dbs)
	var begun, committed sync.WaitGroup
	errs := make(chan error, n*rounds)
	for r := range rounds {
		begun.Add(n)
		committed.Add(n)
		for i := range n {
			go func() {
				defer committed.Done()
				tx := dbs[i].Begin()
				begun.Done()
				count := 0
				v, err := tx.Get(cfs[i], []byte("k"))
				switch {
				case errors.Is(err, pipeline.ErrNotFound):
				case err != nil:
					errs <- err
					return
				default:
					count, _ = strconv.Atoi(string(v))
				}
				if err := tx.Put(cfs[i], []byte("k"), []byte(strconv.Itoa(count+1))); err != nil {
					errs <- err
					return
				}
				begun.Wait() // every transaction of this round has begun: they overlap
				if err := commitModes[(r+i)%2].commit(tx); err != nil {
					errs <- fmt.Errorf("round %d, writer %d: %w", r, i, err)
				}
			}()
		}
		wait(t, committed.Wait, "round")
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for i := range n {
		if v := mustGet(t, dbs[i], cfs[i], "k"); v != strconv.Itoa(rounds) {
			t.Errorf("writer %d: k = %s, want %d", i, v, rounds)
		}
	}
}

// TestLargeTransaction commits 1,024 keys in one transaction with 16 buckets (every
// bucket is taken many times over), by each commit path and policy.
func TestLargeTransaction(t *testing.T) {
	const n = 1024
	for _, pol := range policies {
		for _, mode := range commitModes {
			t.Run(fmt.Sprintf("%s/%s", pol, mode), func(t *testing.T) {
				db, _ := openDB(t, pipeline.Config{Validation: pol, Buckets: 16})
				cf := db.Default()
				tx := db.Begin()
				for i := range n {
					k := key("k%04d", i)
					if _, err := tx.Get(cf, k); !errors.Is(err, pipeline.ErrNotFound) {
						t.Fatalf("Get(%s) = %v, want ErrNotFound", k, err)
					}
					if err := tx.Put(cf, k, k); err != nil {
						t.Fatal(err)
					}
				}
				if tx.Len() != n {
					t.Fatalf("Len = %d, want %d", tx.Len(), n)
				}
				if err := mode.commit(tx); err != nil {
					t.Fatal(err)
				}
				if got := db.LastPosition(); got != 1 {
					t.Errorf("LastPosition = %d, want 1 (one commit)", got)
				}
				count := 0
				err := db.View(func(tx *pipeline.Txn) error {
					it, err := tx.NewIterator(cf, pipeline.IterOptions{})
					if err != nil {
						return err
					}
					defer it.Close()
					for it.First(); it.Valid(); it.Next() {
						if want := fmt.Sprintf("k%04d", count); string(it.Key()) != want || string(it.Value()) != want {
							return fmt.Errorf("entry %d: %s=%s, want %s", count, it.Key(), it.Value(), want)
						}
						count++
					}
					return it.Err()
				})
				if err != nil {
					t.Fatal(err)
				}
				if count != n {
					t.Errorf("%d keys readable, want %d", count, n)
				}
			})
		}
	}
}

// TestReadOnlyAndWriteSkew: a transaction that only read commits with nil at position
// 0 even when what it read changed (it wrote nothing, so it cannot break anything);
// a transaction that read A and wrote B fails when A changed under it (write skew).
func TestReadOnlyAndWriteSkew(t *testing.T) {
	for _, pol := range policies {
		for _, mode := range commitModes {
			t.Run(fmt.Sprintf("%s/%s", pol, mode), func(t *testing.T) {
				db, _ := openDB(t, pipeline.Config{Validation: pol})
				cf := db.Default()
				put(t, db, cf, "a", "1")
				put(t, db, cf, "b", "1")

				ro := db.Begin()
				if _, err := ro.Get(cf, []byte("a")); err != nil {
					t.Fatal(err)
				}
				put(t, db, cf, "a", "2")
				if mode == viaCommit {
					pos, err := ro.CommitPosition(context.Background())
					if err != nil || pos != 0 {
						t.Fatalf("read-only CommitPosition = %d, %v; want 0, nil", pos, err)
					}
				} else if err := ro.CommitInline(); err != nil {
					t.Fatalf("read-only CommitInline: %v", err)
				}
				if got := db.LastPosition(); got != 3 {
					t.Fatalf("LastPosition = %d, want 3: the read-only commit took a position", got)
				}

				t1 := db.Begin() // reads a, writes b
				if _, err := t1.Get(cf, []byte("a")); err != nil {
					t.Fatal(err)
				}
				if err := t1.Put(cf, []byte("b"), []byte("from-t1")); err != nil {
					t.Fatal(err)
				}
				t2 := db.Begin() // writes a, commits first
				if err := t2.Put(cf, []byte("a"), []byte("from-t2")); err != nil {
					t.Fatal(err)
				}
				if err := t2.Commit(context.Background()); err != nil {
					t.Fatal(err)
				}
				if err := mode.commit(t1); !errors.Is(err, pipeline.ErrConflict) {
					t.Fatalf("write-skew commit: %v, want ErrConflict", err)
				}
				if v := mustGet(t, db, cf, "b"); v != "1" {
					t.Errorf("b = %q, want 1: the conflicting commit wrote", v)
				}
				if v := mustGet(t, db, cf, "a"); v != "from-t2" {
					t.Errorf("a = %q, want from-t2", v)
				}
			})
		}
	}
}

// TestGetUntracked: a key read with GetUntracked may change under the transaction
// without failing it; the same read with Get fails it.
func TestGetUntracked(t *testing.T) {
	for _, pol := range policies {
		for _, tracked := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/tracked=%v", pol, tracked), func(t *testing.T) {
				db, _ := openDB(t, pipeline.Config{Validation: pol})
				cf := db.Default()
				put(t, db, cf, "k", "0")
				tx := db.Begin()
				var err error
				if tracked {
					_, err = tx.Get(cf, []byte("k"))
				} else {
					_, err = tx.GetUntracked(cf, []byte("k"))
				}
				if err != nil {
					t.Fatal(err)
				}
				if err := tx.Put(cf, []byte("out"), []byte("v")); err != nil {
					t.Fatal(err)
				}
				put(t, db, cf, "k", "1")
				err = tx.Commit(context.Background())
				if tracked && !errors.Is(err, pipeline.ErrConflict) {
					t.Fatalf("commit after a tracked read changed: %v, want ErrConflict", err)
				}
				if !tracked && err != nil {
					t.Fatalf("commit after an untracked read changed: %v, want nil", err)
				}
			})
		}
	}
}

// TestLongLivedTxn keeps transactions open across enough written keys for the conflict
// table to be pruned: an old transaction must still see the conflict it needs, and one
// whose reads are older than the pruned entries must not get a false conflict.
func TestLongLivedTxn(t *testing.T) {
	const bulk, bulkKeys = 6, 1024
	for _, pol := range policies {
		t.Run(pol, func(t *testing.T) {
			db, _ := openDB(t, pipeline.Config{Validation: pol})
			cf := db.Default()
			put(t, db, cf, "k", "0")
			old := db.Begin() // read position 1
			if _, err := old.Get(cf, []byte("k")); err != nil {
				t.Fatal(err)
			}
			if err := old.Put(cf, []byte("old"), []byte("v")); err != nil {
				t.Fatal(err)
			}
			put(t, db, cf, "k", "1") // position 2: conflicts with old
			young := db.Begin()      // read position 2: k is unchanged for it
			if _, err := young.Get(cf, []byte("k")); err != nil {
				t.Fatal(err)
			}
			if err := young.Put(cf, []byte("young"), []byte("v")); err != nil {
				t.Fatal(err)
			}
			for b := range bulk {
				tx := db.Begin()
				for i := range bulkKeys {
					if err := tx.Put(cf, key("bulk/%d/%04d", b, i), nil); err != nil {
						t.Fatal(err)
					}
				}
				if err := tx.Commit(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			if err := old.Commit(context.Background()); !errors.Is(err, pipeline.ErrConflict) {
				t.Fatalf("old transaction: %v, want ErrConflict", err)
			}
			// With old gone, the table may drop everything up to young's read position.
			for b := range bulk {
				tx := db.Begin()
				for i := range bulkKeys {
					if err := tx.Put(cf, key("bulk2/%d/%04d", b, i), nil); err != nil {
						t.Fatal(err)
					}
				}
				if err := tx.CommitInline(); err != nil {
					t.Fatal(err)
				}
			}
			if err := young.Commit(context.Background()); err != nil {
				t.Fatalf("young transaction: %v, want nil", err)
			}
			if want := uint64(2 + 2*bulk + 1); db.LastPosition() != want {
				t.Errorf("LastPosition = %d, want %d", db.LastPosition(), want)
			}
		})
	}
}
