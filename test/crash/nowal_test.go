package crash

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/rockline/rockline/pipeline"
	"github.com/rockline/rockline/storage"
)

// blobsFamily has a small memtable, so it flushes long before rockline's log family
// (whose memtable is RocksDB's default 64 MiB) does.
const blobsFamily = "blobs"

func noWALFlushConfig() pipeline.Config {
	return pipeline.Config{
		DisableWAL: true,
		Families:   map[string]storage.FamilyOptions{blobsFamily: {WriteBufferSize: storage.MinWriteBufferSize}},
	}
}

// TestCrashNoWALFlush kills a process that runs with the WAL off right after a family
// with a 1 MiB memtable flushed on its own, while the log family's memtable had not:
// Config.DisableWAL promises that a kill may lose acknowledged commits but that data
// and log still agree after reopen. That holds only if RocksDB flushes the families
// together (atomic flush); otherwise the flushed data outlives the log entries that
// describe it.
func TestCrashNoWALFlush(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("in the child process")
	}
	dir := filepath.Join(t.TempDir(), "db")
	db, err := pipeline.Open(dir, noWALFlushConfig())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1", "-test.timeout=3m")
	cmd.Env = append(os.Environ(), childEnv+"="+dir, childModeEnv+"=flush")
	res := runAndKill(t, cmd, killPlan{onKind: "flushed"})
	if len(res.acks) == 0 || res.acks[len(res.acks)-1].Kind != "flushed" {
		t.Fatalf("child was killed %s before it reported a flush (%d lines)", res.trigger, len(res.acks))
	}

	db, err = pipeline.Open(dir, noWALFlushConfig())
	if err != nil {
		t.Fatalf("reopen after kill: %v", err)
	}
	defer db.Close()
	log, err := readLog(db)
	if err != nil {
		t.Fatal(err)
	}
	blobs, err := db.ColumnFamily(blobsFamily)
	if err != nil {
		t.Fatal(err)
	}
	kept, err := dumpFamily(db, blobs)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d commits acknowledged before the kill; after reopen the log holds %d entries and %s %d keys", res.commits(), len(log), blobsFamily, len(kept))
	if err := checkReplay(context.Background(), db, filepath.Join(t.TempDir(), "rebuild"), nil); err != nil {
		t.Fatalf("WAL off, kill after a flush of one family: %v", err)
	}
	if err := db.Update(context.Background(), func(tx *pipeline.Txn) error {
		return tx.Put(blobs, []byte("after"), []byte("reopen"))
	}); err != nil {
		t.Fatalf("commit after reopen: %v", err)
	}
}

// noWALFlushChild is the child of TestCrashNoWALFlush: it commits 64 KiB values to the
// blobs family until RocksDB reports flushed bytes, commits 20 more, reports "flushed"
// and waits to be killed.
func noWALFlushChild(t *testing.T, dir string) {
	db, err := pipeline.Open(dir, noWALFlushConfig())
	if err != nil {
		t.Fatalf("child: Open: %v", err)
	}
	blobs, err := db.ColumnFamily(blobsFamily)
	if err != nil {
		t.Fatalf("child: %v", err)
	}
	out := &reporter{}
	if err := out.line(readyLine); err != nil {
		t.Fatalf("child: %v", err)
	}
	val := make([]byte, 64<<10)
	flushedAt := -1
	for i := range 10000 {
		for j := range val {
			val[j] = byte(i*31 + j*7)
		}
		key := fmt.Sprintf("b%05d", i)
		pos, err := db.UpdatePosition(context.Background(), func(tx *pipeline.Txn) error {
			return tx.Put(blobs, []byte(key), val)
		})
		if err != nil {
			t.Fatalf("child: commit %d: %v", i, err)
		}
		if err := out.ack(ack{Kind: "put", Pos: pos, Writes: []write{{F: blobsFamily, K: key}}}); err != nil {
			t.Fatalf("child: %v", err)
		}
		st, err := db.StorageStats()
		if err != nil {
			t.Fatalf("child: %v", err)
		}
		// Only blobs can need a flush this early: the log family's memtable is 64 MiB.
		// A few more commits give the flush time to be installed.
		if st.BytesFlushed > 0 && flushedAt < 0 {
			flushedAt = i
		}
		if flushedAt >= 0 && i >= flushedAt+20 {
			if err := out.ack(ack{Kind: "flushed"}); err != nil {
				t.Fatalf("child: %v", err)
			}
			select {} // wait for the kill
		}
	}
	st, _ := db.StorageStats()
	t.Fatalf("child: the blobs family never flushed: %+v", st)
}
