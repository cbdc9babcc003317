package pipeline

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestEveryWriterCompletesInOrder runs every kind of writer at once (laned commits,
// inline commits, family creations and drops with their log records, a checkpoint)
// and then a Rebuild, which replays. The sequencer stops on any assignment that
// would complete out of order, so this shows the in-order premise it is built on
// holds on every path: nothing stops, and the log is exactly the positions handed out.
//
// With Sync, the writers' fsyncs are pipelined (the sequencer publishes after them):
// the order must hold there too, with checkpoints quiescing over syncs in flight.
func TestEveryWriterCompletesInOrder(t *testing.T) {
	for _, v := range []struct {
		pol  string
		sync bool
	}{{Parallel, false}, {Serial, false}, {Parallel, true}, {Serial, true}} {
		pol := v.pol
		name := pol
		if v.sync {
			name += "/sync"
		}
		t.Run(name, func(t *testing.T) {
			db, err := Open(filepath.Join(t.TempDir(), "db"), Config{Validation: pol, Lanes: 2, Sync: v.sync})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			var positions atomic.Uint64 // positions the writers were handed (commits and family records)
			var wg sync.WaitGroup
			errs := make(chan error, 16)
			commits := func(inline bool, tag string) {
				for i := range 40 {
					tx := db.Begin()
					if err := tx.Put(db.Default(), fmt.Appendf(nil, "%s/%d", tag, i), []byte("v")); err != nil {
						errs <- err
						return
					}
					var err error
					if inline {
						err = tx.CommitInline()
					} else {
						err = tx.Commit(context.Background())
					}
					if err != nil {
						errs <- fmt.Errorf("%s commit %d: %w", tag, i, err)
						return
					}
					positions.Add(1)
				}
			}
			wg.Go(func() { commits(false, "lane-a") })
			wg.Go(func() { commits(false, "lane-b") })
			wg.Go(func() { commits(true, "inline") })
			wg.Go(func() {
				for i := range 4 {
					name := fmt.Sprintf("churn-%d", i)
					if _, err := db.CreateColumnFamily(name); err != nil {
						errs <- err
						return
					}
					positions.Add(1)
					if err := db.DropColumnFamily(name); err != nil {
						errs <- err
						return
					}
					positions.Add(1)
				}
			})
			cpDir := filepath.Join(t.TempDir(), "cp")
			var covered uint64
			wg.Go(func() {
				var err error
				if covered, err = db.Checkpoint(cpDir); err != nil {
					errs <- err
				}
			})
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(60 * time.Second):
				t.Fatal("writers did not finish")
			}
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			if err := db.local().seq.Err(); err != nil {
				t.Fatalf("the sequencer stopped: %v", err)
			}
			if got, want := db.LastPosition(), positions.Load(); got != want {
				t.Fatalf("LastPosition = %d; want %d, the positions handed out", got, want)
			}

			cp, err := Open(cpDir, Config{Validation: pol, Sync: v.sync})
			if err != nil {
				t.Fatal(err)
			}
			if got := cp.LastPosition(); got != covered {
				t.Errorf("the checkpoint's log ends at %d; Checkpoint said it covers %d", got, covered)
			}
			cp.Close()

			re, err := db.Rebuild(context.Background(), filepath.Join(t.TempDir(), "rebuilt"), Config{Validation: pol, Sync: v.sync})
			if err != nil {
				t.Fatal(err)
			}
			defer re.Close()
			if got, want := re.LastPosition(), db.LastPosition(); got != want || re.local().seq.Err() != nil {
				t.Fatalf("rebuilt LastPosition = %d, sequencer error %v; want %d, nil", got, re.local().seq.Err(), want)
			}
			if err := errors.Join(db.Close(), re.Close()); err != nil {
				t.Fatal(err)
			}
		})
	}
}
