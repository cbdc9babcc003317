package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rockline/rockline/eventstore"
	"github.com/rockline/rockline/pipeline"
)

// writerEnv makes the test binary a writer child: it opens the folder the variable
// names, appends to streams and writes keys until its standard input closes, and
// prints each committed position on a line of its own.
const writerEnv = "ROCKLINE_CLI_WRITER"

// TestWriterChild is the child's body; it is skipped in an ordinary run.
func TestWriterChild(t *testing.T) {
	dir := os.Getenv(writerEnv)
	if dir == "" {
		t.Skip("only as the writer child of TestCommandsWhileAChildWrites")
	}
	if err := writeUntilStdinCloses(dir); err != nil {
		fmt.Fprintln(os.Stderr, "writer:", err)
		os.Exit(1)
	}
}

func writeUntilStdinCloses(dir string) error {
	ctx := context.Background()
	db, err := pipeline.Open(dir, pipeline.Config{})
	if err != nil {
		return err
	}
	defer db.Close()
	cf, err := db.EnsureColumnFamily("accounts")
	if err != nil {
		return err
	}
	es, err := eventstore.New(db)
	if err != nil {
		return err
	}
	stdinClosed := make(chan struct{})
	go func() { io.Copy(io.Discard, os.Stdin); close(stdinClosed) }()
	for i := 0; ; i++ {
		select {
		case <-stdinClosed:
			return db.Close()
		default:
		}
		stream := fmt.Sprintf("live-%d", i%7)
		r, err := es.Append(ctx, stream, eventstore.Any, eventstore.Event{ID: fmt.Sprint("e", i), Type: "tick", Data: []byte(strconv.Itoa(i))})
		if err != nil {
			return err
		}
		pos, err := db.UpdatePosition(ctx, func(tx *pipeline.Txn) error {
			return tx.Put(cf, []byte(fmt.Sprintf("k%03d", i%100)), []byte(strconv.Itoa(i)))
		})
		if err != nil {
			return err
		}
		fmt.Printf("%d %d\n", max(r.Position, pos), i)
	}
}

// writer is a running writer child and the last position it reported.
type writer struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	pos   atomic.Uint64
	lines chan uint64 // every reported position, for waits; dropped when full
	ended chan error
}

func startWriter(t *testing.T, dir string) *writer {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestWriterChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), writerEnv+"="+dir)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := &writer{cmd: cmd, stdin: stdin, lines: make(chan uint64, 1), ended: make(chan error, 1)}
	go func() { // owned by the writer; ends when the child closes its stdout
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var pos, i uint64
			if _, err := fmt.Sscan(sc.Text(), &pos, &i); err == nil {
				w.pos.Store(pos)
				select {
				case w.lines <- pos:
				default:
				}
			}
		}
		w.ended <- cmd.Wait()
	}()
	t.Cleanup(func() { w.stop(t) })
	return w
}

// past waits until the child reports a position beyond p.
func (w *writer) past(t *testing.T, p uint64) uint64 {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		if cur := w.pos.Load(); cur > p {
			return cur
		}
		select {
		case <-w.lines:
		case err := <-w.ended:
			t.Fatalf("the writer ended (%v) before passing position %d", err, p)
		case <-deadline:
			t.Fatalf("the writer did not pass position %d within a minute", p)
		}
	}
}

// stop closes the child's stdin and waits for it to close the database and exit.
func (w *writer) stop(t *testing.T) {
	t.Helper()
	if w.stdin == nil {
		return
	}
	w.stdin.Close()
	w.stdin = nil
	select {
	case err := <-w.ended:
		if err != nil {
			t.Errorf("writer child: %v", err)
		}
	case <-time.After(time.Minute):
		w.cmd.Process.Kill()
		t.Errorf("writer child did not stop within a minute of its stdin closing")
	}
}

// TestCommandsWhileAChildWrites runs every command on a database a child process holds
// and keeps writing: the read commands (verify, stats, log --follow with filters,
// checkpoint through a secondary) work and see its writes; the ones that change the
// database (compact, truncate) are refused with exit status 1 and a message saying
// why. Once the child is gone they work, and a restored checkpoint verifies.
func TestCommandsWhileAChildWrites(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	w := startWriter(t, dir)
	start := w.past(t, 20)

	// log --follow sees commits made after it started.
	follow := exec.Command(binary, "log", "--dir", dir, "--follow", "--json", "--poll", "20ms", "--stream", "^live-3$", "--from", strconv.FormatUint(start, 10))
	followOut, err := follow.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var followErr strings.Builder
	follow.Stderr = &followErr
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	seen := make(chan pipeline.LogEntry, 1024)
	go func() { // owned by this test; ends when the follower's stdout closes
		sc := bufio.NewScanner(followOut)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var e pipeline.LogEntry
			if json.Unmarshal(sc.Bytes(), &e) == nil {
				seen <- e
			}
		}
		close(seen)
	}()
	// The follower opened before it printed its first entry, so its history ends at or
	// below the child's position then: entries 40 past that come from following.
	var lastSeen, target uint64
	for target == 0 || lastSeen <= target {
		select {
		case e, ok := <-seen:
			if !ok {
				t.Fatalf("log --follow ended early: %s", followErr.String())
			}
			if len(e.Events) != 1 || e.Events[0].Stream != "live-3" || len(e.Writes) != 0 || e.Position <= lastSeen {
				t.Fatalf("log --follow --stream ^live-3$ printed %+v after position %d", e, lastSeen)
			}
			lastSeen = e.Position
			if target == 0 {
				target = w.past(t, w.pos.Load()+40)
			}
		case <-time.After(time.Minute):
			t.Fatalf("log --follow printed nothing past %d within a minute (target %d): %s", lastSeen, target, followErr.String())
		}
	}
	follow.Process.Signal(syscall.SIGINT)
	for range seen { // read to the end before Wait, which closes the pipe
	}
	if err := follow.Wait(); err != nil {
		t.Errorf("log --follow after SIGINT: %v (%s)", err, followErr.String())
	}

	if out, _, code := run(t, "verify", "--dir", dir); code != 0 || !strings.Contains(out, "verify: ok") || !strings.Contains(out, "state     ok") {
		t.Errorf("verify of the live database: exit %d:\n%s", code, out)
	}
	if out, _, code := run(t, "stats", "--dir", dir); code != 0 || !strings.Contains(out, "L0 FILES") || !strings.Contains(out, "accounts") {
		t.Errorf("stats: exit %d:\n%s", code, out)
	}
	cp := filepath.Join(t.TempDir(), "cp")
	out, _, code := run(t, "checkpoint", cp, "--dir", dir, "--json")
	var took struct {
		Position uint64 `json:"position"`
		Recorded bool   `json:"recorded"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &took) != nil || took.Recorded || took.Position < start {
		t.Errorf("checkpoint of the live database: exit %d, %s; want a copy through a secondary at %d or later", code, out, start)
	}
	for _, a := range [][]string{{"compact"}, {"truncate", "--before", "2"}} {
		_, errOut, code := run(t, append(a, "--dir", dir)...)
		if code != 1 || !strings.Contains(errOut, "held by another process") || !strings.Contains(errOut, "needs the database to itself") {
			t.Errorf("%v while the child writes: exit %d, %q; want 1 and why", a, code, errOut)
		}
	}
	w.past(t, w.pos.Load()) // the child kept writing through all of it
	w.stop(t)

	// With the folder free: a recorded checkpoint allows truncation; compact; restore.
	if _, errOut, code := run(t, "truncate", "--before", "5", "--dir", dir); code != 1 || !strings.Contains(errOut, "checkpoint") {
		t.Errorf("truncate without a recorded checkpoint: exit %d, %q", code, errOut)
	}
	cp2 := filepath.Join(t.TempDir(), "cp2")
	out, _, code = run(t, "checkpoint", cp2, "--dir", dir, "--json")
	if code != 0 || json.Unmarshal([]byte(out), &took) != nil || !took.Recorded {
		t.Fatalf("checkpoint of the idle database: exit %d, %s", code, out)
	}
	if out, _, code := run(t, "truncate", "--before", strconv.FormatUint(took.Position, 10), "--dir", dir); code != 0 || !strings.Contains(out, fmt.Sprint("starts at ", took.Position)) {
		t.Errorf("truncate: exit %d, %s", code, out)
	}
	if out, _, code := run(t, "compact", "--dir", dir); code != 0 || !strings.Contains(out, "compact: ") {
		t.Errorf("compact: exit %d, %s", code, out)
	}
	if out, _, code := run(t, "verify", "--dir", dir); code != 0 || !strings.Contains(out, "truncated below") {
		t.Errorf("verify after truncation: exit %d:\n%s", code, out)
	}
	restored := filepath.Join(t.TempDir(), "restored")
	if out, _, code := run(t, "restore", cp, "--dir", restored); code != 0 || !strings.Contains(out, "restore: ") {
		t.Fatalf("restore: exit %d, %s", code, out)
	}
	if out, _, code := run(t, "verify", "--dir", restored, "--json"); code != 0 || !strings.Contains(out, `"ok": true`) {
		t.Errorf("verify of the restored copy: exit %d:\n%s", code, out)
	}
	if _, err := os.Stat(restored + ".restoring"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("restore left its staging folder: %v", err)
	}
}

// TestVerifyFindsDamage: verify exits 1 and names the problem when the stream index
// disagrees with the log.
func TestVerifyFindsDamage(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	db, err := pipeline.Open(dir, pipeline.Config{})
	if err != nil {
		t.Fatal(err)
	}
	es, err := eventstore.New(db)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := es.Append(context.Background(), "s", eventstore.Any, eventstore.Event{Type: fmt.Sprint("t", i)}); err != nil {
			t.Fatal(err)
		}
	}
	layer, err := db.LayerFamily("streams")
	if err != nil {
		t.Fatal(err)
	}
	key := append([]byte("rs\x00"), 0, 0, 0, 0, 0, 0, 0, 1)
	if err := db.Update(context.Background(), func(tx *pipeline.Txn) error { return tx.Delete(layer, key) }); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := run(t, "verify", "--dir", dir)
	if code != 1 || !strings.Contains(out, "streams   FAILED") || !strings.Contains(out, `"s": records jump from revision 0 to 2`) || !strings.Contains(errOut, "verify found problems") {
		t.Errorf("verify of a damaged index: exit %d:\n%s\n%s", code, out, errOut)
	}
	// Progress: none when standard error is a pipe, bars with --progress=always.
	if _, errOut, _ := run(t, "verify", "--dir", dir); strings.Contains(errOut, "%") {
		t.Errorf("verify drew progress into a pipe: %q", errOut)
	}
	if _, errOut, _ := run(t, "verify", "--dir", dir, "--progress", "always"); !strings.Contains(errOut, "log") || !strings.Contains(errOut, "replay") || !strings.Contains(errOut, "100%") {
		t.Errorf("verify --progress=always drew %q, want bars per stage", errOut)
	}
}
