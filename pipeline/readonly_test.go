package pipeline_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/pipeline"
)

// TestOpenReadOnly: a read-only open of a folder a writer holds reads what the writer
// had written (keys, the log, streams), refuses every write with ErrReadOnly, and
// changes nothing; the writer goes on undisturbed.
func TestOpenReadOnly(t *testing.T) {
	w, dir := openDB(t, pipeline.Config{})
	cf := dropCreate(t, w, "f")
	put(t, w, cf, "k", "v")
	wes := store(t, w)
	if _, err := wes.Append(ctx, "s", eventstore.NoStream, eventstore.Event{Type: "t"}); err != nil {
		t.Fatal(err)
	}
	ro, err := pipeline.OpenReadOnly(dir, pipeline.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if !ro.ReadOnly() || w.ReadOnly() {
		t.Errorf("ReadOnly() = %v (read-only open), %v (writer)", ro.ReadOnly(), w.ReadOnly())
	}
	rcf, err := ro.ColumnFamily("f")
	if err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, ro, rcf, "k"); got != "v" {
		t.Errorf("read-only Get = %q", got)
	}
	if diff := cmp.Diff(wholeLog(t, w), wholeLog(t, ro)); diff != "" {
		t.Errorf("log (-writer +read-only):\n%s", diff)
	}
	if diff := cmp.Diff(streamEvents(t, w, "s"), streamEvents(t, ro, "s")); diff != "" {
		t.Errorf("stream (-writer +read-only):\n%s", diff)
	}

	tx := ro.Begin()
	defer tx.Discard()
	writes := map[string]error{
		"Put":              tx.Put(rcf, []byte("k"), []byte("x")),
		"Delete":           tx.Delete(rcf, []byte("k")),
		"DeleteRange":      tx.DeleteRange(rcf, []byte("a"), []byte("z")),
		"AddEvents":        tx.AddEvents(pipeline.Event{Type: "t"}),
		"DropColumnFamily": ro.DropColumnFamily("f"),
		"TruncateLog":      ro.TruncateLog(1),
		"Replay":           ro.Replay(ctx, nil),
	}
	_, writes["CreateColumnFamily"] = ro.CreateColumnFamily("g")
	_, writes["Checkpoint"] = ro.Checkpoint(filepath.Join(t.TempDir(), "cp"))
	_, writes["Store.Append"] = store(t, ro).Append(ctx, "s", eventstore.Any, eventstore.Event{Type: "t"})
	for call, err := range writes {
		if !errors.Is(err, pipeline.ErrReadOnly) {
			t.Errorf("%s on a read-only database = %v, want ErrReadOnly", call, err)
		}
	}
	if err := ro.CatchUp(); !errors.Is(err, pipeline.ErrNotSecondary) {
		t.Errorf("CatchUp of a read-only open = %v, want ErrNotSecondary", err)
	}
	put(t, w, cf, "k", "v2") // the writer is not disturbed
	if got := mustGet(t, ro, rcf, "k"); got != "v" {
		t.Errorf("read-only Get after the writer moved on = %q, want the state at open", got)
	}
}

// TestOpenSecondary: a secondary follows its primary on CatchUp: LastPosition, reads,
// stream reads and a subscription on the secondary advance to what the primary wrote.
func TestOpenSecondary(t *testing.T) {
	w, dir := openDB(t, pipeline.Config{})
	cf := dropCreate(t, w, "f")
	put(t, w, cf, "k", "v1")
	wes := store(t, w) // its family exists before the secondary opens: later ones need a reopen
	sec, err := pipeline.OpenSecondary(dir, filepath.Join(t.TempDir(), "secondary"), pipeline.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer sec.Close()
	start := sec.LastPosition()
	if start != w.LastPosition() {
		t.Fatalf("secondary at %d, primary at %d", start, w.LastPosition())
	}
	seen := make(chan uint64, 16)
	sub, err := sec.Subscribe(ctx, start, func(e pipeline.LogEntry) error { seen <- e.Position; return nil })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()

	put(t, w, cf, "k", "v2")
	if _, err := wes.Append(ctx, "s", eventstore.NoStream, eventstore.Event{Type: "t"}); err != nil {
		t.Fatal(err)
	}
	scf, err := sec.ColumnFamily("f")
	if err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, sec, scf, "k"); got != "v1" || sec.LastPosition() != start {
		t.Errorf("before CatchUp: k = %q at %d, want v1 at %d", got, sec.LastPosition(), start)
	}
	if err := sec.CatchUp(); err != nil {
		t.Fatal(err)
	}
	if sec.LastPosition() != w.LastPosition() {
		t.Errorf("after CatchUp at %d, primary at %d", sec.LastPosition(), w.LastPosition())
	}
	if got := mustGet(t, sec, scf, "k"); got != "v2" {
		t.Errorf("after CatchUp k = %q, want v2", got)
	}
	for want := start + 1; want <= w.LastPosition(); want++ {
		if got := recv(t, seen, "the secondary's subscription"); got != want {
			t.Fatalf("subscription delivered %d, want %d", got, want)
		}
	}
	if evs := streamEvents(t, sec, "s"); len(evs) != 1 {
		t.Errorf("stream on the secondary after CatchUp: %d events, want 1", len(evs))
	}
	if err := sec.CatchUp(); err != nil { // nothing new: a no-op
		t.Fatal(err)
	}
	if _, err := pipeline.OpenSecondary(dir, "", pipeline.Config{}); err == nil {
		t.Error("OpenSecondary without a folder of its own succeeded")
	}
}

// TestSecondaryCheckpoint: a secondary takes an openable copy of a database its
// primary keeps writing to; the copy holds at least what the secondary saw, passes
// Verify, and the primary's checkpoint mark does not move (TruncateLog still refuses).
func TestSecondaryCheckpoint(t *testing.T) {
	w, dir := openDB(t, pipeline.Config{})
	cf := dropCreate(t, w, "f")
	for i := range 20 {
		put(t, w, cf, fmt.Sprint("k", i), "v")
	}
	sec, err := pipeline.OpenSecondary(dir, filepath.Join(t.TempDir(), "secondary"), pipeline.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer sec.Close()
	stop := make(chan struct{})
	wrote := make(chan error, 1)
	go func() { // the primary goes on writing while the copy is taken
		for i := 0; ; i++ {
			select {
			case <-stop:
				wrote <- nil
				return
			default:
			}
			if err := w.Update(ctx, func(tx *pipeline.Txn) error { return tx.Put(cf, []byte(fmt.Sprint("later", i)), []byte("v")) }); err != nil {
				wrote <- err
				return
			}
		}
	}()
	cp := filepath.Join(t.TempDir(), "cp")
	covered, err := sec.Checkpoint(cp)
	close(stop)
	if werr := <-wrote; werr != nil {
		t.Fatal(werr)
	}
	if err != nil {
		t.Fatalf("Checkpoint on a secondary: %v", err)
	}
	if covered < 21 {
		t.Errorf("secondary checkpoint covers %d, want at least the 21 positions it saw", covered)
	}
	if err := w.TruncateLog(2); !errors.Is(err, pipeline.ErrNotCheckpointed) {
		t.Errorf("TruncateLog after a secondary's checkpoint = %v, want ErrNotCheckpointed", err)
	}
	c, err := pipeline.Open(cp, pipeline.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if c.LastPosition() < covered {
		t.Errorf("copy at %d, want at least %d", c.LastPosition(), covered)
	}
	ccf, err := c.ColumnFamily("f")
	if err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, c, ccf, "k19"); got != "v" {
		t.Errorf("copy's k19 = %q", got)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	ro, err := pipeline.OpenReadOnly(cp, pipeline.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	r, err := ro.Verify(ctx, pipeline.VerifyOptions{ScratchDir: filepath.Join(t.TempDir(), "scratch")})
	if err != nil || !r.OK() || !r.StateChecked {
		t.Errorf("Verify of the copy = %+v, %v", r, err)
	}
}

// TestCompactRange: after a range delete, compacting the family leaves it no SST
// bytes; the data and the log are unchanged by the compaction itself; a read-only
// database refuses.
func TestCompactRange(t *testing.T) {
	db, dir := openDB(t, pipeline.Config{})
	cf := dropCreate(t, db, "f")
	tx := db.Begin()
	for i := range 500 {
		if err := tx.Put(cf, key("k%04d", i), make([]byte, 512)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	sst := func() uint64 {
		t.Helper()
		st, err := db.StorageStats()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range st.Families {
			if f.Name == "f" {
				return f.SSTBytes
			}
		}
		return 0
	}
	last := db.LastPosition()
	if err := db.CompactRange(cf, nil, nil); err != nil {
		t.Fatal(err)
	}
	if sst() == 0 || db.LastPosition() != last {
		t.Fatalf("after compacting: %d SST bytes at position %d (was %d)", sst(), db.LastPosition(), last)
	}
	del := db.Begin()
	if err := del.DeleteRange(cf, []byte("k"), []byte("l")); err != nil {
		t.Fatal(err)
	}
	if err := del.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := db.CompactRange(cf, nil, nil); err != nil {
		t.Fatal(err)
	}
	if n := sst(); n != 0 {
		t.Errorf("%d SST bytes after deleting every key and compacting, want 0", n)
	}
	ro, err := pipeline.OpenReadOnly(dir, pipeline.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	rcf, err := ro.ColumnFamily("f")
	if err != nil {
		t.Fatal(err)
	}
	if err := ro.CompactRange(rcf, nil, nil); !errors.Is(err, pipeline.ErrReadOnly) {
		t.Errorf("CompactRange on a read-only open = %v, want ErrReadOnly", err)
	}
	if err := ro.CompactAll(nil); !errors.Is(err, pipeline.ErrReadOnly) {
		t.Errorf("CompactAll on a read-only open = %v, want ErrReadOnly", err)
	}
}

// TestCompactAll: after a checkpoint and a truncation, compacting every family gives
// the log family's space back, and reports each family once.
func TestCompactAll(t *testing.T) {
	db, _ := openDB(t, pipeline.Config{})
	cf := dropCreate(t, db, "f")
	for i := range 200 {
		put(t, db, cf, fmt.Sprint("k", i), strings.Repeat("v", 512))
	}
	logBytes := func() uint64 {
		t.Helper()
		if err := db.CompactAll(nil); err != nil {
			t.Fatal(err)
		}
		st, err := db.StorageStats()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range st.Families {
			if f.Name == "rockline.log" {
				return f.SSTBytes
			}
		}
		t.Fatal("no rockline.log family in StorageStats")
		return 0
	}
	before := logBytes()
	covered, err := db.Checkpoint(filepath.Join(t.TempDir(), "cp"))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.TruncateLog(covered + 1); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	if err := db.CompactAll(func(name string, done, total int) { seen[name]++ }); err != nil {
		t.Fatal(err)
	}
	if after := logBytes(); before == 0 || after*4 > before {
		t.Errorf("log family SST bytes %d -> %d after truncating every entry and compacting", before, after)
	}
	for _, name := range []string{"default", "f", "rockline.log"} {
		if seen[name] != 1 {
			t.Errorf("CompactAll reported %s %d times, want once (%v)", name, seen[name], seen)
		}
	}
}
