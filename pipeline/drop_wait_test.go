package pipeline_test

import (
	"context"
	"sync"
	"testing"

	"github.com/rockline/rockline/pipeline"
)

// dropPosition returns the log position of the entry that dropped name.
func dropPosition(t testing.TB, db *pipeline.DB, name string) uint64 {
	t.Helper()
	for _, e := range dropCheckDense(t, db) {
		for _, f := range e.Families {
			if f.Family == name && f.Dropped {
				return e.Position
			}
		}
	}
	t.Fatalf("no log entry drops %q", name)
	return 0
}

// TestDropWaitsForItsWriteGroupOnly pins what DropColumnFamily waits for: its own log
// entry, behind the write group ahead of it. A commit held inside its Check does not
// hold up a drop under the parallel policy (the drop returns while the check is
// blocked, and its entry comes first); under the serial policy the leader validates a
// group, Checks included, before it assigns positions, so the drop's entry comes after
// the held commit's.
func TestDropWaitsForItsWriteGroupOnly(t *testing.T) {
	for _, pol := range policies {
		t.Run(pol, func(t *testing.T) {
			entered := make(chan struct{}, 1)
			release := make(chan struct{})
			var once sync.Once
			open := func() { once.Do(func() { close(release) }) }
			hold := func(_ context.Context, c pipeline.CommitInfo, _ pipeline.CheckView) error {
				for _, w := range c.Writes {
					if string(w.Key) == "held" {
						entered <- struct{}{}
						<-release
					}
				}
				return nil
			}
			db, _ := openDB(t, pipeline.Config{Validation: pol, Checks: []pipeline.Check{hold}})
			t.Cleanup(open) // runs before the database closes
			dropCreate(t, db, "victim")
			other := dropCreate(t, db, "other")

			type outcome struct {
				pos uint64
				err error
			}
			held := make(chan outcome, 1)
			go func() {
				tx := db.Begin()
				if err := tx.Put(other, []byte("held"), []byte("1")); err != nil {
					held <- outcome{err: err}
					return
				}
				pos, err := tx.CommitPosition(context.Background())
				held <- outcome{pos, err}
			}()
			recv(t, entered, "the held commit's Check")
			dropped := make(chan error, 1)
			go func() { dropped <- db.DropColumnFamily("victim") }()

			if pol == pipeline.Parallel {
				if err := recv(t, dropped, "DropColumnFamily while a commit's Check is held"); err != nil {
					t.Fatalf("DropColumnFamily: %v", err)
				}
				open()
			} else {
				open()
				if err := recv(t, dropped, "DropColumnFamily"); err != nil {
					t.Fatalf("DropColumnFamily: %v", err)
				}
			}
			h := recv(t, held, "the held commit")
			if h.err != nil {
				t.Fatalf("held commit: %v", h.err)
			}
			drop := dropPosition(t, db, "victim")
			if first := pol == pipeline.Parallel; (drop < h.pos) != first {
				t.Fatalf("%s: drop entry at %d, held commit at %d; want the drop first: %v", pol, drop, h.pos, first)
			}
		})
	}
}
