package pipeline_test

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rockline/rockline/pipeline"
)

// positionKey makes a key at commit: the payload, then the position big-endian.
var positionKey = pipeline.NewPositionedValue("test.key", func(dst []byte, pos uint64, payload []byte) []byte {
	return appendPosition(append(dst, payload...), pos, nil)
})

// TestPutKeyAtCommit: a key made at commit holds its commit's position, lands with the
// commit's other writes and in its log entry, fails no racing commit, and a Rebuild
// from the log reproduces it.
func TestPutKeyAtCommit(t *testing.T) {
	for _, pol := range policies {
		t.Run(pol, func(t *testing.T) {
			db, _ := openDB(t, pipeline.Config{Validation: pol, Lanes: 4})
			cf := dropCreate(t, db, "idx")
			const workers, each = 4, 40
			// Every commit makes a key from the same payload "x/": were keys made at
			// commit checked for conflicts, these would conflict by the payload alone.
			positions := racingCommits(t, db, workers, each, func(tx *pipeline.Txn, w, i int) error {
				return tx.PutKeyAtCommit(cf, positionKey, []byte("x/"), []byte(fmt.Sprintf("w%d/%d", w, i)))
			})
			check := func(db *pipeline.DB, cf *pipeline.ColumnFamily) {
				t.Helper()
				for w := range workers {
					for i, pos := range positions[w] {
						k := appendPosition([]byte("x/"), pos, nil)
						if got, want := mustGet(t, db, cf, string(k)), fmt.Sprintf("w%d/%d", w, i); got != want {
							t.Fatalf("key made at position %d holds %q, want %q", pos, got, want)
						}
					}
				}
			}
			check(db, cf)
			pos := positions[0][0]
			e, err := db.Entry(pos)
			if err != nil {
				t.Fatal(err)
			}
			want := []pipeline.LogWrite{{Family: "idx", Generation: 1, Key: appendPosition([]byte("x/"), pos, nil), Value: []byte("w0/0")}}
			if diff := cmp.Diff(want, e.Writes); diff != "" {
				t.Errorf("log entry %d writes (-want +got):\n%s", pos, diff)
			}
			rebuilt, err := db.Rebuild(ctx, filepath.Join(t.TempDir(), "rebuilt"), pipeline.Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer rebuilt.Close()
			rcf, err := rebuilt.ColumnFamily("idx")
			if err != nil {
				t.Fatal(err)
			}
			check(rebuilt, rcf)
		})
	}
}

// TestPutKeyAtCommitArguments: bad arguments are refused with an *ArgumentError and
// leave the transaction as it was; a codec that makes an empty key fails the commit
// with one, writing nothing.
func TestPutKeyAtCommitArguments(t *testing.T) {
	db, _ := openDB(t, pipeline.Config{})
	cf := dropCreate(t, db, "idx")
	tx := db.Begin()
	defer tx.Discard()
	wantArgumentError(t, "nil codec", tx.PutKeyAtCommit(cf, nil, []byte("k"), nil), "key")
	wantArgumentError(t, "nil function", tx.PutKeyAtCommit(cf, pipeline.NewPositionedValue("x", nil), []byte("k"), nil), "key")
	wantArgumentError(t, "nil family", tx.PutKeyAtCommit(nil, positionKey, []byte("k"), nil), "column family")
	wantArgumentError(t, "long payload", tx.PutKeyAtCommit(cf, positionKey, make([]byte, pipeline.MaxKeySize+1), nil), "payload")
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("commit after refused calls: %v", err)
	}
	last := db.LastPosition()

	empty := pipeline.NewPositionedValue("test.empty", func(dst []byte, _ uint64, _ []byte) []byte { return dst })
	bad := db.Begin()
	if err := bad.Put(cf, []byte("beside"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := bad.PutKeyAtCommit(cf, empty, []byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	var ae *pipeline.ArgumentError
	if err := bad.Commit(ctx); !errors.As(err, &ae) || ae.Arg != "key" {
		t.Fatalf("commit of an empty key made at commit = %v, want an *ArgumentError naming key", err)
	}
	if _, err := getErr(db, cf, "beside"); !errors.Is(err, pipeline.ErrNotFound) {
		t.Errorf("the failed commit's Put: %v, want ErrNotFound (nothing written)", err)
	}
	// A failed commit may have taken a position the log fills with an empty entry;
	// none of it holds the refused write.
	for p := last + 1; p <= db.LastPosition(); p++ {
		e, err := db.Entry(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range e.Writes {
			if bytes.Equal(w.Key, []byte("beside")) {
				t.Errorf("log entry %d holds the failed commit's write", p)
			}
		}
	}
}

// getErr reads key of cf in a read-only transaction.
func getErr(db *pipeline.DB, cf *pipeline.ColumnFamily, key string) ([]byte, error) {
	var v []byte
	err := db.View(func(tx *pipeline.Txn) error {
		var err error
		v, err = tx.Get(cf, []byte(key))
		return err
	})
	return v, err
}
