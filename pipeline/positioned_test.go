package pipeline_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rockline/rockline/pipeline"
)

var ctx = context.Background()

// appendPosition makes a positioned value: the position, big-endian, then the payload.
func appendPosition(dst []byte, pos uint64, payload []byte) []byte {
	return append(binary.BigEndian.AppendUint64(dst, pos), payload...)
}

// positionValue is appendPosition as a PositionedValue made by NewPositionedValue.
var positionValue = pipeline.NewPositionedValue("test.position", appendPosition)

// positionCodec is appendPosition as a PositionedValue of its own type.
type positionCodec struct{}

func (positionCodec) Name() string { return "test.position" }

func (positionCodec) Append(dst []byte, pos uint64, payload []byte) []byte {
	return appendPosition(dst, pos, payload)
}

var _ pipeline.PositionedValue = positionCodec{}

func TestNewPositionedValue(t *testing.T) {
	if got := positionValue.Name(); got != "test.position" {
		t.Errorf("Name = %q", got)
	}
	if got, want := positionValue.Append([]byte("x"), 7, []byte("p")), appendPosition([]byte("x"), 7, []byte("p")); string(got) != string(want) {
		t.Errorf("Append = %x, want %x", got, want)
	}
}

// TestPutAtCommit: a PutAtCommit write gets its commit's position, lands with the
// commit's other writes, is in the log entry after them, is invisible to the
// transaction's own reads, and alone still gets the commit a position.
func TestPutAtCommit(t *testing.T) {
	for _, mode := range commitModes {
		t.Run(string(mode), func(t *testing.T) {
			db, _ := openDB(t, pipeline.Config{})
			cf := dropCreate(t, db, "idx")
			put(t, db, db.Default(), "before", "x")

			tx := db.Begin()
			if err := tx.Put(cf, []byte("plain"), []byte("p")); err != nil {
				t.Fatal(err)
			}
			if err := tx.PutAtCommit(cf, []byte("at"), []byte("/payload"), positionValue); err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Get(cf, []byte("at")); !errors.Is(err, pipeline.ErrNotFound) {
				t.Errorf("own Get of a PutAtCommit key = %v, want ErrNotFound (its value is made at commit)", err)
			}
			if err := mode.commit(tx); err != nil {
				t.Fatal(err)
			}
			pos := db.LastPosition()
			want := string(appendPosition(nil, pos, []byte("/payload")))
			if got := mustGet(t, db, cf, "at"); got != want {
				t.Errorf("value = %x, want %x (position %d)", got, want, pos)
			}
			e, err := db.Entry(pos)
			if err != nil {
				t.Fatal(err)
			}
			wantWrites := []pipeline.LogWrite{
				{Family: "idx", Generation: 1, Key: []byte("plain"), Value: []byte("p")},
				{Family: "idx", Generation: 1, Key: []byte("at"), Value: []byte(want)},
			}
			if diff := cmp.Diff(wantWrites, e.Writes); diff != "" {
				t.Errorf("log entry writes (-want +got):\n%s", diff)
			}

			only := db.Begin()
			if err := only.PutAtCommit(cf, []byte("alone"), nil, positionCodec{}); err != nil {
				t.Fatal(err)
			}
			if err := mode.commit(only); err != nil {
				t.Fatal(err)
			}
			if got, want := mustGet(t, db, cf, "alone"), string(appendPosition(nil, pos+1, nil)); got != want {
				t.Errorf("a commit with only a PutAtCommit wrote %x, want %x at position %d", got, want, pos+1)
			}
		})
	}
}

// TestPutAtCommitConcurrent: commits racing through every lane and both policies each
// see their own position, so the writer queue fills positions per commit, not per group.
func TestPutAtCommitConcurrent(t *testing.T) {
	for _, pol := range policies {
		t.Run(pol, func(t *testing.T) {
			db, _ := openDB(t, pipeline.Config{Validation: pol, Lanes: 4})
			cf := dropCreate(t, db, "idx")
			const workers, each = 4, 50
			positions := racingCommits(t, db, workers, each, func(tx *pipeline.Txn, w, i int) error {
				return tx.PutAtCommit(cf, []byte(fmt.Sprintf("w%d/%d", w, i)), nil, positionValue)
			})
			for w := range workers {
				for i, pos := range positions[w] {
					got := mustGet(t, db, cf, fmt.Sprintf("w%d/%d", w, i))
					if want := string(appendPosition(nil, pos, nil)); got != want {
						t.Fatalf("worker %d commit %d at position %d wrote %x", w, i, pos, got)
					}
				}
			}
		})
	}
}

// TestPutAtCommitArguments: bad arguments are refused with an *ArgumentError and leave
// the transaction as it was; a dropped family is refused as by Put, at the call and,
// for a drop after it, at commit.
func TestPutAtCommitArguments(t *testing.T) {
	db, _ := openDB(t, pipeline.Config{})
	cf := dropCreate(t, db, "idx")
	tx := db.Begin()
	defer tx.Discard()
	wantArgumentError(t, "nil value", tx.PutAtCommit(cf, []byte("k"), nil, nil), "value")
	wantArgumentError(t, "nil function", tx.PutAtCommit(cf, []byte("k"), nil, pipeline.NewPositionedValue("x", nil)), "value")
	wantArgumentError(t, "empty key", tx.PutAtCommit(cf, nil, nil, positionValue), "key")
	wantArgumentError(t, "nil family", tx.PutAtCommit(nil, []byte("k"), nil, positionValue), "column family")
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("commit after refused calls: %v", err)
	}
	if got := db.LastPosition(); got != 1 { // the family's creation only
		t.Errorf("LastPosition = %d after refused calls, want 1", got)
	}

	late := db.Begin()
	if err := late.PutAtCommit(cf, []byte("k"), nil, positionValue); err != nil {
		t.Fatal(err)
	}
	if err := db.DropColumnFamily("idx"); err != nil {
		t.Fatal(err)
	}
	dropCheckDropped(t, late.Commit(ctx), "idx")
	after := db.Begin()
	defer after.Discard()
	dropCheckDropped(t, after.PutAtCommit(cf, []byte("k"), nil, positionValue), "idx")
}

// TestLayerFamily: a layer's family is created once, survives reopen, is hidden from
// the family calls of applications and cannot be dropped; names that are not a
// layer's are refused.
func TestLayerFamily(t *testing.T) {
	db, dir := openDB(t, pipeline.Config{})
	for _, name := range []string{"", "log", "system", "a#b"} {
		_, err := db.LayerFamily(name)
		wantArgumentError(t, fmt.Sprintf("LayerFamily(%q)", name), err, "name")
	}
	lf, err := db.LayerFamily("idx")
	if err != nil {
		t.Fatal(err)
	}
	if lf.Name() != "rockline.idx" {
		t.Errorf("Name() = %q, want rockline.idx", lf.Name())
	}
	pos := put(t, db, lf, "k", "v")
	if got := db.LastPosition(); got != pos || pos != 1 {
		t.Errorf("the layer family's creation took a log position: first commit at %d", pos)
	}
	if names, err := db.ColumnFamilies(); err != nil || len(names) != 1 {
		t.Errorf("ColumnFamilies = %q, %v; want only the default family", names, err)
	}
	if _, err := db.ColumnFamily("rockline.idx"); !errors.Is(err, pipeline.ErrColumnFamilyNotFound) {
		t.Errorf("ColumnFamily(rockline.idx) = %v, want ErrColumnFamilyNotFound", err)
	}
	wantArgumentError(t, "DropColumnFamily(rockline.idx)", db.DropColumnFamily("rockline.idx"), "name")
	again, err := db.LayerFamily("idx")
	if err != nil || mustGet(t, db, again, "k") != "v" {
		t.Fatalf("LayerFamily again: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := db.LayerFamily("idx"); !errors.Is(err, pipeline.ErrClosed) {
		t.Errorf("LayerFamily after Close = %v, want ErrClosed", err)
	}
	db = openAt(t, dir, pipeline.Config{})
	lf, err = db.LayerFamily("idx")
	if err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, db, lf, "k"); got != "v" {
		t.Errorf("after reopen k = %q, want v", got)
	}
}

// TestRebuildCreatesLayerFamily: Rebuild creates a layer's family at the first write
// the log routes to it, and reproduces its PutAtCommit records.
func TestRebuildCreatesLayerFamily(t *testing.T) {
	db, _ := openDB(t, pipeline.Config{})
	lf, err := db.LayerFamily("idx")
	if err != nil {
		t.Fatal(err)
	}
	put(t, db, db.Default(), "a", "1")
	tx := db.Begin()
	if err := tx.PutAtCommit(lf, []byte("at"), []byte("!"), positionValue); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	rebuilt, err := db.Rebuild(ctx, filepath.Join(t.TempDir(), "rebuilt"), pipeline.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer rebuilt.Close()
	rlf, err := rebuilt.LayerFamily("idx")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := mustGet(t, rebuilt, rlf, "at"), mustGet(t, db, lf, "at"); got != want {
		t.Errorf("rebuilt record %x, want %x", got, want)
	}
	if diff := cmp.Diff(wholeLog(t, db), wholeLog(t, rebuilt)); diff != "" {
		t.Errorf("log (-want +got):\n%s", diff)
	}
}

// TestWaitForPosition: a published position returns at once; a later one waits until
// it is published, ctx ends, or the database closes.
func TestWaitForPosition(t *testing.T) {
	db, _ := openDB(t, pipeline.Config{})
	pos := put(t, db, db.Default(), "k", "v")
	if err := db.WaitForPosition(ctx, pos); err != nil {
		t.Errorf("WaitForPosition(published) = %v", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := db.WaitForPosition(cancelled, pos+1); !errors.Is(err, cancelled.Err()) {
		t.Errorf("WaitForPosition(next, cancelled ctx) = %v, want %v", err, cancelled.Err())
	}

	waited := make(chan error, 1)
	go func() { waited <- db.WaitForPosition(ctx, pos+1) }()
	put(t, db, db.Default(), "k", "w")
	if err := recv(t, waited, "the wait for the next position"); err != nil {
		t.Errorf("WaitForPosition(next) after it was published = %v", err)
	}

	closing := make(chan error, 1)
	go func() { closing <- db.WaitForPosition(ctx, pos+100) }()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := recv(t, closing, "the wait ended by Close"); !errors.Is(err, pipeline.ErrClosed) {
		t.Errorf("WaitForPosition across Close = %v, want ErrClosed", err)
	}
}

// racingCommits runs workers goroutines that each commit each transactions, fn
// filling transaction i of worker w, and returns the positions each worker's commits
// got, in order; it fails t now if any did not commit.
func racingCommits(t *testing.T, db *pipeline.DB, workers, each int, fn func(tx *pipeline.Txn, w, i int) error) [][]uint64 {
	t.Helper()
	positions := make([][]uint64, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				tx := db.Begin()
				if err := fn(tx, w, i); err != nil {
					t.Error(err)
					tx.Discard()
					return
				}
				pos, err := tx.CommitPosition(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				positions[w] = append(positions[w], pos)
			}
		})
	}
	wait(t, wg.Wait, "the racing commits")
	if t.Failed() {
		t.FailNow()
	}
	return positions
}
