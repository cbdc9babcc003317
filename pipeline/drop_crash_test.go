package pipeline_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rockline/rockline/internal/testhooks"
	"github.com/rockline/rockline/pipeline"
)

// dropCrashEnv marks the child process of TestDropCrash and names its database folder.
const dropCrashEnv = "ROCKLINE_CRASH_DIR"

// dropCrashLine is what the child prints once DropColumnFamily has returned.
const dropCrashLine = "dropped\n"

// TestDropCrashChild is the child half of TestDropCrash; run directly it does nothing.
// It drops a family while a commit to it is parked after admission, so the physical
// drop is pending, reports that on stdout and waits to be killed.
func TestDropCrashChild(t *testing.T) {
	dir := os.Getenv(dropCrashEnv)
	if dir == "" {
		return
	}
	g := &dropGate{parked: make(chan struct{}, 1), release: make(chan struct{})}
	db, err := pipeline.Open(dir, testhooks.With(pipeline.Config{}, &testhooks.Hooks{AfterAdmit: g.afterAdmit}))
	if err != nil {
		t.Fatalf("child: Open: %v", err)
	}
	doomed := dropCreate(t, db, "doomed")
	for i := range 5 {
		put(t, db, doomed, fmt.Sprintf("k%d", i), "v")
	}
	put(t, db, db.Default(), "survivor", "yes")
	g.park(t, db, doomed, viaCommit, "parked", "p")
	if err := db.DropColumnFamily("doomed"); err != nil {
		t.Fatalf("child: DropColumnFamily: %v", err)
	}
	if s := dropStats(t, db); s.PendingDrops != 1 {
		t.Fatalf("child: PendingDrops = %d, want 1", s.PendingDrops)
	}
	if _, err := os.Stdout.WriteString(dropCrashLine); err != nil {
		t.Fatalf("child: %v", err)
	}
	// Wait to be killed; the bound only keeps an orphaned child from living forever.
	<-time.After(2 * time.Minute)
	t.Fatal("child: not killed")
}

// TestDropCrash kills a process right after DropColumnFamily returned while the
// physical drop was still waiting for a parked commit. The durable intent makes the
// next Open complete the drop: the family is gone and its data unreachable.
func TestDropCrash(t *testing.T) {
	if os.Getenv(dropCrashEnv) != "" {
		t.Skip("in the child process")
	}
	dir := filepath.Join(t.TempDir(), "db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestDropCrashChild$", "-test.count=1", "-test.timeout=3m")
	cmd.Env = append(os.Environ(), dropCrashEnv+"="+dir)
	stdout := &dropLineWatch{want: []byte(dropCrashLine), seen: make(chan struct{})}
	var stderr dropLockedBuffer
	cmd.Stdout, cmd.Stderr = stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start child: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case <-stdout.seen:
	case err := <-exited:
		t.Fatalf("child exited before dropping: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	case <-time.After(deadline):
		cmd.Process.Kill()
		<-exited
		t.Fatalf("child did not report the drop within %v\nstdout:\n%s\nstderr:\n%s", deadline, stdout.String(), stderr.String())
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatalf("kill child: %v", err)
	}
	err := recv(t, exited, "the killed child to exit")
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("child exit: %v, want killed", err)
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child exit: %v, want SIGKILL\nstderr:\n%s", err, stderr.String())
	}

	db := openAt(t, dir, pipeline.Config{})
	dropCheckGone(t, db, "doomed")
	dropCheckCounts(t, db, 0, 1) // completed by Open
	if got := mustGet(t, db, db.Default(), "survivor"); got != "yes" {
		t.Fatalf("survivor = %q", got)
	}
	again := dropCreate(t, db, "doomed")
	for i := range 5 {
		mustAbsent(t, db, again, fmt.Sprintf("k%d", i))
	}
	mustAbsent(t, db, again, "parked")
	put(t, db, again, "k0", "new")
	if got := mustGet(t, db, again, "k0"); got != "new" {
		t.Fatalf("re-created doomed: k0 = %q", got)
	}
	put(t, db, db.Default(), "after", "crash")
	dropCheckDense(t, db)
	if err := db.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	// The completed drop stays completed.
	db2 := openAt(t, dir, pipeline.Config{})
	dropCheckCounts(t, db2, 0, 0)
	doomed, err := db2.ColumnFamily("doomed")
	if err != nil {
		t.Fatalf("re-created doomed after reopen: %v", err)
	}
	if got := mustGet(t, db2, doomed, "k0"); got != "new" {
		t.Fatalf("re-created doomed after reopen: k0 = %q", got)
	}
	mustAbsent(t, db2, doomed, "k1")
}

// dropLineWatch collects a child's stdout and closes seen once want appears in it.
type dropLineWatch struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want []byte
	seen chan struct{}
	once sync.Once
}

func (w *dropLineWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if bytes.Contains(w.buf.Bytes(), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(p), nil
}

func (w *dropLineWatch) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// dropLockedBuffer is a bytes.Buffer safe for the copying goroutine and the test.
type dropLockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *dropLockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *dropLockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
