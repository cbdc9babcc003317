package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rockline/rockline/pipeline"
)

// conflictingFn returns an Update function that reads "k", writes "out", and then
// commits a write of "k" through a second transaction, so the Update's own commit
// conflicts, for as long as conflict(attempt) is true. attempts counts its calls.
func conflictingFn(t *testing.T, db *pipeline.DB, attempts *int, conflict func(attempt int) bool) func(*pipeline.Txn) error {
	cf := db.Default()
	return func(tx *pipeline.Txn) error {
		*attempts++
		if _, err := tx.Get(cf, []byte("k")); err != nil && !errors.Is(err, pipeline.ErrNotFound) {
			return err
		}
		if err := tx.Put(cf, []byte("out"), []byte(strconv.Itoa(*attempts))); err != nil {
			return err
		}
		if conflict(*attempts) {
			rival := db.Begin()
			if err := rival.Put(cf, []byte("k"), []byte(strconv.Itoa(*attempts))); err != nil {
				return err
			}
			if err := rival.Commit(context.Background()); err != nil {
				return fmt.Errorf("rival commit: %w", err)
			}
		}
		return nil
	}
}

func TestUpdate(t *testing.T) {
	for _, pol := range policies {
		t.Run(pol+"/gives up after MaxAttempts", func(t *testing.T) {
			db, _ := openDB(t, pipeline.Config{Validation: pol, MaxAttempts: 3, RetryBackoff: time.Microsecond})
			attempts := 0
			err := db.Update(context.Background(), conflictingFn(t, db, &attempts, func(int) bool { return true }))
			if !errors.Is(err, pipeline.ErrConflict) {
				t.Fatalf("Update = %v, want an error matching ErrConflict", err)
			}
			if attempts != 3 {
				t.Errorf("fn ran %d times, want MaxAttempts = 3", attempts)
			}
			mustAbsent(t, db, db.Default(), "out")
			if got := db.LastPosition(); got != 3 {
				t.Errorf("LastPosition = %d, want 3 (the rivals' commits only)", got)
			}
		})

		t.Run(pol+"/retries until it succeeds", func(t *testing.T) {
			db, _ := openDB(t, pipeline.Config{Validation: pol, MaxAttempts: 3, RetryBackoff: time.Microsecond})
			attempts := 0
			pos, err := db.UpdatePosition(context.Background(), conflictingFn(t, db, &attempts, func(a int) bool { return a < 3 }))
			if err != nil {
				t.Fatalf("Update: %v", err)
			}
			if attempts != 3 {
				t.Errorf("fn ran %d times, want 3", attempts)
			}
			if v := mustGet(t, db, db.Default(), "out"); v != "3" {
				t.Errorf("out = %q, want the third attempt's write", v)
			}
			if pos != 3 || db.LastPosition() != 3 {
				t.Errorf("position %d, LastPosition %d; want 3 after two rival commits", pos, db.LastPosition())
			}
		})

		t.Run(pol+"/fn error is returned as is", func(t *testing.T) {
			db, _ := openDB(t, pipeline.Config{Validation: pol})
			errBoom := errors.New("boom")
			attempts := 0
			err := db.Update(context.Background(), func(tx *pipeline.Txn) error {
				attempts++
				if err := tx.Put(db.Default(), []byte("k"), []byte("v")); err != nil {
					return err
				}
				return errBoom
			})
			if err != errBoom {
				t.Fatalf("Update = %v, want errBoom itself", err)
			}
			if attempts != 1 {
				t.Errorf("fn ran %d times, want 1", attempts)
			}
			mustAbsent(t, db, db.Default(), "k")
			if got := db.LastPosition(); got != 0 {
				t.Errorf("LastPosition = %d, want 0", got)
			}
		})

		t.Run(pol+"/ctx cancelled during backoff", func(t *testing.T) {
			// A Check cancels the Update's context and rejects the commit with a
			// conflict. Validation had begun, so the commit reports the conflict; Update
			// then backs off (at least 500ms with RetryBackoff=1s) and must return the
			// context's error instead of running fn again.
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			cancelAndConflict := func(_ context.Context, c pipeline.CommitInfo, _ pipeline.CheckView) error {
				for _, op := range c.Writes {
					if string(op.Key) == "trigger" {
						cancel()
						return fmt.Errorf("check: %w", pipeline.ErrConflict)
					}
				}
				return nil
			}
			db, _ := openDB(t, pipeline.Config{Validation: pol, RetryBackoff: time.Second, Checks: []pipeline.Check{cancelAndConflict}})
			attempts := 0
			start := time.Now()
			err := db.Update(ctx, func(tx *pipeline.Txn) error {
				attempts++
				return tx.Put(db.Default(), []byte("trigger"), []byte("v"))
			})
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("Update = %v, want context.Canceled", err)
			}
			if attempts != 1 {
				t.Errorf("fn ran %d times, want 1: Update retried after its context ended", attempts)
			}
			if d := time.Since(start); d >= 500*time.Millisecond {
				t.Errorf("Update took %v: it waited out the backoff instead of the context", d)
			}
			mustAbsent(t, db, db.Default(), "trigger")
		})

		t.Run(pol+"/nil fn", func(t *testing.T) {
			db, _ := openDB(t, pipeline.Config{Validation: pol})
			for name, err := range map[string]error{
				"Update": db.Update(context.Background(), nil),
				"View":   db.View(nil),
			} {
				var ae *pipeline.ArgumentError
				if !errors.As(err, &ae) || !errors.Is(err, pipeline.ErrInvalidArgument) {
					t.Errorf("%s(nil) = %v, want an *ArgumentError", name, err)
				}
			}
		})
	}
}

// TestView: writes buffered in a View are dropped.
func TestView(t *testing.T) {
	db, _ := openDB(t, pipeline.Config{})
	err := db.View(func(tx *pipeline.Txn) error { return tx.Put(db.Default(), []byte("k"), []byte("v")) })
	if err != nil {
		t.Fatal(err)
	}
	mustAbsent(t, db, db.Default(), "k")
	if db.LastPosition() != 0 {
		t.Errorf("LastPosition = %d after a View", db.LastPosition())
	}
}

var errOverLimit = errors.New("counter over limit")

// TestChecks: a Check that reads the limit from its View rejects an increment past it
// with its own error, returned unchanged by every commit path, and nothing is written.
func TestChecks(t *testing.T) {
	for _, pol := range policies {
		for _, mode := range commitModes {
			t.Run(fmt.Sprintf("%s/%s", pol, mode), func(t *testing.T) {
				var calls atomic.Int64
				limit := func(_ context.Context, c pipeline.CommitInfo, v pipeline.CheckView) error {
					calls.Add(1)
					for _, op := range c.Writes {
						if string(op.Key) != "counter" {
							continue
						}
						raw, err := v.Get(op.Family, []byte("limit"))
						if err != nil {
							return fmt.Errorf("read limit: %w", err)
						}
						max, _ := strconv.Atoi(string(raw))
						if n, _ := strconv.Atoi(string(op.Value)); n > max {
							return errOverLimit
						}
					}
					return nil
				}
				db, _ := openDB(t, pipeline.Config{Validation: pol, Checks: []pipeline.Check{limit}})
				cf := db.Default()
				put(t, db, cf, "limit", "3")
				for n := 1; n <= 4; n++ {
					tx := db.Begin()
					if err := tx.Put(cf, []byte("counter"), []byte(strconv.Itoa(n))); err != nil {
						t.Fatal(err)
					}
					if err := tx.Put(cf, []byte("side"), []byte(strconv.Itoa(n))); err != nil {
						t.Fatal(err)
					}
					before := db.LastPosition()
					err := mode.commit(tx)
					switch {
					case n <= 3 && err != nil:
						t.Fatalf("increment to %d: %v", n, err)
					case n > 3:
						if err != errOverLimit {
							t.Fatalf("increment to %d: %v, want errOverLimit itself", n, err)
						}
						if got := db.LastPosition(); got != before {
							t.Errorf("LastPosition %d -> %d after a rejected commit", before, got)
						}
					}
				}
				if v := mustGet(t, db, cf, "counter"); v != "3" {
					t.Errorf("counter = %s, want 3", v)
				}
				if v := mustGet(t, db, cf, "side"); v != "3" {
					t.Errorf("side = %s, want 3: the rejected commit wrote part of itself", v)
				}
				if calls.Load() != 5 {
					t.Errorf("check ran %d times, want 5 (once per commit)", calls.Load())
				}
			})
		}
	}
}

// TestCheckReadsAnyFamily: a Check's view reads a family the commit does not write
// (here the limit lives in its own family), and its facts name the written family.
func TestCheckReadsAnyFamily(t *testing.T) {
	for _, pol := range policies {
		t.Run(pol, func(t *testing.T) {
			var limits *pipeline.ColumnFamily
			check := func(_ context.Context, c pipeline.CommitInfo, v pipeline.CheckView) error {
				raw, err := v.Get(limits, []byte("max"))
				if errors.Is(err, pipeline.ErrNotFound) {
					return nil // no limit set yet
				}
				if err != nil {
					return fmt.Errorf("read the limit: %w", err)
				}
				max, _ := strconv.Atoi(string(raw))
				for _, w := range c.Writes {
					if n, _ := strconv.Atoi(string(w.Value)); w.Family.Name() == "counters" && n > max {
						return errOverLimit
					}
				}
				return nil
			}
			db, _ := openDB(t, pipeline.Config{Validation: pol, Checks: []pipeline.Check{check}})
			limits = dropCreate(t, db, "limits")
			counters := dropCreate(t, db, "counters")
			put(t, db, limits, "max", "5")
			put(t, db, counters, "n", "5")
			tx := db.Begin()
			if err := tx.Put(counters, []byte("n"), []byte("6")); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(context.Background()); err != errOverLimit {
				t.Fatalf("commit past the limit in another family: %v, want errOverLimit", err)
			}
			if got := mustGet(t, db, counters, "n"); got != "5" {
				t.Fatalf("n = %s after the rejected commit", got)
			}
		})
	}
}
