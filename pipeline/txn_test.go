package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/rockline/rockline/pipeline"
	"github.com/rockline/rockline/storage"
)

// txnCalls runs every Txn method once and returns each error by name.
func txnCalls(tx *pipeline.Txn, cf *pipeline.ColumnFamily) map[string]error {
	k := []byte("k")
	_, getErr := tx.Get(cf, k)
	_, untrackedErr := tx.GetUntracked(cf, k)
	it, iterErr := tx.NewIterator(cf, pipeline.IterOptions{})
	if it != nil {
		it.Close()
	}
	_, posErr := tx.CommitPosition(context.Background())
	return map[string]error{
		"Get":            getErr,
		"GetUntracked":   untrackedErr,
		"NewIterator":    iterErr,
		"Put":            tx.Put(cf, k, []byte("v")),
		"Delete":         tx.Delete(cf, k),
		"Commit":         tx.Commit(context.Background()),
		"CommitInline":   tx.CommitInline(),
		"CommitPosition": posErr,
	}
}

// TestTxnDone: after Commit (successful or not), CommitInline or Discard, every call
// returns ErrTxnDone; Discard stays safe.
func TestTxnDone(t *testing.T) {
	finish := map[string]func(t *testing.T, db *pipeline.DB, tx *pipeline.Txn){
		"Commit": func(t *testing.T, _ *pipeline.DB, tx *pipeline.Txn) {
			if err := tx.Commit(context.Background()); err != nil {
				t.Fatal(err)
			}
		},
		"CommitInline": func(t *testing.T, _ *pipeline.DB, tx *pipeline.Txn) {
			if err := tx.CommitInline(); err != nil {
				t.Fatal(err)
			}
		},
		"failed Commit": func(t *testing.T, db *pipeline.DB, tx *pipeline.Txn) {
			put(t, db, db.Default(), "k", "rival")
			if err := tx.Commit(context.Background()); !errors.Is(err, pipeline.ErrConflict) {
				t.Fatalf("commit: %v, want ErrConflict", err)
			}
		},
		"Discard": func(_ *testing.T, _ *pipeline.DB, tx *pipeline.Txn) { tx.Discard() },
	}
	for _, pol := range policies {
		for name, fin := range finish {
			t.Run(pol+"/"+name, func(t *testing.T) {
				db, _ := openDB(t, pipeline.Config{Validation: pol})
				cf := db.Default()
				tx := db.Begin()
				if err := tx.Put(cf, []byte("k"), []byte("v")); err != nil {
					t.Fatal(err)
				}
				fin(t, db, tx)
				for call, err := range txnCalls(tx, cf) {
					if !errors.Is(err, pipeline.ErrTxnDone) {
						t.Errorf("%s after %s: %v, want ErrTxnDone", call, name, err)
					}
				}
				tx.Discard()
				tx.Discard()
			})
		}
	}
}

// TestClosed: a transaction begun on a closed database, and one begun before Close,
// fail every call with ErrClosed; so do Update and the default family's handle.
func TestClosed(t *testing.T) {
	for _, pol := range policies {
		t.Run(pol, func(t *testing.T) {
			db, _ := openDB(t, pipeline.Config{Validation: pol})
			put(t, db, db.Default(), "k", "v")
			cf := db.Default()
			early := db.Begin()
			if err := early.Put(cf, []byte("k2"), []byte("v")); err != nil {
				t.Fatal(err)
			}
			early2 := db.Begin()
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Errorf("second Close: %v", err)
			}
			for call, err := range txnCalls(db.Begin(), cf) {
				if !errors.Is(err, pipeline.ErrClosed) {
					t.Errorf("%s on a transaction begun after Close: %v, want ErrClosed", call, err)
				}
			}
			if err := early.Commit(context.Background()); !errors.Is(err, pipeline.ErrClosed) {
				t.Errorf("Commit of a transaction begun before Close: %v, want ErrClosed", err)
			}
			if err := early2.CommitInline(); !errors.Is(err, pipeline.ErrClosed) {
				t.Errorf("CommitInline of an empty transaction begun before Close: %v", err)
			}
			if _, err := db.Begin().Get(db.Default(), []byte("k")); !errors.Is(err, pipeline.ErrClosed) {
				t.Errorf("Get through Default() after Close: %v, want ErrClosed", err)
			}
			err := db.Update(context.Background(), func(tx *pipeline.Txn) error {
				return tx.Put(cf, []byte("k3"), []byte("v"))
			})
			if !errors.Is(err, pipeline.ErrClosed) {
				t.Errorf("Update after Close: %v, want ErrClosed", err)
			}
		})
	}
}

// TestBadArguments: a bad family or key is an *ArgumentError matching
// ErrInvalidArgument (and its cause), changes nothing, and leaves the transaction and
// the database usable.
func TestBadArguments(t *testing.T) {
	db, _ := openDB(t, pipeline.Config{})
	other, _ := openDB(t, pipeline.Config{})
	cf := db.Default()
	big := make([]byte, storage.MaxKeySize+1)
	cases := []struct {
		name  string
		cf    *pipeline.ColumnFamily
		key   []byte
		arg   string
		cause error
	}{
		{"nil family", nil, []byte("k"), "column family", nil},
		{"zero family", &pipeline.ColumnFamily{}, []byte("k"), "column family", nil},
		{"family of another database", other.Default(), []byte("k"), "column family", storage.ErrForeignFamily},
		{"empty key", cf, []byte{}, "key", nil},
		{"nil key", cf, nil, "key", nil},
		{"key over 64 KiB", cf, big, "key", storage.ErrTooLarge},
	}
	tx := db.Begin()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, getErr := tx.Get(tc.cf, tc.key)
			_, untrackedErr := tx.GetUntracked(tc.cf, tc.key)
			errs := map[string]error{
				"Txn.Get":          getErr,
				"Txn.GetUntracked": untrackedErr,
				"Txn.Put":          tx.Put(tc.cf, tc.key, []byte("v")),
				"Txn.Delete":       tx.Delete(tc.cf, tc.key),
			}
			if tc.arg == "column family" {
				_, errs["Txn.NewIterator"] = tx.NewIterator(tc.cf, pipeline.IterOptions{})
			}
			for op, err := range errs {
				var ae *pipeline.ArgumentError
				if !errors.As(err, &ae) {
					t.Errorf("%s: %v (%T), want an *ArgumentError", op, err, err)
					continue
				}
				if !errors.Is(err, pipeline.ErrInvalidArgument) {
					t.Errorf("%s: %v does not match ErrInvalidArgument", op, err)
				}
				if ae.Op != op || ae.Arg != tc.arg || ae.Reason == "" {
					t.Errorf("%s: ArgumentError{Op: %q, Arg: %q, Reason: %q}, want Op %q, Arg %q", op, ae.Op, ae.Arg, ae.Reason, op, tc.arg)
				}
				if tc.cause != nil && !errors.Is(err, tc.cause) {
					t.Errorf("%s: %v does not match its cause %v", op, err, tc.cause)
				}
			}
		})
	}
	if tx.Len() != 0 {
		t.Fatalf("Len = %d after rejected writes, want 0", tx.Len())
	}
	if err := tx.Put(cf, []byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	if pos, err := tx.CommitPosition(context.Background()); err != nil || pos != 1 {
		t.Fatalf("commit after bad arguments: position %d, %v; want 1, nil", pos, err)
	}
	if v := mustGet(t, db, cf, "k"); v != "v" {
		t.Errorf("k = %q", v)
	}
	put(t, db, cf, "k2", "v")
	if db.LastPosition() != 2 {
		t.Errorf("LastPosition = %d, want 2", db.LastPosition())
	}

	// Family management arguments.
	famErrs := map[string]error{}
	_, famErrs["CreateColumnFamily(\"\")"] = db.CreateColumnFamily("")
	_, famErrs["CreateColumnFamily(reserved)"] = db.CreateColumnFamily("rockline.mine")
	_, famErrs["CreateColumnFamily(256 bytes)"] = db.CreateColumnFamily(strings.Repeat("x", 256))
	famErrs["DropColumnFamily(default)"] = db.DropColumnFamily("default")
	famErrs["DropColumnFamily(reserved)"] = db.DropColumnFamily("rockline.log")
	for call, err := range famErrs {
		if !errors.Is(err, pipeline.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", call, err)
		}
	}
	if _, err := db.ColumnFamily("rockline.log"); !errors.Is(err, pipeline.ErrColumnFamilyNotFound) {
		t.Errorf("ColumnFamily(rockline.log): %v, want ErrColumnFamilyNotFound", err)
	}
}

// TestCancelledContext: a commit whose context has already ended returns its error
// and writes nothing.
func TestCancelledContext(t *testing.T) {
	for _, pol := range policies {
		t.Run(pol, func(t *testing.T) {
			db, _ := openDB(t, pipeline.Config{Validation: pol})
			cf := db.Default()
			put(t, db, cf, "k", "old")
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			tx := db.Begin()
			if err := tx.Put(cf, []byte("k"), []byte("new")); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(ctx); !errors.Is(err, context.Canceled) {
				t.Fatalf("Commit: %v, want context.Canceled", err)
			}
			if err := tx.Commit(context.Background()); !errors.Is(err, pipeline.ErrTxnDone) {
				t.Errorf("Commit again: %v, want ErrTxnDone", err)
			}
			err := db.Update(ctx, func(tx *pipeline.Txn) error { return tx.Put(cf, []byte("k"), []byte("update")) })
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Update: %v, want context.Canceled", err)
			}
			if v := mustGet(t, db, cf, "k"); v != "old" {
				t.Errorf("k = %q, want old", v)
			}
			if got := db.LastPosition(); got != 1 {
				t.Errorf("LastPosition = %d, want 1", got)
			}
		})
	}
}

// TestReopen: data and log positions survive Close; positions continue.
func TestReopen(t *testing.T) {
	for _, pol := range policies {
		t.Run(pol, func(t *testing.T) {
			db, dir := openDB(t, pipeline.Config{Validation: pol})
			other, err := db.CreateColumnFamily("other")
			if err != nil {
				t.Fatal(err)
			}
			for i := 1; i <= 5; i++ {
				put(t, db, db.Default(), fmt.Sprintf("k%d", i), fmt.Sprint(i))
			}
			put(t, db, other, "o", "x")
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			for round := range 2 {
				db = openAt(t, dir, pipeline.Config{Validation: pol})
				want := uint64(7 + round) // the creation of "other", six puts, one per round
				if got := db.LastPosition(); got != want {
					t.Fatalf("reopen %d: LastPosition = %d, want %d", round, got, want)
				}
				for i := 1; i <= 5; i++ {
					if v := mustGet(t, db, db.Default(), fmt.Sprintf("k%d", i)); v != fmt.Sprint(i) {
						t.Errorf("k%d = %q", i, v)
					}
				}
				cf, err := db.ColumnFamily("other")
				if err != nil {
					t.Fatal(err)
				}
				if v := mustGet(t, db, cf, "o"); v != "x" {
					t.Errorf("o = %q", v)
				}
				if pos := put(t, db, db.Default(), fmt.Sprintf("r%d", round), "v"); pos != want+1 {
					t.Errorf("first commit after reopen %d: position %d, want %d", round, pos, want+1)
				}
				if err := db.Close(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestReadOwnWrites: Get sees the transaction's latest buffered write or delete of a
// key, for small transactions (linear lookup) and large ones (indexed lookup), and the
// snapshot for keys it did not write.
func TestReadOwnWrites(t *testing.T) {
	for _, n := range []int{3, 40} {
		t.Run(fmt.Sprintf("%d keys", n), func(t *testing.T) {
			db, _ := openDB(t, pipeline.Config{})
			cf := db.Default()
			put(t, db, cf, "base", "committed")
			tx := db.Begin()
			defer tx.Discard()
			for i := range n {
				if err := tx.Put(cf, key("k%02d", i), []byte("first")); err != nil {
					t.Fatal(err)
				}
			}
			if err := tx.Put(cf, []byte("k01"), []byte("second")); err != nil {
				t.Fatal(err)
			}
			if err := tx.Delete(cf, []byte("k02")); err != nil {
				t.Fatal(err)
			}
			if err := tx.Delete(cf, []byte("base")); err != nil {
				t.Fatal(err)
			}
			want := map[string]string{"k00": "first", "k01": "second", "k02": "", "base": ""}
			if n > 3 {
				want[fmt.Sprintf("k%02d", n-1)] = "first"
			}
			for k, w := range want {
				v, err := tx.Get(cf, []byte(k))
				if w == "" {
					if !errors.Is(err, pipeline.ErrNotFound) {
						t.Errorf("Get(%s) = %q, %v; want ErrNotFound (deleted in the transaction)", k, v, err)
					}
					continue
				}
				if err != nil || string(v) != w {
					t.Errorf("Get(%s) = %q, %v; want %q", k, v, err, w)
				}
			}
			if err := tx.Put(cf, []byte("k02"), []byte("again")); err != nil {
				t.Fatal(err)
			}
			if v, err := tx.Get(cf, []byte("k02")); err != nil || string(v) != "again" {
				t.Errorf("Get(k02) after re-put = %q, %v", v, err)
			}
			if _, ok := get(t, db, cf, "k00"); ok {
				t.Error("a buffered write is visible outside the transaction")
			}
		})
	}
}
