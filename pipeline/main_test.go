package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/rockline/rockline/pipeline"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// policies lists both validation policies; most behaviour must hold under each.
var policies = []string{pipeline.Parallel, pipeline.Serial}

// deadline bounds every wait in these tests, so a bug fails a test instead of hanging it.
const deadline = 30 * time.Second

// openDB opens a database in a fresh folder under t.TempDir and closes it at cleanup
// (Close is idempotent, so a test may close it first). It returns the folder too.
func openDB(t testing.TB, cfg pipeline.Config) (*pipeline.DB, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "db")
	return openAt(t, dir, cfg), dir
}

// openAt opens (or reopens) the database in dir and closes it at cleanup.
func openAt(t testing.TB, dir string, cfg pipeline.Config) *pipeline.DB {
	t.Helper()
	db, err := pipeline.Open(dir, cfg)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("Close at cleanup: %v", err)
		}
	})
	return db
}

// commitMode is one way of committing a transaction.
type commitMode string

const (
	viaCommit       commitMode = "Commit"
	viaCommitInline commitMode = "CommitInline"
)

var commitModes = []commitMode{viaCommit, viaCommitInline}

func (m commitMode) commit(tx *pipeline.Txn) error {
	if m == viaCommitInline {
		return tx.CommitInline()
	}
	return tx.Commit(context.Background())
}

// put commits key=value in cf in a transaction of its own and returns its position.
func put(t testing.TB, db *pipeline.DB, cf *pipeline.ColumnFamily, key, value string) uint64 {
	t.Helper()
	tx := db.Begin()
	if err := tx.Put(cf, []byte(key), []byte(value)); err != nil {
		t.Fatalf("Put(%q): %v", key, err)
	}
	pos, err := tx.CommitPosition(context.Background())
	if err != nil {
		t.Fatalf("commit of %q: %v", key, err)
	}
	return pos
}

// get reads key in cf in a fresh read-only transaction; ok is false for ErrNotFound.
func get(t testing.TB, db *pipeline.DB, cf *pipeline.ColumnFamily, key string) (value string, ok bool) {
	t.Helper()
	err := db.View(func(tx *pipeline.Txn) error {
		v, err := tx.Get(cf, []byte(key))
		if errors.Is(err, pipeline.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		value, ok = string(v), true
		return nil
	})
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	return value, ok
}

// mustGet reads key and fails the test when it is missing.
func mustGet(t testing.TB, db *pipeline.DB, cf *pipeline.ColumnFamily, key string) string {
	t.Helper()
	v, ok := get(t, db, cf, key)
	if !ok {
		t.Fatalf("key %q: not found", key)
	}
	return v
}

// mustAbsent fails the test when key exists.
func mustAbsent(t testing.TB, db *pipeline.DB, cf *pipeline.ColumnFamily, key string) {
	t.Helper()
	if v, ok := get(t, db, cf, key); ok {
		t.Fatalf("key %q = %q, want it absent", key, v)
	}
}

// recv waits for a value from ch or fails the test at the deadline.
func recv[V any](t testing.TB, ch <-chan V, what string) V {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(deadline):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// waitGroup waits for wg or fails the test at the deadline.
func wait(t testing.TB, wait func(), what string) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		wait()
		close(done)
	}()
	recv(t, done, what)
}

func key(format string, args ...any) []byte { return []byte(fmt.Sprintf(format, args...)) }

// wantArgumentError fails unless err is an *ArgumentError naming arg (and matching
// ErrInvalidArgument).
func wantArgumentError(t testing.TB, what string, err error, arg string) {
	t.Helper()
	var ae *pipeline.ArgumentError
	if !errors.As(err, &ae) {
		t.Errorf("%s: error %v, want an *ArgumentError for %s", what, err, arg)
		return
	}
	if ae.Arg != arg {
		t.Errorf("%s: ArgumentError names %q (%v), want %q", what, ae.Arg, err, arg)
	}
	if !errors.Is(err, pipeline.ErrInvalidArgument) {
		t.Errorf("%s: %v does not match ErrInvalidArgument", what, err)
	}
}
