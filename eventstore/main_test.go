package eventstore_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/pipeline"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// policies lists both validation policies; the store must behave the same under each.
var policies = []string{pipeline.Parallel, pipeline.Serial}

// deadline bounds every wait in these tests, so a bug fails a test instead of hanging it.
const deadline = 30 * time.Second

// ctx is the context of calls that are not about cancellation.
var ctx = context.Background()

// openStore opens a database in a fresh folder under t.TempDir, with its event store,
// and closes it at cleanup (Close is idempotent). It returns the folder too.
func openStore(t testing.TB, cfg pipeline.Config) (*pipeline.DB, *eventstore.Store, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "db")
	db, es := openStoreAt(t, dir, cfg)
	return db, es, dir
}

// openStoreAt opens (or reopens) the database in dir with its event store.
func openStoreAt(t testing.TB, dir string, cfg pipeline.Config) (*pipeline.DB, *eventstore.Store) {
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
	es, err := eventstore.New(db)
	if err != nil {
		t.Fatalf("eventstore.New: %v", err)
	}
	return db, es
}

// put commits key=value in cf in a transaction of its own.
func put(t testing.TB, db *pipeline.DB, cf *pipeline.ColumnFamily, key, value string) {
	t.Helper()
	if err := db.Update(ctx, func(tx *pipeline.Txn) error { return tx.Put(cf, []byte(key), []byte(value)) }); err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
}

// wait runs fn (which blocks until something happens) and fails the test if it does
// not return within the deadline.
func wait(t testing.TB, fn func(), what string) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		fn()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(deadline):
		t.Fatalf("%s did not finish within %v", what, deadline)
	}
}
