package crash

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/rockline/rockline/pipeline"
	"github.com/rockline/rockline/storage"
)

// fullDiskEnv names the database folder of TestFullDisk's child; fullDiskShapeEnv
// names the shape (see fullDiskShapes).
const (
	fullDiskEnv      = "ROCKLINE_FULLDISK_CHILD"
	fullDiskShapeEnv = "ROCKLINE_FULLDISK_SHAPE"
	// fullDiskStrictEnv=1 fails the test when RocksDB aborts the process (see
	// TestFullDisk) instead of reporting it.
	fullDiskStrictEnv = "ROCKLINE_FULLDISK_STRICT"
)

// fullDiskShape is one way to fill the disk: the configuration and the ballast freed
// afterwards so that RocksDB has room to recover (it replays the WAL and flushes what
// it rebuilt before the WAL goes).
type fullDiskShape struct {
	ballastMiB int
	cfg        pipeline.Config
}

var fullDiskShapes = map[string]fullDiskShape{
	// 1 MiB write buffers: the data family flushes often, so the disk usually fills
	// during a flush (an SST write fails and RocksDB stops writes).
	"small-buffers": {ballastMiB: 12, cfg: pipeline.Config{
		Sync:           true,
		Families:       map[string]storage.FamilyOptions{"data": {WriteBufferSize: storage.MinWriteBufferSize}},
		FamilyDefaults: storage.FamilyOptions{WriteBufferSize: storage.MinWriteBufferSize},
	}},
	// Default 64 MiB buffers: nothing flushes, the WAL append itself fails.
	"wal-full": {ballastMiB: 20, cfg: pipeline.Config{Sync: true, Families: map[string]storage.FamilyOptions{"data": {}}}},
}

// TestFullDisk fills a 32 MiB tmpfs with commits until they fail, in a child process.
// The child reports every acknowledged commit, the errors of the failing ones and the
// outcome of Close. Then the parent deletes a ballast file written beforehand to free
// space, reopens the database and checks that every acknowledged commit is there, the
// log is dense and replays to the state, and it commits again. It needs root (mount);
// elsewhere it is skipped with a message.
//
// Commits on the full disk must fail with an error that says so, never a Go panic.
// RocksDB 7.8 itself may abort the process, though: once its info LOG file (in the
// same folder) has failed a write, its next log line trips an assertion that Debian's
// librocksdb is built with (EnvLogger, fixed upstream in RocksDB 8.1, facebook/rocksdb
// #11314). The child runs in its own process for that reason; such an abort is
// reported, and counts as a crash: nothing acknowledged may be lost. With
// ROCKLINE_FULLDISK_STRICT=1 it fails the test.
func TestFullDisk(t *testing.T) {
	if os.Getenv(childEnv) != "" || os.Getenv(fullDiskEnv) != "" {
		t.Skip("in a child process")
	}
	for _, shape := range []string{"small-buffers", "wal-full"} {
		t.Run(shape, func(t *testing.T) { fullDisk(t, shape) })
	}
}

func fullDisk(t *testing.T, shapeName string) {
	shape := fullDiskShapes[shapeName]
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=32m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("full-disk test needs a 32 MiB tmpfs (root and mount): mount failed: %v: %s", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", mnt, err, out)
		}
	})
	ballast := filepath.Join(mnt, "ballast")
	if err := os.WriteFile(ballast, make([]byte, shape.ballastMiB<<20), 0o644); err != nil {
		t.Fatalf("ballast: %v", err)
	}
	dir := filepath.Join(mnt, "db")

	cmd := exec.Command(os.Args[0], "-test.run=^TestFullDiskChild$", "-test.count=1", "-test.timeout=3m")
	cmd.Env = append(os.Environ(), fullDiskEnv+"="+dir, fullDiskShapeEnv+"="+shapeName)
	acks, stderr, runErr := runToExit(t, cmd)
	var acked []write
	var errs []string
	closed := false
	for _, a := range acks {
		switch a.Kind {
		case "put":
			acked = append(acked, a.Writes...)
		case "error":
			errs = append(errs, a.Err)
		case "closed":
			closed = true
			if a.Err != "" {
				t.Logf("Close on the full disk: %s", a.Err)
			}
		}
	}
	for i, e := range errs {
		t.Logf("failed commit %d on the full disk: %s", i+1, e)
	}
	var ee *exec.ExitError
	switch {
	case runErr == nil:
		if len(errs) == 0 {
			t.Fatalf("no commit failed on a full 32 MiB tmpfs (%d acknowledged)", len(acked))
		}
		if !strings.Contains(strings.ToLower(errs[0]), "space") {
			t.Errorf("the first failed commit's error does not say the disk is full: %s", errs[0])
		}
		if !closed {
			t.Errorf("the child did not report Close")
		}
		t.Logf("disk full after %d acknowledged commits; every later commit failed cleanly and Close returned", len(acked))
	case errors.As(runErr, &ee) && isAbort(ee) && strings.Contains(stderr, "Assertion") && strings.Contains(stderr, "writable_file_writer"):
		msg := fmt.Sprintf("KNOWN ISSUE: RocksDB aborted the process on the full disk after %d acknowledged commits and %d clean commit failures (assertion in an assertion-enabled librocksdb 7.8, fixed upstream in 8.1): %s",
			len(acked), len(errs), firstLine(stderr, "Assertion"))
		if os.Getenv(fullDiskStrictEnv) == "1" {
			t.Error(msg)
		} else {
			t.Log(msg)
		}
	default:
		t.Fatalf("child: %v\nstderr:\n%s", runErr, tail(stderr, 6000))
	}

	// Free space, reopen, and check everything acknowledged.
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	db, err := pipeline.Open(dir, shape.cfg)
	if err != nil {
		t.Fatalf("reopen after freeing space: %v", err)
	}
	defer db.Close()
	data, err := db.ColumnFamily("data")
	if err != nil {
		t.Fatal(err)
	}
	got, err := dumpFamily(db, data)
	if err != nil {
		t.Fatal(err)
	}
	lost := 0
	for _, w := range acked {
		if got[w.K] != w.V {
			lost++
			if lost <= 5 {
				t.Errorf("acknowledged key %s: %q after reopen, want %q", w.K, got[w.K], w.V)
			}
		}
	}
	if lost > 0 {
		t.Fatalf("%d of %d acknowledged commits lost", lost, len(acked))
	}
	if _, err := readLog(db); err != nil {
		t.Fatal(err)
	}
	if err := checkReplay(context.Background(), db, filepath.Join(t.TempDir(), "rebuild"), nil); err != nil {
		t.Fatal(err)
	}
	if err := db.Update(context.Background(), func(tx *pipeline.Txn) error { return tx.Put(data, []byte("after"), []byte("reopen")) }); err != nil {
		t.Fatalf("commit after reopen: %v", err)
	}
	t.Logf("reopened with all %d acknowledged commits (%d keys, log of %d entries) and committed again", len(acked), len(got), db.LastPosition())
}

// TestFullDiskChild is the child half of TestFullDisk; run directly it does nothing.
func TestFullDiskChild(t *testing.T) {
	dir := os.Getenv(fullDiskEnv)
	if dir == "" {
		return
	}
	shape := fullDiskShapes[os.Getenv(fullDiskShapeEnv)]
	out := &reporter{}
	report := func(a ack) {
		if err := out.ack(a); err != nil {
			t.Fatalf("child: %v", err)
		}
	}
	db, err := pipeline.Open(dir, shape.cfg)
	if err != nil {
		t.Fatalf("child: Open on tmpfs: %v", err)
	}
	data, err := db.ColumnFamily("data")
	if err != nil {
		t.Fatalf("child: %v", err)
	}
	ctx := context.Background()
	val := make([]byte, 16<<10)
	failed := 0
	for i := 0; i < 100000 && failed < 4; i++ { // 1.6 GB of values: far past 32 MiB
		key := fmt.Sprintf("k%06d", i)
		for j := range val {
			val[j] = byte(i + j*13)
		}
		pos, err := db.UpdatePosition(ctx, func(tx *pipeline.Txn) error { return tx.Put(data, []byte(key), val) })
		if err != nil {
			failed++
			report(ack{Kind: "error", Err: err.Error()})
			continue
		}
		report(ack{Kind: "put", Pos: pos, Writes: []write{{F: "data", K: key, V: shown(val)}}})
	}
	a := ack{Kind: "closed"}
	if err := db.Close(); err != nil {
		a.Err = err.Error()
	}
	report(a)
}

// runToExit runs cmd to its end and returns its ACK lines, its stderr and its exit.
func runToExit(t *testing.T, cmd *exec.Cmd) ([]ack, string, error) {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start child: %v", err)
	}
	var acks []ack
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		if js, ok := strings.CutPrefix(sc.Text(), ackPrefix); ok {
			var a ack
			if err := json.Unmarshal([]byte(js), &a); err == nil {
				acks = append(acks, a)
			}
		}
	}
	err = cmd.Wait()
	return acks, stderr.String(), err
}

func isAbort(ee *exec.ExitError) bool {
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ((ws.Signaled() && ws.Signal() == syscall.SIGABRT) || ws.ExitStatus() == 2)
}

func firstLine(s, containing string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, containing) {
			return strings.TrimSpace(l)
		}
	}
	return ""
}
