package pipeline_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/pipeline"
)

// readmeUsage is the README's usage example, verbatim between the markers (a test
// checks that they agree).
func readmeUsage(ctx context.Context, dir string) (eventstore.AppendResult, error) {
	// README begin
	db, err := pipeline.Open(dir, pipeline.Config{}) // 2-4 lanes, parallel validation
	if err != nil {
		return eventstore.AppendResult{}, err
	}
	defer db.Close()
	accounts, err := db.EnsureColumnFamily("accounts") // open it, or create it on the first run
	if err != nil {
		return eventstore.AppendResult{}, err
	}
	// Update re-runs the function on ErrConflict, with jittered backoff.
	err = db.Update(ctx, func(tx *pipeline.Txn) error {
		v, err := tx.Get(accounts, []byte("alice")) // tracked: a concurrent write fails the commit
		if errors.Is(err, pipeline.ErrNotFound) {
			v = []byte("0")
		} else if err != nil {
			return err
		}
		n, _ := strconv.Atoi(string(v))
		return tx.Put(accounts, []byte("alice"), []byte(strconv.Itoa(n+1)))
	})
	if err != nil {
		return eventstore.AppendResult{}, err
	}
	// Streams: the event store, a layer over the same transactions and log.
	store, err := eventstore.New(db)
	if err != nil {
		return eventstore.AppendResult{}, err
	}
	res, err := store.Append(ctx, "order-42", eventstore.NoStream, eventstore.Event{ID: "e1", Type: "placed"})
	// README end
	return res, err
}

// TestReadmeUsageRunsTwice: the README's example works on a new folder and again on
// the same one (the family is opened, the append is an idempotent retry).
func TestReadmeUsageRunsTwice(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	for run := range 2 {
		res, err := readmeUsage(context.Background(), dir)
		if err != nil {
			t.Fatalf("run %d: %v", run+1, err)
		}
		if res.NextExpectedRevision != 0 {
			t.Fatalf("run %d: NextExpectedRevision %d, want 0 (the one event)", run+1, res.NextExpectedRevision)
		}
	}
	db := openAt(t, dir, pipeline.Config{})
	accounts, err := db.ColumnFamily("accounts")
	if err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, db, accounts, "alice"); got != "2" {
		t.Fatalf("alice = %q after two runs, want 2", got)
	}
}

// TestReadmeUsageMatches: readmeUsage holds what the README shows, line for line
// (the README's return statements return err alone).
func TestReadmeUsageMatches(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(readme), "## Usage\n\n```go\n")
	if !ok {
		t.Fatal("README has no Go block under ## Usage")
	}
	block, _, _ = strings.Cut(block, "```")
	src, err := os.ReadFile("readme_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, body, _ := strings.Cut(string(src), "// README begin\n")
	body, _, _ = strings.Cut(body, "\t// README end")
	norm := func(s string) []string {
		var out []string
		for _, l := range strings.Split(s, "\n") {
			l = strings.TrimSpace(strings.ReplaceAll(l, "eventstore.AppendResult{}, ", ""))
			if l != "" {
				out = append(out, l)
			}
		}
		return out
	}
	want, got := norm(block), norm(body)
	if strings.Join(want, "\n") != strings.Join(got, "\n") {
		t.Fatalf("README usage and readmeUsage differ:\nREADME:\n%s\n\ntest:\n%s", strings.Join(want, "\n"), strings.Join(got, "\n"))
	}
}
