package pipeline

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rockline/rockline/internal/logentry"
	"github.com/rockline/rockline/storage"
)

// TestVerify: Verify passes a database written through the pipeline (writes, events,
// a dropped and re-created family) and finds each kind of damage done behind the
// pipeline's back: a corrupt log entry, a key no log entry wrote, a changed value.
func TestVerify(t *testing.T) {
	cases := []struct {
		name   string
		damage func(t *testing.T, db *DB)
		check  func(t *testing.T, r VerifyReport)
	}{
		{"intact", func(*testing.T, *DB) {}, func(t *testing.T, r VerifyReport) {
			if !r.OK() || !r.StateChecked || r.Entries != r.LastPosition || r.KeysCompared == 0 {
				t.Errorf("report %+v, want OK with the state checked and every entry read", r)
			}
		}},
		{"corrupt entry", func(t *testing.T, db *DB) {
			rawPut(t, db, db.local().log, logentry.Key(3), []byte("not an entry"))
		}, func(t *testing.T, r VerifyReport) {
			if r.CorruptEntries != 1 || r.Entries != r.LastPosition-1 || r.StateChecked || !strings.Contains(r.StateSkipped, "corrupt") ||
				len(r.Problems) != 1 || !strings.Contains(r.Problems[0], "position 3") {
				t.Errorf("report %+v, want entry 3 alone reported corrupt and the state check skipped", r)
			}
		}},
		{"key the log never wrote", func(t *testing.T, db *DB) {
			f, err := db.local().store.Family("accounts")
			if err != nil {
				t.Fatal(err)
			}
			rawPut(t, db, f, []byte("mallory"), []byte("1000"))
		}, func(t *testing.T, r VerifyReport) {
			if r.StateDifferences != 1 || len(r.Problems) != 1 || !strings.Contains(r.Problems[0], `"mallory": in the database, not in the replay`) {
				t.Errorf("report %+v, want the one key outside the log", r)
			}
		}},
		{"changed value", func(t *testing.T, db *DB) {
			f, err := db.local().store.Family("accounts")
			if err != nil {
				t.Fatal(err)
			}
			rawPut(t, db, f, []byte("alice"), []byte("999"))
		}, func(t *testing.T, r VerifyReport) {
			if r.StateDifferences != 1 || len(r.Problems) != 1 || !strings.Contains(r.Problems[0], `"alice": value differs`) {
				t.Errorf("report %+v, want alice's value reported", r)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			dir := filepath.Join(t.TempDir(), "db")
			db, err := Open(dir, Config{})
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{"accounts", "scratch"} {
				if _, err := db.CreateColumnFamily(name); err != nil {
					t.Fatal(err)
				}
			}
			if err := db.DropColumnFamily("scratch"); err != nil {
				t.Fatal(err)
			}
			if _, err := db.CreateColumnFamily("scratch"); err != nil {
				t.Fatal(err)
			}
			accounts, _ := db.ColumnFamily("accounts")
			for i, kv := range [][2]string{{"alice", "10"}, {"bob", "20"}, {"alice", "15"}} {
				if err := db.Update(ctx, func(tx *Txn) error {
					return errors.Join(tx.Put(accounts, []byte(kv[0]), []byte(kv[1])), tx.AddEvents(Event{Type: "set", ID: kv[0] + string(rune('0'+i))}))
				}); err != nil {
					t.Fatal(err)
				}
			}
			tc.damage(t, db)
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			ro, err := OpenReadOnly(dir, Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer ro.Close()
			var stages []string
			r, err := ro.Verify(ctx, VerifyOptions{ScratchDir: filepath.Join(t.TempDir(), "scratch"), Progress: func(stage string, done, total uint64) {
				if done > total {
					t.Errorf("progress %s %d of %d", stage, done, total)
				}
				if len(stages) == 0 || stages[len(stages)-1] != stage {
					stages = append(stages, stage)
				}
			}})
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if len(stages) == 0 || stages[0] != "log" {
				t.Errorf("progress stages %v, want log first", stages)
			}
			tc.check(t, r)
		})
	}
}

// TestVerifyRefuses: Verify runs only where nothing changes meanwhile, with a scratch
// folder that does not exist, and skips the state check of a truncated log.
func TestVerifyRefuses(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "db")
	db, err := Open(dir, Config{})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := db.Update(ctx, func(tx *Txn) error { return tx.AddEvents(Event{Type: "t"}) }); err != nil {
			t.Fatal(err)
		}
	}
	var ae *ArgumentError
	if _, err := db.Verify(ctx, VerifyOptions{}); !errors.As(err, &ae) || ae.Arg != "db" {
		t.Errorf("Verify on a writable database = %v, want an *ArgumentError for db", err)
	}
	if _, err := db.Checkpoint(filepath.Join(t.TempDir(), "cp")); err != nil {
		t.Fatal(err)
	}
	if err := db.TruncateLog(3); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	ro, err := OpenReadOnly(dir, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if _, err := ro.Verify(ctx, VerifyOptions{ScratchDir: dir}); !errors.As(err, &ae) || ae.Arg != "ScratchDir" {
		t.Errorf("Verify into an existing folder = %v, want an *ArgumentError for ScratchDir", err)
	}
	r, err := ro.Verify(ctx, VerifyOptions{ScratchDir: filepath.Join(t.TempDir(), "scratch")})
	if err != nil || !r.OK() || r.StateChecked || !strings.Contains(r.StateSkipped, "truncated below 3") || r.Entries != 1 {
		t.Errorf("Verify of a truncated log = %+v, %v; want OK, one entry, the state check skipped", r, err)
	}
}

// rawPut writes key=value into f behind the pipeline's back (no log entry).
func rawPut(t *testing.T, db *DB, f *storage.Family, key, value []byte) {
	t.Helper()
	b := storage.NewBatch()
	if err := b.Put(f, key, value); err != nil {
		t.Fatal(err)
	}
	if err := db.local().store.Write(b); err != nil {
		t.Fatal(err)
	}
}
